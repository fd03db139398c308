"""Which API the remote backend speaks (``remoteApi``) and the request body of each.

- ``completions``: OpenAI-compatible ``/v1/completions`` with the assembled prompt (token
  ids or text, FIM tokens written out): what llama-server, vLLM, SGLang and
  llama-cpp-python's server all take.
- ``infill``: llama-server's ``/infill``: the prompt in parts
  (:class:`~lsp_assist.backends.base.InfillParts`): ``input_prefix`` (the editing zone
  above the cursor line), ``input_suffix``, ``prompt`` (the typed part of the line) and
  ``input_extra`` (the related definitions and similar chunks, one ``{"filename",
  "text"}`` each), with ``cache_prompt``; the server builds the FIM prompt with the
  model's own tokens (repository tokens included) and reports what it evaluated.
- ``auto``: ``infill`` while the server offers it. Whether it does is learnt from the
  first request (no probe of its own): ``/infill`` answering 404/405 (no such endpoint:
  vLLM, SGLang, llama-cpp-python) or 501 (llama-server whose model has no FIM tokens)
  switches this backend to ``completions`` at once, in the same request. The answer is
  kept until the server fails (it may come back as another server), then asked again.

Both go through the same streamed request of :mod:`~lsp_assist.backends.remote` (caps,
cancel, retries, circuit breaker); only the path and the body differ here.
"""

from __future__ import annotations

from typing import Any

from lsp_assist.backends.base import GenerationRequest, InfillParts
from lsp_assist.config import RemoteApi

COMPLETIONS_PATH = "/v1/completions"
INFILL_PATH = "/infill"
ABSENT = frozenset({404, 405, 501})
"""What a server without a usable ``/infill`` answers it."""
N_CACHE_REUSE = 64
"""llama-server's ``n_cache_reuse`` for ``/infill``: cached runs of at least this many
tokens are reused at a shifted position. Measured (docs/backends.md): a zone that lost
its top lines, 140 tokens evaluated -> 1; an extra chunk dropped, 209 -> 1; no help for
an insertion (a keystroke, a chunk added). Large enough that a short run matching by
chance is not reused out of its context (llama.vim uses 256)."""


class ApiChoice:
    """The ``remoteApi`` setting and, for ``auto``, what the server turned out to offer."""

    def __init__(self, setting: RemoteApi) -> None:
        self.setting = setting
        self.infill_offered: bool | None = None
        """``/infill`` answered (True), was absent (False), not asked yet (None)."""
        self.server_timings = False
        """The server is llama-server: ``/infill`` answered, or a chunk carried its
        ``timings``. ``/v1/completions`` bodies then ask for them in every chunk
        (``timings_per_token``): a stream closed at a stop loses its last chunk, the only
        one that has them otherwise. Never sent before: other servers may refuse it."""

    @property
    def wants_parts(self) -> bool:
        """True when requests should carry their infill parts."""
        return self.setting != "completions" and self.infill_offered is not False

    def use_infill(self, request: GenerationRequest) -> bool:
        """True when ``request`` goes to ``/infill``."""
        if request.infill is None or self.setting == "completions":
            return False
        return self.setting == "infill" or self.infill_offered is not False

    def absent(self) -> bool:
        """Record that ``/infill`` is absent; True when ``auto`` falls back to completions."""
        if self.setting != "auto":
            return False
        self.infill_offered = False
        return True

    def answered(self, infill: bool) -> None:
        """Record an answer (from ``/infill`` when ``infill``)."""
        if infill:
            self.infill_offered = True
            self.server_timings = True

    def forget(self) -> None:
        """Ask again at the next request (the server failed: it may come back as another)."""
        if self.setting == "auto":
            self.infill_offered = None

    @property
    def current(self) -> str:
        """What the next request with parts speaks: ``infill``, ``completions`` or ``auto``."""
        if self.setting != "auto":
            return self.setting
        if self.infill_offered is None:
            return "auto"
        return "infill" if self.infill_offered else "completions"


def _sampling(request: GenerationRequest) -> dict[str, Any]:
    """Greedy sampling, streamed, with the request's stop strings (both APIs take these)."""
    body: dict[str, Any] = {"temperature": 0.0, "top_k": 1, "stream": True}
    if request.stop:
        body["stop"] = [s for s in request.stop if s][:4]
    return body


def completions_body(
    request: GenerationRequest, prompt: str | list[int], model: str, *, timings: bool = False
) -> dict[str, Any]:
    """The ``/v1/completions`` body of ``request`` with its prompt as ids or text;
    ``timings``: ask llama-server for its counts in every chunk (ApiChoice.server_timings)."""
    body: dict[str, Any] = {"prompt": prompt, "max_tokens": max(1, request.max_tokens)}
    body.update(_sampling(request))
    if timings:
        body["timings_per_token"] = True
    if model:
        body["model"] = model
    return body


def infill_body(request: GenerationRequest, parts: InfillParts) -> dict[str, Any]:
    """The ``/infill`` body of ``request``: its parts, the prompt cache on."""
    body: dict[str, Any] = {
        "input_prefix": parts.prefix,
        "input_suffix": parts.suffix,
        "input_extra": [{"filename": name, "text": text} for name, text in parts.extra],
        "prompt": parts.typed,
        "n_predict": max(1, request.max_tokens),
        "cache_prompt": True,
        # every chunk then carries timings.cache_n and tokens_evaluated: the first one
        # says what the server reused even when the client closes the stream at a stop
        "timings_per_token": True,
    }
    if N_CACHE_REUSE > 0:
        body["n_cache_reuse"] = N_CACHE_REUSE
    body.update(_sampling(request))
    return body
