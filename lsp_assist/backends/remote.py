"""A client for OpenAI-compatible ``/v1/completions`` servers, for teams sharing one model.

Works with llama.cpp's llama-server, llama-cpp-python's server, vLLM and Ollama:
streaming (server-sent events), bounded retries with exponential backoff (only before
any text has arrived: a half-streamed answer is never silently restarted), and a
circuit breaker (:mod:`~lsp_assist.backends.circuit`). The API key is read from the
environment variable named by ``remoteApiKeyEnv``, sent as a bearer token, and never
logged or put in an error message.

Time caps. A request's caps hold whatever the server does (says nothing, drips a byte
a second, streams junk): until the first text, every connect, write and read of every
attempt, retry backoffs included, must end by ``promptTimeoutMs`` after ``generate``
started; from the first text on, by ``generationTimeoutMs`` after it. The deadline is
enforced in the transport (:mod:`~lsp_assist.backends.transport`), which cuts each
socket operation's timeout to the time left, so ``generate`` returns with
``stop_reason == "timeout"`` at the cap (plus milliseconds), keeping any text already
streamed. ``remoteReadTimeoutMs`` and ``remoteConnectTimeoutMs`` still bound a single
read or connect (a shorter read timeout lets a retry happen within the prompt cap). A
server that sent no text within the prompt cap counts as a failure for the circuit
breaker, so a dead server costs a few capped requests, then none.

Cancellation. A cancel shuts the request's socket down from the cancelling thread
(see the transport module), so ``generate`` returns within milliseconds wherever it
blocks: connecting, waiting for the prompt to be evaluated, reading a trickle. A
cancel is neither a retry nor a failure.

Tokens. The client needs the server model's token ids: a local vocabulary of
``modelPath``, the server's tokenizer endpoints, or an estimate, in that order
(:mod:`~lsp_assist.backends.remote_tokens`). Server-sent events are read by
:mod:`~lsp_assist.backends.event_stream`.

The prompt goes to the server as token ids when they are real ids (llama-server and
vLLM accept a list of ints) and as text otherwise; a server that rejects ids (HTTP
400/422, e.g. llama-cpp-python's) is switched to text for the rest of the session.

APIs. ``remoteApi`` chooses ``/v1/completions`` (the assembled prompt) or llama-server's
``/infill`` (the prompt's parts, :attr:`GenerationRequest.infill`), or ``auto`` (infill
where offered): the bodies and the choice are :mod:`~lsp_assist.backends.remote_api`'s;
both are streamed, capped, cancelled and retried by the same code here.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    time_caps,
)
from lsp_assist.backends.circuit import CircuitBreaker
from lsp_assist.backends.event_stream import (
    Attempt,
    CompletionEvents,
    check_event_stream,
    error_text,
)
from lsp_assist.backends.remote_api import (
    ABSENT,
    COMPLETIONS_PATH,
    INFILL_PATH,
    ApiChoice,
    completions_body,
    infill_body,
)
from lsp_assist.backends.remote_tokens import RemoteTokenizer, server_ids
from lsp_assist.backends.streaming import TextStream
from lsp_assist.backends.transport import CancellableNetwork, Exchange, cancellable_transport
from lsp_assist.backends.vocab import Vocabulary, read_model_info
from lsp_assist.config import ModelSettings
from lsp_assist.errors import GenerationCancelled, ModelLoadError, RemoteBackendError

logger = logging.getLogger(__name__)

TokenizerMode = Literal["auto", "local", "server", "estimate"]
_TRANSPORT_ERRORS = (httpx.TransportError, httpx.StreamError)

__all__ = ["CircuitBreaker", "RemoteBackend"]


class _Retryable(Exception):
    """A failure before any text arrived: the request may be retried."""

    def __init__(self, message: str, status: int = 0, *, infill: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.infill = infill
        """The request went to ``/infill``."""


class RemoteBackend(Backend):
    """OpenAI-compatible completions over HTTP with caps, retries and a circuit breaker."""

    name = "remote"

    def __init__(
        self,
        settings: ModelSettings,
        *,
        model_path: Path | None = None,
        tokenizer: TokenizerMode = "auto",
        circuit_threshold: int = 3,
        circuit_cooldown_s: float = 10.0,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.base_url = settings.remote_url.rstrip("/")
        self.backoff_s = backoff_s
        self.breaker = CircuitBreaker(circuit_threshold, circuit_cooldown_s)
        headers = {"Accept": "text/event-stream"}
        key_env = settings.remote_api_key_env
        api_key = os.environ.get(key_env, "") if key_env else ""
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._has_key = bool(api_key)
        # a caller's transport (tests, proxies) is used as is: cancels and caps are then
        # noticed between streamed chunks only
        self._network: CancellableNetwork | None = None
        if transport is None:
            transport, self._network = cancellable_transport()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=self._timeout(None),
            transport=transport,
        )
        vocab: Vocabulary | None = None
        path = model_path or (Path(settings.model_path) if settings.model_path else None)
        if tokenizer in ("auto", "local") and path is not None:
            vocab = Vocabulary(Path(path).expanduser())
        elif tokenizer == "local":
            raise ModelLoadError("tokenizer 'local' needs modelPath (the server's GGUF)")
        self.tokenizer = RemoteTokenizer(
            self._post_json, vocab=vocab, estimate=tokenizer == "estimate"
        )
        self._ids_rejected = False
        """The server refused a token-id prompt: text is sent from then on."""
        self.api = ApiChoice(settings.remote_api)
        self._counters = {
            "requests": 0,
            "failures": 0,
            "retries": 0,
            "cancelled": 0,
            "timeouts": 0,
            "generated_chars": 0,
        }
        self._info = self._build_info()

    # --- model metadata and tokens ---------------------------------------------------------

    def _build_info(self) -> ModelInfo:
        vocab = self.tokenizer.vocab
        if vocab is not None:
            local = read_model_info(vocab)
            return dataclasses.replace(
                local,
                path=self.base_url,
                name=self.settings.remote_model or local.name,
                special_tokens=dict(local.special_tokens),
            )
        return ModelInfo(path=self.base_url, name=self.settings.remote_model)

    @property
    def token_mode(self) -> str:
        """Where token ids come from: ``local``, ``server`` or ``estimate``."""
        return self.tokenizer.mode

    @property
    def _send_ids(self) -> bool:
        """Whether prompts go to the server as ids (real ones, not refused), else text."""
        return self.tokenizer.mode != "estimate" and not self._ids_rejected

    @property
    def wants_infill_parts(self) -> bool:
        """True while requests may go to ``/infill`` (they then need their parts)."""
        return self.api.wants_parts

    @property
    def info(self) -> ModelInfo:
        """What is known about the server's model (full metadata with a local vocabulary)."""
        return self._info

    def _timeout(self, left: float | None) -> httpx.Timeout:
        """httpx's per-operation timeouts, none longer than ``left`` seconds."""
        read = self.settings.remote_read_timeout_ms / 1000.0
        connect = self.settings.remote_connect_timeout_ms / 1000.0
        if left is not None:
            read, connect = min(read, left), min(connect, left)
        return httpx.Timeout(read, connect=connect)

    @contextmanager
    def _guard(self, cancel: CancelToken, deadline: float) -> Iterator[Exchange | None]:
        """Bound this thread's I/O by ``deadline`` and let ``cancel`` end it."""
        if self._network is None:
            yield None
            return
        with self._network.guard(cancel, deadline) as exchange:
            yield exchange

    def _fail(self) -> None:
        self._counters["failures"] += 1
        self.breaker.failure()
        self.api.forget()

    def _post_json(
        self,
        path: str,
        body: dict[str, Any],
        *,
        cancel: CancelToken | None = None,
        deadline: float | None = None,
    ) -> tuple[int, Any]:
        """POST to a tokenizer endpoint within the prompt cap; return (status, JSON body).

        ``cancel`` defaults to the token of the request this thread works for. Transport
        errors, timeouts and junk count as failures for the circuit breaker.
        """
        self.breaker.check()
        cancel = cancel or CancelToken.current() or CancelToken()
        if cancel.cancelled:
            raise GenerationCancelled(f"{path}: {cancel.reason}")
        if deadline is None:
            deadline = time.monotonic() + time_caps(self.settings).prompt_s
        left = deadline - time.monotonic()
        try:
            with self._guard(cancel, deadline):
                resp = self._client.post(
                    path,
                    json=body,
                    headers={"Accept": "application/json"},
                    timeout=self._timeout(max(left, 0.0)),
                )
            if cancel.cancelled:  # the body may have ended where our cancel cut it
                raise GenerationCancelled(f"{path}: {cancel.reason}")
            if resp.status_code >= 400:
                if resp.status_code >= 500:
                    self._fail()
                return resp.status_code, None
            return resp.status_code, resp.json()
        except _TRANSPORT_ERRORS as exc:
            if cancel.cancelled:
                raise GenerationCancelled(f"{path}: {cancel.reason}") from exc
            self._fail()
            raise RemoteBackendError(f"{path} failed: {type(exc).__name__}") from exc
        except ValueError as exc:  # a 200 whose body is not JSON
            self._fail()
            raise RemoteBackendError(f"{path} answered with something other than JSON") from exc

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids without BOS (estimated ids in estimate mode; see module doc).

        With the server's tokenizer, raises RemoteBackendError when the call fails or
        the circuit is open, and GenerationCancelled when the current request's token
        is cancelled meanwhile.
        """
        return self.tokenizer.tokenize(text, special=special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens`` (raises like :meth:`tokenize`)."""
        return self.tokenizer.detokenize(tokens)

    # --- generation -------------------------------------------------------------------------

    def _prompt_payload(
        self, tokens: Sequence[int], cancel: CancelToken, deadline: float
    ) -> str | list[int]:
        if self._send_ids and server_ids(tokens):
            return list(tokens)
        bos = self._info.bos_id
        body = list(tokens)
        if body and bos is not None and body[0] == bos:
            body = body[1:]  # the server adds its own BOS to text prompts
        prefix = self.tokenizer.server_prefix
        if prefix and body[: len(prefix)] == prefix:
            body = body[len(prefix) :]
        return self.tokenizer.detokenize(body, cancel=cancel, deadline=deadline)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream a completion within the request's caps (module doc); retries, then raises.

        Raises RemoteBackendError when the server failed (after retries) and
        CircuitOpenError while the circuit is open; a cancel or a cap is a result.
        """
        self._counters["requests"] += 1
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        if request.cancel.cancelled:
            result.stop_reason = "cancelled"
            self._counters["cancelled"] += 1
            return result
        self.breaker.check()
        try:
            healthy = self._attempts(request, result, t0)
        except GenerationCancelled:  # while detokenizing the prompt on the server
            result.stop_reason, healthy = "cancelled", None
        except RemoteBackendError:
            self._fail()
            raise
        if healthy:
            self.breaker.success()
        elif healthy is False:
            self._fail()
        result.finish(t0)
        if result.stop_reason == "cancelled":
            self._counters["cancelled"] += 1
        elif result.stop_reason == "timeout":
            self._counters["timeouts"] += 1
        self._counters["generated_chars"] += len(result.text)
        return result

    def _attempts(
        self, request: GenerationRequest, result: GenerationResult, t0: float
    ) -> bool | None:
        """Run attempts until one answers or the prompt cap is spent; return the verdict.

        True: the server answered (success for the circuit breaker); False: no text
        within the prompt cap (a failure); None: cancelled before any text (no verdict).
        """
        caps = time_caps(self.settings, request)
        prompt_deadline = time.monotonic() + caps.prompt_s
        attempts = max(0, self.settings.remote_retries) + 1
        failed = 0
        switched = False
        while True:
            try:
                return self._stream_once(request, result, t0, prompt_deadline, caps.generation_s)
            except _Retryable as exc:
                if exc.infill and exc.status in ABSENT:
                    if self.api.absent():
                        logger.info("the server has no /infill (HTTP %d): completions", exc.status)
                        continue
                    raise RemoteBackendError(
                        f"{self.base_url} offers no /infill for its model (HTTP {exc.status}):"
                        " set remoteApi to completions or auto"
                    ) from exc
                ids_refused = exc.status in (400, 422, 500) and not exc.infill
                if ids_refused and self._send_ids and not switched:
                    # llama-cpp-python's server answers a list-of-ints prompt with 500
                    logger.info("server rejected a token-id prompt; sending text from now on")
                    self._ids_rejected = True
                    switched = True
                    continue
                if 400 <= exc.status < 500 and exc.status != 429:
                    raise RemoteBackendError(f"remote completion failed: {exc}") from None
                failed += 1
                delay = self.backoff_s * (2 ** (failed - 1))
                if failed >= attempts or time.monotonic() + delay >= prompt_deadline:
                    raise RemoteBackendError(
                        f"remote completion failed after {failed} attempt(s): {exc}"
                    ) from None
                self._counters["retries"] += 1
                if request.cancel._event.wait(delay):
                    result.stop_reason = "cancelled"
                    return None

    def _stream_once(
        self,
        request: GenerationRequest,
        result: GenerationResult,
        t0: float,
        prompt_deadline: float,
        generation_cap: float,
    ) -> bool | None:
        """One streamed request; raises _Retryable before any text, else RemoteBackendError.

        Returns the verdict for the circuit breaker, as :meth:`_attempts` does.
        """
        cancel = request.cancel
        attempt = Attempt(deadline=prompt_deadline, generation_cap=generation_cap)
        if attempt.expired():
            result.stop_reason = "timeout"
            return False
        infill = self.api.use_infill(request)
        payload: dict[str, Any]
        if infill and request.infill is not None:
            path, payload = INFILL_PATH, infill_body(request, request.infill)
        else:
            prompt = self._prompt_payload(request.prompt_tokens, cancel, prompt_deadline)
            path = COMPLETIONS_PATH
            payload = completions_body(
                request, prompt, self.settings.remote_model, timings=self.api.server_timings
            )
        stream = TextStream(request)
        timeout = self._timeout(max(prompt_deadline - time.monotonic(), 0.0))
        try:
            with (
                self._guard(cancel, prompt_deadline) as exchange,
                self._client.stream("POST", path, json=payload, timeout=timeout) as resp,
            ):
                attempt.exchange = exchange
                if resp.status_code >= 400:
                    raise _Retryable(
                        f"{path}: HTTP {resp.status_code}: {error_text(resp)}",
                        resp.status_code,
                        infill=infill,
                    )
                self.api.answered(infill)
                check_event_stream(resp)
                events = CompletionEvents(request, result, stream, attempt, t0)
                events.read(resp)
                if events.saw_timings:
                    self.api.server_timings = True
                if exchange is not None:
                    # before the response closes and its connection may go back to the
                    # pool, where a late cancel must not shut it down
                    exchange.disarm()
        except _TRANSPORT_ERRORS as exc:
            if cancel.cancelled:
                # our cancel shut the socket down (or it broke after the cancel): the
                # answer is no longer wanted, so this is neither a failure nor a retry
                result.stop_reason = "cancelled"
            elif attempt.done:
                pass  # the answer was complete; what came after it does not matter
            elif isinstance(exc, httpx.TimeoutException) and attempt.expired():
                result.stop_reason = "timeout"
            elif attempt.first_text_at is None:
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            else:
                raise RemoteBackendError(
                    f"the connection to {self.base_url} broke mid-stream ({type(exc).__name__})"
                ) from exc
        result.text = stream.finish()
        if not result.stop_reason:
            result.stop_reason = "eos"
        if self.token_mode == "local" and result.text:
            result.tokens = self.tokenize(result.text)
        if attempt.first_text_at is not None or attempt.done:
            return True
        if result.stop_reason == "cancelled":
            return None
        return result.stop_reason != "timeout"

    # --- status -------------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Counters, circuit state and tokenizer mode (never the API key)."""
        return {
            "backend": self.name,
            "url": self.base_url,
            **self._counters,
            "circuit": self.breaker.state,
            "circuit_opened": self.breaker.times_opened,
            "token_mode": self.token_mode,
            "prompt_as_ids": self._send_ids,
            "api": self.api.current,
            "api_key_set": self._has_key,
        }

    def close(self) -> None:
        """Close the HTTP client and the vocabulary."""
        self._client.close()
        self.tokenizer.close()

    def __repr__(self) -> str:
        return f"RemoteBackend(url={self.base_url!r}, token_mode={self.token_mode!r})"
