"""The adaptive prompt budget: the estimator, the choice, the calibration, the engine's wiring.

The estimator and the choice are pure logic and run on numbers. The calibration and the
engine run with a backend paced to a set prompt speed (it sleeps per evaluated token, or
reports the time a real one would take), standing in for a faster or slower machine; the
real model runs the same paths in tests/e2e/test_adaptive_budget.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.config import parse_settings
from lsp_assist.serving.adaptive_budget import (
    CALIBRATION_CHUNK,
    CALIBRATION_TOKENS,
    CALIBRATION_WARMUP,
    HYSTERESIS,
    MIN_TOKENS,
    WINDOW,
    AdaptiveBudget,
    budget_cap,
    budget_for,
    calibrate,
    choose,
    is_explicit,
)
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.status import status_json
from tests.serving.fakes import CharBackend, make_engine, snapshot


def _estimator(window: int = WINDOW, **overrides: int) -> AdaptiveBudget:
    params = {"target_ms": 500, "floor": 512, "cap": 4096, "fallback": 1024, **overrides}
    estimator = AdaptiveBudget(window=window)
    estimator.configure(**params)
    return estimator


# --- the estimator ------------------------------------------------------------------------


def test_unmeasured_budget_is_the_fallback_and_says_so() -> None:
    decision = _estimator().decision()
    assert decision.tokens == 1024
    assert decision.mode == "unmeasured" and decision.rate is None
    assert "not measured yet" in decision.reason and "1,024" in decision.reason


def test_converges_to_the_median_speed_despite_outliers() -> None:
    estimator = _estimator(cap=100_000)
    # 4,000 tok/s with +-10 % jitter, and two evaluations slowed by a neighbour's burst
    for i in range(12):
        tokens = 400 + 37 * i
        rate = 4000.0 * (1 + 0.1 * ((-1) ** i) * (i % 3) / 2)
        assert estimator.observe(tokens, tokens / rate)
    estimator.observe(500, 500 / 300.0)
    estimator.observe(500, 500 / 250.0)
    rate = estimator.rate
    assert rate is not None and 3800 <= rate <= 4200
    decision = estimator.decision()
    assert decision.mode == "adaptive" and decision.samples == 14
    assert abs(decision.tokens - 0.5 * rate) <= 1
    assert f"{decision.tokens:,} tokens = 500 ms x" in decision.reason
    assert "measured over 14 prompt evaluations" in decision.reason


def test_ignores_cached_and_near_zero_token_evaluations() -> None:
    estimator = _estimator()
    estimator.observe(1000, 1.0)  # 1,000 tok/s -> 500 tokens -> the floor
    before = estimator.decision()
    # a keystroke after a cached prefix: few tokens, mostly the call's fixed cost
    assert not estimator.observe(MIN_TOKENS - 1, 0.0005)
    assert not estimator.observe(0, 0.02)  # everything reused
    assert not estimator.observe(500, 0.0)  # no time measured
    assert not estimator.observe(500, -1.0)
    after = estimator.decision()
    assert after.samples == before.samples == 1
    assert after.rate == before.rate == 1000.0
    assert estimator.observe(MIN_TOKENS, MIN_TOKENS / 1000.0)


def test_clamps_to_the_floor_and_the_cap() -> None:
    slow = _estimator()
    slow.observe(300, 1.0)  # 300 tok/s: 150 tokens in 500 ms
    decision = slow.decision()
    assert decision.tokens == 512
    assert "the floor (500 ms x 300 tok/s = 150)" in decision.reason
    fast = _estimator(cap=3000)
    fast.observe(4000, 0.1)  # 40,000 tok/s: 20,000 tokens in 500 ms
    decision = fast.decision()
    assert decision.tokens == 3000 and "the cap" in decision.reason
    tiny_context = _estimator(floor=512, cap=300)
    tiny_context.observe(200, 1.0)
    assert tiny_context.budget() == 300  # a floor above the cap gives way


def test_small_moves_keep_the_budget_large_ones_move_it() -> None:
    estimator = _estimator(cap=100_000, window=1)
    estimator.observe(2000, 1.0)
    assert estimator.budget() == 1000
    estimator.observe(2000, 2000 / (2000 * (1 + HYSTERESIS * 0.8)))
    kept = estimator.decision()
    assert kept.tokens == 1000 and "kept" in kept.reason
    estimator.observe(3000, 1.0)
    assert estimator.budget() == 1500


def test_a_much_slower_speed_lowers_the_budget() -> None:
    estimator = _estimator(cap=100_000)
    for _ in range(WINDOW):
        estimator.observe(1000, 1000 / 6000.0)
    fast = estimator.budget()
    assert fast == 3000
    for _ in range(WINDOW // 2 + 1):  # the slow evaluations become the majority
        estimator.observe(1000, 1000 / 1200.0)
    slow = estimator.budget()
    assert slow == 600 and slow < fast


def test_configure_with_new_settings_chooses_again() -> None:
    estimator = _estimator(cap=100_000)
    estimator.observe(2000, 1.0)
    assert estimator.budget() == 1000
    estimator.configure(target_ms=1000, floor=512, cap=100_000, fallback=1024)
    assert estimator.budget() == 2000


# --- the choice: explicit wins -------------------------------------------------------------


def test_an_explicit_context_budget_wins_over_the_measurement() -> None:
    estimator = AdaptiveBudget()
    estimator.calibrate(4000, 0.1)  # a fast machine: the adaptive budget would be the cap
    adaptive, _ = parse_settings(None)
    assert not is_explicit(adaptive)
    assert choose(adaptive, estimator).tokens == budget_cap(adaptive)[0]
    for value in (2048, 1024):  # the default's own value, given, is explicit too
        given, warnings = parse_settings({"contextBudget": value})
        assert not warnings and is_explicit(given)
        decision = choose(given, estimator)
        assert decision.tokens == value and decision.mode == "explicit"
        assert decision.reason == f"explicit: {value:,} tokens (contextBudget set)"


def test_given_keys_survive_later_settings_and_skip_invalid_values() -> None:
    first, _ = parse_settings({"contextBudget": 700})
    later, _ = first.replace({"maxTokens": 10})
    assert is_explicit(later) and later.context.context_budget == 700
    invalid, warnings = parse_settings({"contextBudget": "lots"})
    assert warnings and not is_explicit(invalid)


def test_the_adaptive_settings_bound_the_choice() -> None:
    settings, warnings = parse_settings(
        {"coldPromptMs": 1000, "contextBudgetFloor": 256, "contextLength": 2048, "maxTokens": 40}
    )
    assert not warnings
    cap, why = budget_cap(settings)
    assert cap == 2048 - (40 + 2 * 4 + 1) and "contextLength 2,048" in why
    estimator = AdaptiveBudget()
    estimator.observe(200, 1.0)  # 200 tok/s x 1 s = 200 < the floor 256
    assert choose(settings, estimator).tokens == 256
    estimator.observe(10_000, 1.0)
    estimator.observe(10_000, 1.0)
    assert choose(settings, estimator).tokens == cap


def test_the_baseline_keeps_its_own_budget() -> None:
    settings, _ = parse_settings(None)
    assert budget_for(settings, AdaptiveBudget(), "baseline") is None
    assert budget_for(settings, AdaptiveBudget()) is not None
    # a budget the user set holds for the baseline too (plain FIM at the same budget)
    explicit, _ = parse_settings({"contextBudget": 900})
    decision = budget_for(explicit, AdaptiveBudget(), "baseline")
    assert decision is not None and decision.tokens == 900 and decision.mode == "explicit"


# --- calibration and the engine, with a backend paced to a prompt speed ---------------------


@pytest.fixture(autouse=True)
def _calibration_reads_the_backends_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's calibration times a :class:`PacedBackend` by its own clock."""
    from lsp_assist.serving import session as serving_session

    def timed(backend: object, estimator: AdaptiveBudget, **kwargs: Any) -> bool:
        if isinstance(backend, PacedBackend):
            kwargs.setdefault("clock", backend.virtual_now)
        return calibrate(backend, estimator, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(serving_session, "calibrate", timed)


class PacedBackend(CharBackend):
    """Evaluates prompts at ``rate`` tokens per second.

    ``prefill`` evaluates what follows the tokens of the previous prefill (as the local
    backend does) and advances its own clock by the time that takes (``virtual_now``,
    which the engine's calibration reads here: a sleep measured by the wall clock
    reads slower on a busy machine, and the test is about the rate, not the machine);
    ``generate`` reuses nothing and reports the time as ``prefill_ms``, as if measured.
    """

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.prefills: list[tuple[int, str]] = []
        self.live: list[int] = []
        self.elapsed = 0.0

    def virtual_now(self) -> float:
        """Return the seconds of prompt evaluation this backend has spent so far."""
        return self.elapsed

    def prefill(
        self, tokens: Sequence[int], *, cache_key: str = "", cancel: CancelToken | None = None
    ) -> int:
        """Sleep as long as evaluating the new part of ``tokens`` takes at ``rate``."""
        self.prefills.append((len(tokens), cache_key))
        reuse = 0
        while reuse < min(len(tokens), len(self.live)) and tokens[reuse] == self.live[reuse]:
            reuse += 1
        self.live = list(tokens)
        self.elapsed += (len(tokens) - reuse) / self.rate
        return len(tokens) - reuse

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Answer ``x`` after a prompt evaluation reported at ``rate``."""
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        result.prefill_ms = result.ttft_ms = len(request.prompt_tokens) / self.rate * 1000
        result.tokens = [ord("x")]
        result.text = "x"
        result.stop_reason = "eos"
        return result


class FakeClock:
    """A clock that advances by ``step`` seconds per reading (so per timed chunk)."""

    def __init__(self, step: float) -> None:
        self.now = 0.0
        self.step = step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


def test_calibration_times_chunks_under_a_key_of_its_own() -> None:
    backend = PacedBackend(rate=50_000.0)
    estimator = AdaptiveBudget()
    assert calibrate(backend, estimator)
    sizes = [n for n, _ in backend.prefills]
    chunks = CALIBRATION_TOKENS // CALIBRATION_CHUNK
    assert sizes == [
        CALIBRATION_WARMUP,
        *(CALIBRATION_WARMUP + CALIBRATION_CHUNK * (i + 1) for i in range(chunks)),
    ]
    assert {key for _, key in backend.prefills} == {""}  # no file's saved state is touched
    decision = estimator.decision()
    assert decision.calibrated and decision.samples == 1
    assert "measured at load" in decision.reason


def test_calibration_stops_once_its_time_is_spent() -> None:
    backend = PacedBackend(rate=1e9)
    estimator = AdaptiveBudget()
    # every chunk appears to take 0.6 s: the second one passes the 1 s allowance
    assert calibrate(backend, estimator, clock=FakeClock(0.6))
    assert len(backend.prefills) == 1 + 2
    assert estimator.rate is not None
    assert abs(estimator.rate - 2 * CALIBRATION_CHUNK / 1.2) < 1e-6


class NoPrefill(CharBackend):
    """A backend with the base class's prefill, which evaluates nothing (as the remote one)."""

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Nothing generated."""
        return GenerationResult()


def test_a_backend_without_prefill_is_not_calibrated() -> None:
    estimator = AdaptiveBudget()
    assert not calibrate(NoPrefill(), estimator)
    assert estimator.rate is None


SOURCE = "".join(
    f"def step_{i}(value, scale):\n    total = value * scale + {i}\n    return total\n\n"
    for i in range(40)
)


def _engine(tmp_path: Path, backend: PacedBackend, **raw: object) -> tuple[CompletionEngine, str]:
    """An engine (tests/serving/fakes.py's) with :data:`SOURCE` open as steps.py."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    engine, _ = make_engine(tmp_path, backend, **raw)
    path = tmp_path / "steps.py"
    path.write_text(SOURCE)
    return engine, engine.session.buffers.open(path.as_uri(), SOURCE, version=1).uri


def _complete(engine: CompletionEngine, uri: str, line: int) -> int:
    outcome = engine.complete(CompletionQuery(snapshot=snapshot(engine, uri), line=line, column=4))
    assert outcome.text == "x" and not outcome.error
    return outcome.prompt_tokens


def test_the_engine_gives_a_faster_machine_a_larger_prompt(tmp_path: Path) -> None:
    fast_engine, fast_uri = _engine(tmp_path / "fast", PacedBackend(rate=20_000.0))
    slow_engine, slow_uri = _engine(tmp_path / "slow", PacedBackend(rate=400.0))
    fast = fast_engine.explain(snapshot(fast_engine, fast_uri), 60, 4)
    slow = slow_engine.explain(snapshot(slow_engine, slow_uri), 60, 4)
    cap = budget_cap(fast_engine.settings)[0]
    assert fast.budget == cap and fast.budget_reason.startswith("adaptive:")
    assert slow.budget == 512 and "the floor" in slow.budget_reason
    assert slow.total_tokens <= 512 < fast.total_tokens
    assert status_json(fast_engine)["budget"]["tokens"] == cap


def test_the_engine_lowers_the_budget_when_requests_get_slower(tmp_path: Path) -> None:
    backend = PacedBackend(rate=20_000.0)
    engine, uri = _engine(tmp_path, backend)
    first = engine.explain(snapshot(engine, uri), 60, 4).budget
    backend.rate = 500.0  # the machine is now shared: prompts evaluate 40x slower
    for i in range(WINDOW // 2 + 1):
        _complete(engine, uri, 10 + 4 * i)
    after = engine.explain(snapshot(engine, uri), 60, 4)
    assert after.budget == 512 < first
    assert "500 tok/s" in after.budget_reason
    assert status_json(engine)["budget"]["samples"] == WINDOW // 2 + 2  # the calibration too


def test_the_engine_feeds_only_prompts_it_evaluated(tmp_path: Path) -> None:
    backend = PacedBackend(rate=20_000.0)
    engine, uri = _engine(tmp_path, backend)
    samples = engine.session.adaptive.decision().samples

    def cached(request: GenerationRequest) -> GenerationResult:
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        result.reused_tokens = len(request.prompt_tokens) - 3  # typing: 3 new tokens
        result.prefill_ms = result.ttft_ms = 5.0
        result.tokens, result.text, result.stop_reason = [ord("x")], "x", "eos"
        return result

    backend.generate = cached  # type: ignore[method-assign]
    _complete(engine, uri, 12)
    assert engine.session.adaptive.decision().samples == samples


@pytest.mark.parametrize("raw", [{"contextBudget": 900}, {"strategy": "baseline"}])
def test_the_engine_does_not_calibrate_when_nothing_adapts(
    tmp_path: Path, raw: dict[str, object]
) -> None:
    backend = PacedBackend(rate=20_000.0)
    engine, uri = _engine(tmp_path, backend, **raw)
    prompt = engine.explain(snapshot(engine, uri), 60, 4)
    if "contextBudget" in raw:
        assert backend.prefills == []
        assert prompt.budget == 900 and prompt.budget_reason.startswith("explicit: 900")
    else:
        assert prompt.strategy == "baseline" and prompt.budget_reason == ""
