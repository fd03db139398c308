"""The prompt budget that fits the machine: chosen from the measured prompt-evaluation speed.

This module owns the adaptive ``contextBudget``. :class:`AdaptiveBudget` keeps a running
estimate of how many prompt tokens per second the loaded model evaluates (the median of
the last few timed evaluations: a short prefill at load, then real requests) and chooses
the budget so that a *cold* prompt, one evaluated from nothing (the first request in a
file, or at a new position after its state was dropped), takes about ``coldPromptMs``:
``budget = coldPromptMs x tokens/s``, between ``contextBudgetFloor`` and what the
context holds besides the answer. A ``contextBudget`` the user gave wins
(:func:`choose`). The class is pure (no model, no clock): :func:`calibrate` times a
backend's prefill and feeds it, and the serving engine feeds it from real requests.

See docs/context.md ("Adaptive budget") and docs/decisions.md.
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_assist.backends import Backend, create_backend
from lsp_assist.config import Bounded, Settings
from lsp_assist.context import AssembledPrompt, explain
from lsp_assist.errors import LspAssistError

logger = logging.getLogger(__name__)

MIN_TOKENS = 64
"""Evaluations of fewer tokens are not rates: a keystroke's few tokens cost mostly the
fixed part of a call (the output row over the vocabulary, a KV state switch)."""
WINDOW = 16
"""Timed evaluations the estimate is the median of (older ones are forgotten)."""
HYSTERESIS = 0.15
"""The budget in force moves only when the estimate leaves it by more than this share:
every change of budget changes the prompt, and a changed prompt is evaluated again."""
CALIBRATION_WARMUP = 16
"""Tokens evaluated (untimed) before the timed calibration: the first decode after a
load touches the mapped weights and allocates buffers."""
CALIBRATION_TOKENS = 256
"""At most this many tokens are timed at load (about 0.9 s for SmolLM2 here, 0.45 s
for Gemma, when the machine is not shared)..."""
CALIBRATION_CHUNK = 64
"""...in prefills of this many tokens,..."""
CALIBRATION_SECONDS = 1.0
"""...stopping after the chunk that passes this time: a loaded machine (other processes
on the two cores slow llama.cpp's threads tenfold) is not kept waiting for long."""
EXPLICIT_KEY = "contextBudget"


@dataclass(frozen=True, slots=True)
class BudgetDecision:
    """The budget in force and why."""

    tokens: int
    mode: str
    """explicit (the user's contextBudget), adaptive (measured), or unmeasured."""
    reason: str
    rate: float | None = None
    """Prompt tokens per second estimated (None before any measurement)."""
    samples: int = 0
    calibrated: bool = False
    target_ms: int = 0
    floor: int = 0
    cap: int = 0

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by doctor, status and ``context --json``."""
        return {
            "tokens": self.tokens,
            "mode": self.mode,
            "reason": self.reason,
            "rate_tok_s": round(self.rate, 1) if self.rate is not None else None,
            "samples": self.samples,
            "calibrated": self.calibrated,
            "target_ms": self.target_ms,
            "floor": self.floor,
            "cap": self.cap,
        }


def budget_cap(settings: Settings) -> tuple[int, str]:
    """Return the largest prompt the context holds besides the answer, and its account.

    The local backend keeps ``maxTokens + 2 x draftTokens + 1`` positions for the answer
    and cuts a longer prompt from its start (losing the stable prefix), so the budget
    stays under that.
    """
    n_ctx = settings.model.context_length
    reserve = settings.completion.max_tokens + 2 * settings.model.draft_tokens + 1
    reserve = min(reserve, n_ctx // 2)
    return max(1, n_ctx - reserve), f"contextLength {n_ctx:,} less {reserve} for the answer"


class AdaptiveBudget:
    """A running prompt-speed estimate and the budget it implies (thread-safe).

    ``observe(tokens, seconds)`` takes one timed evaluation; ``budget()`` is the budget
    in force. Settings arrive with :meth:`configure` (done by :func:`choose`).
    """

    def __init__(
        self,
        *,
        target_ms: int = 500,
        floor: int = 512,
        cap: int = 4096,
        fallback: int = 1024,
        window: int = WINDOW,
        min_tokens: int = MIN_TOKENS,
        cap_reason: str = "",
    ) -> None:
        self._lock = threading.Lock()
        self._rates: deque[tuple[float, bool]] = deque(maxlen=max(1, window))
        """(tokens per second, from the calibration?) of the latest evaluations."""
        self.min_tokens = min_tokens
        self._params = (target_ms, floor, cap, fallback, cap_reason)
        self._in_force: int | None = None

    def configure(
        self, *, target_ms: int, floor: int, cap: int, fallback: int, cap_reason: str = ""
    ) -> None:
        """Set the target, floor, cap and the unmeasured fallback; a change re-chooses."""
        params = (target_ms, floor, cap, fallback, cap_reason)
        with self._lock:
            if params != self._params:
                self._params = params
                self._in_force = None

    def observe(self, tokens_evaluated: int, seconds: float) -> bool:
        """Take one timed prompt evaluation; return whether it counted.

        Evaluations of fewer than ``min_tokens`` tokens (a cached prompt, a keystroke)
        and non-positive times are ignored.
        """
        return self._add(tokens_evaluated, seconds, calibration=False)

    def calibrate(self, tokens_evaluated: int, seconds: float) -> bool:
        """Take the load-time calibration (an evaluation like any other, labelled)."""
        return self._add(tokens_evaluated, seconds, calibration=True)

    def _add(self, tokens: int, seconds: float, *, calibration: bool) -> bool:
        if tokens < self.min_tokens or not seconds > 0.0:
            return False
        with self._lock:
            self._rates.append((tokens / seconds, calibration))
        return True

    def bounds(self) -> dict[str, Bounded]:
        """The speed samples kept against ``WINDOW``."""
        with self._lock:
            size, bound = len(self._rates), self._rates.maxlen or 0
        where = "serving/adaptive_budget.py WINDOW"
        return {"adaptive_budget.samples": Bounded(size, bound, "samples", where)}

    @property
    def rate(self) -> float | None:
        """The estimated prompt tokens per second (median of the window), or None."""
        with self._lock:
            return self._rate()

    def _rate(self) -> float | None:
        if not self._rates:
            return None
        return float(statistics.median(r for r, _ in self._rates))

    def budget(self) -> int:
        """Return the budget in force (tokens)."""
        return self.decision().tokens

    def decision(self) -> BudgetDecision:
        """Return the budget in force with its reason; moves it past the hysteresis."""
        with self._lock:
            target_ms, floor, cap, fallback, cap_reason = self._params
            floor = min(floor, cap)
            rate = self._rate()
            samples = len(self._rates)
            calibrated = any(c for _, c in self._rates)
            bounds = f"floor {floor:,}, cap {cap:,}"
            if cap_reason:
                bounds += f" ({cap_reason})"
            if rate is None:
                tokens = max(floor, min(fallback, cap))
                mode = "unmeasured"
                reason = (
                    f"adaptive, not measured yet: {tokens:,} tokens (the contextBudget "
                    f"default) until a prompt evaluation is timed; {bounds}"
                )
            else:
                mode = "adaptive"
                tokens, reason = self._move(rate, samples, calibrated, bounds)
        return BudgetDecision(
            tokens=tokens,
            mode=mode,
            reason=reason,
            rate=rate,
            samples=samples,
            calibrated=calibrated,
            target_ms=target_ms,
            floor=floor,
            cap=cap,
        )

    def _move(self, rate: float, samples: int, calibrated: bool, bounds: str) -> tuple[int, str]:
        """Move the budget in force if the estimate left it; return it and its reason."""
        target_ms, floor, cap, _, _ = self._params
        floor = min(floor, cap)
        raw = int(target_ms / 1000.0 * rate)
        chosen = max(floor, min(raw, cap))
        previous = self._in_force
        tokens = previous
        if previous is None or abs(chosen - previous) > HYSTERESIS * previous:
            tokens = self._in_force = chosen
            if previous is not None:
                logger.info("adaptive budget %d -> %d tokens (%.0f tok/s)", previous, chosen, rate)
        assert tokens is not None
        if calibrated and samples == 1:
            measured = "measured at load"
        elif calibrated:
            noun = "evaluation" if samples == 2 else "evaluations"
            measured = f"measured at load and over {samples - 1} prompt {noun}"
        else:
            noun = "evaluation" if samples == 1 else "evaluations"
            measured = f"measured over {samples} prompt {noun}"
        product = f"{target_ms:,} ms x {rate:,.0f} tok/s"
        if tokens != chosen:
            head = f"{tokens:,} tokens (kept: {product} = {raw:,} is within {HYSTERESIS:.0%})"
        elif chosen == floor and raw < floor:
            head = f"{tokens:,} tokens, the floor ({product} = {raw:,})"
        elif chosen == cap and raw > cap:
            head = f"{tokens:,} tokens, the cap ({product} = {raw:,})"
        else:
            head = f"{tokens:,} tokens = {product}"
        return tokens, f"adaptive: {head} {measured}, {bounds}"


def is_explicit(settings: Settings) -> bool:
    """True when the user gave ``contextBudget`` (it then wins over the measurement)."""
    return EXPLICIT_KEY in settings.given_keys


def choose(settings: Settings, estimator: AdaptiveBudget) -> BudgetDecision:
    """Return the layered prompt's budget: the user's ``contextBudget``, else the estimator's."""
    context = settings.context
    if is_explicit(settings):
        tokens = context.context_budget
        return BudgetDecision(
            tokens=tokens,
            mode="explicit",
            reason=f"explicit: {tokens:,} tokens (contextBudget set)",
        )
    cap, cap_reason = budget_cap(settings)
    estimator.configure(
        target_ms=context.cold_prompt_ms,
        floor=context.context_budget_floor,
        cap=cap,
        fallback=context.context_budget,
        cap_reason=cap_reason,
    )
    return estimator.decision()


def budget_for(
    settings: Settings, estimator: AdaptiveBudget, strategy: str | None = None
) -> BudgetDecision | None:
    """Return :func:`choose` for the layered strategy; for the baseline None, unless set.

    The baseline's budget is the model's context (the context engine's own rule), or the
    user's ``contextBudget`` when one is set: plain FIM of the file at a given budget,
    the layered prompt's comparison at the same budget (``lsp-assist bench``).
    """
    if (strategy or settings.context.strategy) != "layered":
        return choose(settings, estimator) if is_explicit(settings) else None
    return choose(settings, estimator)


def calibration_tokens(backend: Backend, count: int) -> list[int]:
    """Return ``count`` tokens of real code (this module's own source), BOS first."""
    try:
        text = Path(__file__).read_text(encoding="utf-8")
    except OSError:  # a zipped install: any real-looking code does
        text = "".join(
            f"def step_{i}(value):\n    return value * {i} + {i % 7}\n\n" for i in range(99)
        )
    ids = backend.tokenize(text)
    while ids and len(ids) < count:
        ids = ids + ids
    bos = backend.info.bos_id
    head = [bos] if bos is not None else []
    return (head + ids)[:count]


def calibrate(
    backend: Backend,
    estimator: AdaptiveBudget,
    *,
    tokens: int = CALIBRATION_TOKENS,
    seconds: float = CALIBRATION_SECONDS,
    clock: Callable[[], float] = time.perf_counter,
) -> bool:
    """Time a short prefill of real-looking code and feed it to ``estimator``.

    Evaluates ``tokens`` in chunks of :data:`CALIBRATION_CHUNK`, stopping early once
    ``seconds`` have passed. The prefills run under the cache key '' (no saved state):
    a file's saved KV state is neither overwritten nor kept from being restored. Returns
    whether it counted (a backend without prefill, such as the remote one, evaluates
    nothing).
    """
    evaluated, spent = 0, 0.0
    try:  # a remote server's tokenizer can fail too: then nothing is measured
        ids = calibration_tokens(backend, CALIBRATION_WARMUP + tokens)
        backend.prefill(ids[:CALIBRATION_WARMUP], cache_key="")
        for end in range(CALIBRATION_WARMUP + CALIBRATION_CHUNK, len(ids) + 1, CALIBRATION_CHUNK):
            start = clock()
            evaluated += backend.prefill(ids[:end], cache_key="")
            spent += clock() - start
            if spent >= seconds:
                break
    except LspAssistError as exc:
        logger.warning("prompt speed not measured: %s", exc)
        return False
    counted = estimator.calibrate(evaluated, spent)
    if counted:
        logger.info(
            "prompt evaluation: %d tokens in %.0f ms (%.0f tok/s)",
            evaluated,
            spent * 1000,
            evaluated / spent,
        )
    return counted


def measure(
    settings: Settings, backend: Backend | None = None
) -> tuple[BudgetDecision, Backend | None]:
    """Return the budget a server would start with, loading and calibrating the model.

    For the CLI (doctor, context). An explicit ``contextBudget`` or the remote backend
    (whose speed only real requests show) loads nothing. Returns the backend loaded
    (the caller closes it) or the one given.
    """
    estimator = AdaptiveBudget()
    if not is_explicit(settings) and settings.model.backend == "local":
        if backend is None:
            backend = create_backend(settings.model)
        calibrate(backend, estimator)
    return choose(settings, estimator), backend


def explain_with_budget(prompt: AssembledPrompt) -> str:
    """Return the context engine's explain text headed by the budget's reason."""
    head = f"budget: {prompt.budget_reason}\n" if prompt.budget_reason else ""
    return head + explain(prompt)
