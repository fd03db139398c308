"""The backend contract: model metadata, generation requests and results, cancellation.

A backend turns a list of prompt token ids into generated text. ``generate`` blocks and
is called from the engine's own single-thread executor, never from the event loop.

The contract also carries the model-free tokenizer
(:class:`~lsp_assist.backends.approx_tokens.ApproxTokenizer`, re-exported here), so the
stages that see only this module (context, telemetry) can count tokens without a model.
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields
from typing import Any, TypeVar

from lsp_assist.backends.approx_tokens import ApproxTokenizer as ApproxTokenizer
from lsp_assist.config import Bounded, ModelSettings

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class CancelToken:
    """A flag that stops generation within one token when set.

    Backends that block in a system call (a socket read while a remote server evaluates
    the prompt) cannot poll the flag; they register a callback with :meth:`add_callback`
    that unblocks the call (e.g. shuts the socket down) from the cancelling thread.

    Work done for a request that is not handed its token (the remote backend's
    tokenizer calls while the context engine builds the prompt) finds it with
    :meth:`current`, set by whoever runs the request through :meth:`call`.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: dict[int, Callable[[], None]] = {}
        self._next_id = 0
        self.reason = ""
        self.cancelled_at = 0.0

    def cancel(self, reason: str = "cancelled") -> None:
        """Set the flag (idempotent; the first reason wins), then run the callbacks once.

        Callbacks run in the calling thread; an exception in one is logged and does not
        stop the others or reach the caller.
        """
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self.cancelled_at = time.perf_counter()
            self._event.set()
            callbacks = list(self._callbacks.values())
            self._callbacks.clear()
        for callback in callbacks:
            try:
                callback()
            except Exception:  # a caller's callback: it must not stop the others
                logger.exception("cancel callback %r failed", callback)

    def add_callback(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Run ``callback`` once on the first :meth:`cancel`; return a function removing it.

        Runs it at once, in this thread, when already cancelled. A ``cancel`` racing the
        removal may still run it once after removal returned, so a callback must cope
        with being late (check its own state under its own lock).
        """
        with self._lock:
            if not self._event.is_set():
                key = self._next_id
                self._next_id += 1
                self._callbacks[key] = callback

                def remove() -> None:
                    with self._lock:
                        self._callbacks.pop(key, None)

                return remove
        callback()
        return lambda: None

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` has been called."""
        return self._event.is_set()

    def call(self, func: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run ``func(*args, **kwargs)`` with this token as the thread's :meth:`current`."""
        reset = _CURRENT.set(self)
        try:
            return func(*args, **kwargs)
        finally:
            _CURRENT.reset(reset)

    @staticmethod
    def current() -> CancelToken | None:
        """The token of the request this thread works for (see :meth:`call`), if any."""
        return _CURRENT.get()


_CURRENT: ContextVar[CancelToken | None] = ContextVar("lsp_assist_cancel", default=None)


@dataclass(frozen=True, slots=True)
class ModelInfo:
    """What the backend knows about its model, read from the GGUF metadata."""

    path: str
    name: str = ""
    architecture: str = ""
    quantization: str = ""
    vocab_size: int = 0
    context_length_train: int = 0
    bos_id: int | None = None
    eos_id: int | None = None
    fim_prefix_id: int | None = None
    fim_suffix_id: int | None = None
    fim_middle_id: int | None = None
    special_tokens: dict[str, int] = field(default_factory=dict)
    """Special tokens by text, e.g. {"<file_sep>": 5, "<|repo_name|>": 151663}."""

    @property
    def has_fim(self) -> bool:
        """True when the model has prefix, suffix and middle tokens."""
        return None not in (self.fim_prefix_id, self.fim_suffix_id, self.fim_middle_id)


@dataclass(frozen=True, slots=True)
class InfillParts:
    """A prompt's parts as a server that builds its own FIM prompt wants them (``/infill``).

    Filled by serving from the assembled prompt, for a backend whose
    ``wants_infill_parts`` is True; the token prompt stays the one to send elsewhere.
    """

    prefix: str
    """The editing zone's whole lines before the cursor line."""
    suffix: str
    """The text after the cursor: the rest of its line and the lines below."""
    typed: str
    """The cursor line up to the cursor (the typed part, healed tail included)."""
    extra: tuple[tuple[str, str], ...] = ()
    """(file name, text) chunks of other files: the related definitions, the similar code."""


StopRule = Callable[[str], int | None]
"""Given the text generated so far, return the index to cut it at (done), or None."""


@dataclass(kw_only=True)
class GenerationRequest:
    """One generation: prompt tokens in, text out, with limits and a cancel flag."""

    prompt_tokens: Sequence[int]
    max_tokens: int = 48
    stop: Sequence[str] = ()
    stop_rule: StopRule | None = None
    cache_key: str = ""
    """Per-file key for saved KV state (the document URI); '' = no saved state."""
    stable_prefix_len: int = 0
    """How many leading prompt tokens are stable across keystrokes (worth saving)."""
    task_type: str = "completion"
    cancel: CancelToken = field(default_factory=CancelToken)
    prompt_timeout_s: float | None = None
    """Cap on prompt evaluation; None = the settings' (see :func:`time_caps`)."""
    generation_timeout_s: float | None = None
    """Cap on generation after it; None = the settings'."""
    draft: bool | None = None
    """Force drafting on/off for this request; None = the backend's adaptive choice."""
    on_text: Callable[[str], None] | None = None
    """Called with each new piece of text as it is generated."""
    on_logprob: Callable[[float], None] | None = None
    """Called with each generated token's log probability, before its text reaches
    ``on_text`` (the in-process backend; a remote one never calls it)."""
    alternatives: int = 1
    """Suggestions wanted: 1 = the greedy one; more adds branches that start with the next
    most likely first tokens (:attr:`GenerationResult.alternatives`). A backend that
    cannot branch returns none and the caller shows the one it has."""
    forced_prefix: str = ""
    """Text cut from the prompt's end (token healing) that the generation must begin
    with; it is not part of the result's text. Only for a backend whose
    ``heals_tokens`` is True (the caller puts the text back in the prompt otherwise)."""
    code_first: bool = False
    """The first token must write something on the cursor's line: not a line break, not
    an end of generation (the cursor is on a blank line, where an editor wants the
    line). Honoured by the in-process backend; a remote one ignores it."""
    infill: InfillParts | None = None
    """The prompt's parts, for a backend that sends them separately (``/infill``); None:
    not filled (the backend sends ``prompt_tokens``)."""


@dataclass(frozen=True, slots=True)
class TimeCaps:
    """A request's two time caps in seconds: prompt evaluation, then generation."""

    prompt_s: float
    """Until the prompt is evaluated (remote: until the first text)."""
    generation_s: float
    """From then to the end of generation."""


def time_caps(settings: ModelSettings, request: GenerationRequest | None = None) -> TimeCaps:
    """Return the caps of ``request``: its own where it sets them, else the settings'."""
    prompt = request.prompt_timeout_s if request is not None else None
    generation = request.generation_timeout_s if request is not None else None
    return TimeCaps(
        prompt_s=prompt if prompt is not None else settings.prompt_timeout_ms / 1000.0,
        generation_s=(
            generation if generation is not None else settings.generation_timeout_ms / 1000.0
        ),
    )


@dataclass(kw_only=True)
class BackendUsage:
    """What one generation measured: token counts, drafting, prefill and decode times.

    The one definition of these metric fields: :class:`GenerationResult` inherits them,
    and serving's ``CompletionOutcome`` and telemetry's ``MetricsRecord`` compose them
    with telemetry's ``RequestTimes`` (the request's own times, which no backend sees);
    docs/telemetry.md defines each. A backend fills every one, ``ttft_ms`` and
    ``latency_ms`` counted from the start of its ``generate`` (see
    :meth:`GenerationResult.finish`); the engine takes them over (:meth:`copy_usage`)
    and counts ``ttft_ms`` and ``latency_ms`` from the request's arrival instead, so
    that ``ttft_ms = debounce_ms + queue_ms + context_ms + prefill_ms`` (give or take
    the sampling of the first token).
    """

    prompt_tokens: int = 0
    reused_tokens: int = 0
    """Prompt tokens served from the KV cache (not evaluated)."""
    output_tokens: int = 0
    drafting: bool = False
    draft_proposed: int = 0
    draft_accepted: int = 0
    prefill_ms: float = 0.0
    """Backend call to the prompt evaluated (KV state restore and prompt evaluation)."""
    decode_ms: float = 0.0
    """First token to the last one."""
    ttft_ms: float = 0.0
    """Arrival to the first generated token (for a backend: from the start of generate)."""
    latency_ms: float = 0.0
    """Arrival to the answer (for a backend: the whole generate call)."""

    def copy_usage(self, other: BackendUsage) -> None:
        """Copy this object's :class:`BackendUsage` fields onto ``other``."""
        for name in BACKEND_USAGE_FIELDS:
            setattr(other, name, getattr(self, name))


BACKEND_USAGE_FIELDS = tuple(f.name for f in fields(BackendUsage))
"""Every :class:`BackendUsage` field, in order."""


@dataclass(frozen=True, slots=True)
class Alternative:
    """One more suggestion of a request: a branch decoded from another first token."""

    text: str
    tokens: tuple[int, ...] = ()
    stop_reason: str = ""
    """As :attr:`GenerationResult.stop_reason`; a cancelled or timed-out branch is not shown."""

    @property
    def complete(self) -> bool:
        """True when the branch ended on its own (not by a cancel or a time cap)."""
        return self.stop_reason not in ("cancelled", "timeout")


@dataclass(kw_only=True)
class GenerationResult(BackendUsage):
    """What one generation produced and what it cost (times from the start of generate)."""

    text: str = ""
    tokens: list[int] = field(default_factory=list)
    stop_reason: str = ""
    """One of: stop, rule, length, eos, cancelled, timeout."""
    alternatives: list[Alternative] = field(default_factory=list)
    """The branches after the greedy one (``text``), in the order of their first token's
    logit; at most ``request.alternatives - 1``, empty for a one-item request."""
    token_logprobs: list[float] = field(default_factory=list)
    """The natural log of each of ``tokens``' probability under the model, where the
    backend knows it (the in-process one); empty otherwise."""

    @property
    def cancelled(self) -> bool:
        """True when generation ended because of a cancel flag or a time cap."""
        return self.stop_reason in ("cancelled", "timeout")

    def finish(self, started: float) -> None:
        """Close the timings at the end of generate; ``started`` is its perf_counter start.

        Sets ``latency_ms``, ``decode_ms`` (first token to now; 0 without a first token)
        and ``output_tokens``.
        """
        self.latency_ms = (time.perf_counter() - started) * 1000.0
        self.decode_ms = max(0.0, self.latency_ms - self.ttft_ms) if self.tokens else 0.0
        self.output_tokens = len(self.tokens)


class Backend(ABC):
    """A model that tokenizes and generates. Implementations: local (llama.cpp), remote."""

    name = "backend"
    heals_tokens = False
    """True when :attr:`GenerationRequest.forced_prefix` is honoured (token healing)."""

    @property
    @abstractmethod
    def info(self) -> ModelInfo:
        """Metadata of the loaded model."""

    @property
    def wants_infill_parts(self) -> bool:
        """True when the caller should fill :attr:`GenerationRequest.infill`."""
        return False

    @abstractmethod
    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids for ``text`` without BOS; ``special`` parses special tokens."""

    @abstractmethod
    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens``."""

    @abstractmethod
    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Generate for ``request``; blocks; honours its cancel flag within one token."""

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        cache_key: str = "",
        cancel: CancelToken | None = None,
    ) -> int:
        """Evaluate ``tokens`` ahead of time so a later request reuses them; return count.

        The count is the number of tokens newly evaluated (0 when all were cached).
        ``cancel`` stops a long prefill early (what was evaluated stays cached).
        """
        return 0

    def prepare(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Do once, at load, the work the first request that needs it would pay."""

    def stats(self) -> dict[str, object]:
        """Backend counters for status and metrics (KV states held, drafting state...)."""
        return {}

    def bounds(self) -> dict[str, Bounded]:
        """What the backend keeps that grows with use, against its bounds (none by default)."""
        return {}

    def close(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Release the model."""
