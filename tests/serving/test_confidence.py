"""The confidence gate (serving/confidence.py): an unsure automatic suggestion stays off screen.

A streaming fake gives each character a log probability through ``on_logprob`` before
its text, as the in-process backend does; the real backend's log probabilities are
tested in tests/backends/test_local.py.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.serving.confidence import GATE_OFF, FirstLineConfidence, below
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, CharBackend, make_engine, snapshot

WHOLE = "compute_total(items, tax)"


class SureOrNot(CharBackend):
    """Streams ``WHOLE`` a character at a time, each with log probability ``logprob``."""

    def __init__(self, logprob: float, step_s: float = 0.01) -> None:
        self.logprob = logprob
        self.step_s = step_s

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream ``WHOLE`` with the same log probability for every token."""
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        for char in WHOLE:
            time.sleep(self.step_s)
            if not result.tokens:
                result.ttft_ms = (time.perf_counter() - t0) * 1000
            result.tokens.append(ord(char))
            result.token_logprobs.append(self.logprob)
            if request.on_logprob is not None:
                request.on_logprob(self.logprob)
            if request.on_text is not None:
                request.on_text(char)
        result.stop_reason = "eos"
        result.text = WHOLE
        result.finish(t0)
        return result


def test_the_first_line_alone_counts() -> None:
    confidence = FirstLineConfidence()
    assert confidence.mean() is None
    for lp, piece in ((-0.1, "\n"), (-0.3, "x = 1"), (-0.5, "\n"), (-9.0, "y = 2")):
        confidence.logprob(lp)
        confidence.text(piece)
    # a leading line break is not the end of the first line; the one after code is
    assert confidence.tokens == 3
    assert math.isclose(confidence.mean() or 0.0, -0.3)


def test_below() -> None:
    assert below(-2.0, math.log(0.5))
    assert not below(-0.1, math.log(0.5))
    assert not below(None, math.log(0.5))  # unknown (a remote backend): never gated
    assert not below(-50.0, GATE_OFF)


def _query(engine: object, uri: str, trigger: str = "automatic", early: bool = False) -> object:
    return CompletionQuery(
        snapshot=snapshot(engine, uri),  # type: ignore[arg-type]
        line=CURSOR_LINE,
        column=CURSOR_COLUMN,
        trigger=trigger,
        answer_early=early,
    )


async def test_an_unsure_automatic_suggestion_is_not_shown(tmp_path: Path) -> None:
    for logprob, shown in ((-0.05, WHOLE), (-2.0, "")):
        root = tmp_path / str(logprob)
        root.mkdir()
        engine, uri = make_engine(root, SureOrNot(logprob), confidenceThreshold=0.5, maxTokens=64)
        scheduler = Scheduler(engine)
        try:
            outcome = await scheduler.complete(_query(engine, uri))  # type: ignore[arg-type]
            assert outcome.text == shown, (logprob, outcome)
            assert outcome.confidence is not None and math.isclose(outcome.confidence, logprob)
            assert outcome.skipped == ("" if shown else "unsure")
            # an explicit ask is never gated
            asked = await scheduler.complete(_query(engine, uri, trigger="invoked"))  # type: ignore[arg-type]
            assert asked.text == WHOLE
        finally:
            scheduler.shutdown()
            engine.session.close()


async def test_the_gate_holds_early_answers_too(tmp_path: Path) -> None:
    engine, uri = make_engine(
        tmp_path, SureOrNot(-2.0), confidenceThreshold=0.5, answerAfterMs=20, maxTokens=64
    )
    scheduler = Scheduler(engine)
    try:
        outcome = await scheduler.complete(_query(engine, uri, early=True))  # type: ignore[arg-type]
        assert not outcome.answered_early and outcome.text == ""
    finally:
        scheduler.shutdown()
        engine.session.close()
    (tmp_path / "sure").mkdir()
    sure, uri = make_engine(
        tmp_path / "sure", SureOrNot(-0.05), confidenceThreshold=0.5, answerAfterMs=20
    )
    scheduler = Scheduler(sure)
    try:
        outcome = await scheduler.complete(_query(sure, uri, early=True))  # type: ignore[arg-type]
        assert outcome.answered_early and WHOLE.startswith(outcome.text) and outcome.text
    finally:
        scheduler.shutdown()
        sure.session.close()


def test_off_by_default(tmp_path: Path) -> None:
    engine, _ = make_engine(tmp_path, SureOrNot(-5.0))
    assert engine.settings.completion.confidence_threshold == 0.0
    engine.session.close()
