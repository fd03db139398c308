"""Early answers (serving/early.py): the suggestion's start first, the rest from the cache.

A streaming fake stands in for the model's timing (one character per step, through
``request.on_text`` as the real backends stream); the real model runs the same path
through the server in tests/e2e/test_early_answers.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.documents import Document, Position
from lsp_assist.serving.early import EarlyAnswer
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.scheduler import ReadyCallback, Scheduler
from lsp_assist.serving.typethrough import TypeThrough
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, CharBackend, make_engine, snapshot

WHOLE = "compute_total(items, tax)"


class StreamingBackend(CharBackend):
    """Writes ``whole`` one character per ``step_s``, streamed, honouring the cancel flag."""

    def __init__(self, step_s: float = 0.02, whole: str = WHOLE) -> None:
        self.step_s = step_s
        self.whole = whole
        self.calls = 0
        self.cancelled = 0

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream ``whole``; stop at a cancel."""
        self.calls += 1
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        for char in self.whole:
            if request.cancel.cancelled:
                self.cancelled += 1
                result.stop_reason = "cancelled"
                break
            time.sleep(self.step_s)
            if not result.tokens:
                result.ttft_ms = (time.perf_counter() - t0) * 1000
            result.tokens.append(ord(char))
            if request.on_text is not None:
                request.on_text(char)
        else:
            result.stop_reason = "eos"
        result.text = self.detokenize(result.tokens)
        result.finish(t0)
        return result


def setup(
    tmp_path: Path,
    answer_after_ms: int,
    step_s: float = 0.02,
    on_ready: ReadyCallback | None = None,
) -> tuple[CompletionEngine, Scheduler, str, StreamingBackend]:
    backend = StreamingBackend(step_s)
    engine, uri = make_engine(tmp_path, backend, answerAfterMs=answer_after_ms, maxTokens=64)
    return engine, Scheduler(engine, on_ready=on_ready), uri, backend


def query(engine: CompletionEngine, uri: str, column: int = CURSOR_COLUMN) -> CompletionQuery:
    return CompletionQuery(
        snapshot=snapshot(engine, uri),
        line=CURSOR_LINE,
        column=column,
        trigger="automatic",
        answer_early=True,
    )


async def test_answers_with_the_start_then_serves_the_whole_from_the_cache(
    tmp_path: Path,
) -> None:
    ready: list[CompletionOutcome] = []
    got_ready = asyncio.Event()

    def on_ready(_query: CompletionQuery, whole: CompletionOutcome) -> None:
        ready.append(whole)
        got_ready.set()

    engine, scheduler, uri, backend = setup(tmp_path, answer_after_ms=60, on_ready=on_ready)
    began = time.perf_counter()
    first = await scheduler.complete(query(engine, uri))
    answered_s = time.perf_counter() - began
    # 25 characters at 20 ms are 500 ms: the answer came with the first few.
    assert first.answered_early and first.text and len(first.text) < len(WHOLE)
    assert WHOLE.startswith(first.text)
    assert answered_s < 0.4
    await asyncio.wait_for(got_ready.wait(), timeout=5)
    assert ready[0].text == WHOLE and ready[0].whole_ms > ready[0].latency_ms
    again = await scheduler.complete(query(engine, uri))
    assert again.cache_hit and again.text == WHOLE
    assert backend.calls == 1
    scheduler.shutdown()
    engine.session.close()


async def test_typing_through_the_start_keeps_the_rest_coming(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = setup(tmp_path, answer_after_ms=40)
    first = await scheduler.complete(query(engine, uri))
    assert first.answered_early
    typed = first.text[:1]
    hit = await _type(engine, scheduler, uri, typed)
    assert hit.cache_hit and WHOLE[1:].startswith(hit.text)
    # the model thread was left writing: the whole suggestion arrives without a new call
    deadline = time.perf_counter() + 5
    while time.perf_counter() < deadline:
        again = await scheduler.complete(query(engine, uri, CURSOR_COLUMN + 1))
        if again.text == WHOLE[1:]:
            break
        await asyncio.sleep(0.05)
    assert again.cache_hit and again.text == WHOLE[1:]
    assert backend.calls == 1 and backend.cancelled == 0
    scheduler.shutdown()
    engine.session.close()


async def _type(
    engine: CompletionEngine, scheduler: Scheduler, uri: str, text: str
) -> CompletionOutcome:
    """Insert ``text`` at the cursor (a new version) and ask again after it."""
    doc = engine.session.buffers.get(uri)
    assert doc is not None
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    engine.session.buffers.change(uri, doc.version + 1, [(at, at, text)])
    return await scheduler.complete(query(engine, uri, CURSOR_COLUMN + len(text)))


async def test_typing_all_of_the_start_waits_for_the_next_piece(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = setup(tmp_path, answer_after_ms=40)
    first = await scheduler.complete(query(engine, uri))
    assert first.answered_early and len(first.text) < len(WHOLE)
    # every character shown typed: the cache has nothing left until the model writes more
    hit = await _type(engine, scheduler, uri, first.text)
    assert hit.cache_hit and hit.text and WHOLE[len(first.text) :].startswith(hit.text)
    assert backend.calls == 1 and backend.cancelled == 0
    scheduler.shutdown()
    engine.session.close()


async def test_a_request_the_cache_cannot_answer_cancels_the_rest(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = setup(tmp_path, answer_after_ms=40)
    first = await scheduler.complete(query(engine, uri))
    assert first.answered_early
    other = await _type(engine, scheduler, uri, "z")  # not the suggestion's start
    assert backend.calls == 2 and backend.cancelled == 1
    assert not other.cache_hit
    scheduler.shutdown()
    engine.session.close()


async def test_a_client_without_ghost_text_gets_the_whole(tmp_path: Path) -> None:
    engine, scheduler, uri, _backend = setup(tmp_path, answer_after_ms=20, step_s=0.01)
    plain = CompletionQuery(
        snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN, trigger="invoked"
    )
    outcome = await scheduler.complete(plain)  # the completion-list fallback asks like this
    assert not outcome.answered_early and outcome.text == WHOLE
    scheduler.shutdown()
    engine.session.close()


async def test_zero_waits_for_the_whole_suggestion(tmp_path: Path) -> None:
    engine, scheduler, uri, _backend = setup(tmp_path, answer_after_ms=0, step_s=0.005)
    outcome = await scheduler.complete(query(engine, uri))
    assert not outcome.answered_early and outcome.text == WHOLE
    assert outcome.whole_ms == outcome.latency_ms
    scheduler.shutdown()
    engine.session.close()


ABOVE = "def total(values):\n    result = 0\n    \n    return result\n"
"""A blank line (line 2, indented) above a line the model writes again: the start of that
copy is a suggestion, the whole of it is not (post-processing drops a copy of the line
below, docs/serving.md)."""


def _above(
    tmp_path: Path, on_ready: ReadyCallback | None = None
) -> tuple[CompletionEngine, Scheduler, StreamingBackend, Callable[[], CompletionQuery]]:
    """The engine and scheduler over ``ABOVE``, and a query maker at its blank line."""
    backend = StreamingBackend(0.02, whole="return result")
    engine, _ = make_engine(tmp_path, backend, answerAfterMs=40, maxTokens=64)
    uri = (tmp_path / "above.py").as_uri()
    engine.session.buffers.open(uri, ABOVE, version=1)

    def at_blank_line() -> CompletionQuery:
        return CompletionQuery(
            snapshot=snapshot(engine, uri), line=2, column=4, trigger="automatic", answer_early=True
        )

    return engine, Scheduler(engine, on_ready=on_ready), backend, at_blank_line


async def _wait_whole(engine: CompletionEngine, request_id: str) -> CompletionOutcome:
    deadline = time.perf_counter() + 10
    while (whole := _whole_of(engine, request_id)) is None:
        assert time.perf_counter() < deadline, "the whole was never written"
        await asyncio.sleep(0.02)
    return whole


async def test_a_start_the_whole_drops_is_not_served_from_the_cache(tmp_path: Path) -> None:
    engine, scheduler, backend, at_blank_line = _above(tmp_path)
    first = await scheduler.complete(at_blank_line())
    assert first.answered_early and "return result".startswith(first.text), first.text
    whole = await _wait_whole(engine, first.request_id)
    assert whole.text == "" and not whole.cancelled  # the whole: a copy of the line below
    # Asked again at the same place, the cache no longer answers with the start the
    # whole dropped (the model is asked again: its whole suggestion there is nothing).
    calls = backend.calls
    again = await scheduler.complete(at_blank_line())
    assert not again.cache_hit, again
    assert backend.calls > calls
    scheduler.shutdown()
    engine.session.close()


async def test_a_whole_that_drops_the_start_is_announced_once(tmp_path: Path) -> None:
    """An empty whole after an early start sends the notice (the editor shows a start the
    server rejected); asked again there, the answer waits for the whole: no second start,
    no second notice (issue 24 item 3)."""
    ready: list[CompletionOutcome] = []
    engine, scheduler, _backend, at_blank_line = _above(
        tmp_path, lambda _query, whole: ready.append(whole)
    )
    first = await scheduler.complete(at_blank_line())
    assert first.answered_early and first.text, first
    await _wait_whole(engine, first.request_id)
    deadline = time.perf_counter() + 5
    while not ready and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
    assert [w.text for w in ready] == [""]
    again = await scheduler.complete(at_blank_line())  # what the editor's refresh asks
    assert not again.answered_early and again.text == "" and not again.cancelled, again
    await asyncio.sleep(0.2)
    assert len(ready) == 1
    scheduler.shutdown()
    engine.session.close()


class _GivenEngine(CompletionEngine):
    """Answers early with ``start``, then completes with ``whole`` (no model)."""

    start = ""
    whole = ""

    def complete(  # type: ignore[override]
        self, query: CompletionQuery, *, on_answer: Any = None, **_: Any
    ) -> CompletionOutcome:
        outcome = CompletionOutcome(request_id=query.request_id, line=query.line)
        if on_answer is not None:
            on_answer(dataclasses.replace(outcome, text=self.start, answered_early=True))
        time.sleep(0.05)
        return dataclasses.replace(outcome, text=self.whole, answered_early=True)


@pytest.mark.parametrize(
    ("start", "whole", "notice"),
    [
        ("compute", "compute_total(items)", True),  # longer
        ("compute_total", "compute", True),  # shorter
        ("compute", "collect", True),  # different, as long
        ("compute", "", True),  # nothing fits
        ("compute", "compute", False),  # what shows is the whole
    ],
)
async def test_a_whole_other_than_the_start_is_announced(
    tmp_path: Path, start: str, whole: str, notice: bool
) -> None:
    made, uri = make_engine(tmp_path, StreamingBackend(), answerAfterMs=1)
    engine = _GivenEngine(made.session)
    engine.start, engine.whole = start, whole
    ready: list[str] = []
    scheduler = Scheduler(engine, on_ready=lambda _query, w: ready.append(w.text))
    answer = await scheduler.complete(query(engine, uri))
    assert answer.text == start
    deadline = time.perf_counter() + 5
    while notice and not ready and time.perf_counter() < deadline:
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    assert ready == ([whole] if notice else [])
    scheduler.shutdown()
    engine.session.close()


def _whole_of(engine: CompletionEngine, request_id: str) -> CompletionOutcome | None:
    return next((o for o in engine.last_outcomes if o.request_id == request_id), None)


def test_the_cache_grows_only_from_what_was_shown() -> None:
    """A longer text that does not extend the answer shown is not put in the cache."""
    typethrough = TypeThrough(8)
    doc = Document("file:///g.py", "x = \n", version=1).snapshot()
    key = typethrough.key(doc, Position(0, 4))
    answers: list[CompletionOutcome] = []
    cleaned = iter(["ab", "abc", "xbc", "abcd", ""])
    early = EarlyAnswer(
        CompletionQuery(snapshot=doc, line=0, column=4, received_at=0.0),
        CompletionOutcome(request_id="r"),
        on_answer=answers.append,
        after_s=0.0,
        clean=lambda _raw: next(cleaned),
        typethrough=typethrough,
        key=key,
    )
    held = []
    for piece in "12345":
        early(piece)
        held.append(typethrough.cache.peek(key))
    # answered with "ab"; "xbc" changed its start and "" dropped all of it: both left out
    assert [a.text for a in answers] == ["ab"]
    assert held == ["ab", "abc", "abc", "abcd", "abcd"]
