"""Who cancels whom: the scheduler's one table (``SUPERSEDES``) checked against what it does.

Every pair of an arrival and a piece of work in flight is played, the table's empty cells
too: the work is started (on the model thread, held there by a gated fake backend, or
waiting in its debounce), the arrival comes, and the work's cancel flag must be set
exactly when the table says the arrival reaches it, with the reason the table gives.
What ``Reach`` means is written out here again (:func:`expected`), not taken from the
scheduler.
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.scheduler import (
    COMPLETION_FIRST,
    CURSOR_MOVED,
    SUPERSEDES,
    Arrival,
    Reach,
    Scheduler,
    Work,
)
from lsp_assist.serving.session import Session
from tests.serving.fakes import CharBackend

TEXT = "def f():\n    return 1\n\nvalue = \nother = \n"
ARRIVES_AT = (3, 8)
"""Where completions arrive: the end of ``value = ``."""
WORKS_AT = (4, 8)
"""Where the work in flight was asked for: the end of ``other = ``."""
SKIPPED_AT = (1, 4)
"""An automatic request here is skipped before the model (text right of the cursor)."""
DEBOUNCE_MS = 250
"""How long an automatic completion waits before the model: the arrival comes meanwhile."""
SETTLE_S = 0.05


class GatedBackend(CharBackend):
    """Generates and prefills nothing until released or cancelled; records each call's token.

    ``free`` calls to ``generate`` answer ``xxxx`` at once (to fill the type-through
    cache); a gated ``generate`` first streams ``xyz`` (an early answer's start).
    """

    def __init__(self) -> None:
        self.free = 0
        self.release = threading.Event()
        self.tokens: list[CancelToken] = []
        """The cancel flag of each gated call, in the order the model thread took them."""

    def hold(self, cancel: CancelToken) -> None:
        """Record ``cancel`` and block until it is set or the gate opens."""
        self.tokens.append(cancel)
        while not cancel.cancelled and not self.release.wait(0.002):
            pass

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Answer ``xxxx`` (free calls), or stream ``xyz`` and wait for the gate."""
        if self.free > 0:
            self.free -= 1
            return GenerationResult(text="xxxx", tokens=[ord("x")] * 4, stop_reason="length")
        tokens: list[int] = []
        if request.on_text is not None:
            time.sleep(0.005)  # past answerAfterMs: the start is answered early
            for char in "xyz":
                tokens.append(ord(char))
                request.on_text(char)
        self.hold(request.cancel)
        if request.cancel.cancelled:
            return GenerationResult(text="", tokens=tokens, stop_reason="cancelled")
        return GenerationResult(text="xyzw", tokens=[*tokens, ord("w")], stop_reason="length")

    def prefill(
        self, tokens: Sequence[int], *, cache_key: str = "", cancel: CancelToken | None = None
    ) -> int:
        """Wait for the gate or the cancel flag (the load's calibration: at once)."""
        if cancel is None:
            return len(tokens)
        self.hold(cancel)
        return 0 if cancel.cancelled else len(tokens)


@dataclasses.dataclass(frozen=True)
class Situation:
    """A piece of work in flight when something arrives."""

    kind: Work
    same_document: bool
    """For the document the arrival is for (a rewrite is for none)."""
    on_model: bool
    """Run by the model thread (else waiting in its debounce)."""

    def __str__(self) -> str:
        where = "same document" if self.same_document else "another document"
        state = "on the model" if self.on_model else "waiting"
        return f"{self.kind.value}, {where}, {state}"


SITUATIONS = (
    Situation(Work.COMPLETION, same_document=True, on_model=True),
    Situation(Work.COMPLETION, same_document=False, on_model=True),
    Situation(Work.COMPLETION, same_document=True, on_model=False),
    Situation(Work.COMPLETION, same_document=False, on_model=False),
    Situation(Work.EARLY_REST, same_document=True, on_model=True),
    Situation(Work.EARLY_REST, same_document=False, on_model=True),
    Situation(Work.PREFILL, same_document=True, on_model=True),
    Situation(Work.PREFILL, same_document=False, on_model=True),
    Situation(Work.REWRITE, same_document=False, on_model=True),
)


def expected(arrival: Arrival, situation: Situation) -> str:
    """The reason the table gives for cancelling the situation's work; '' if it goes on."""
    rule = SUPERSEDES[arrival].get(situation.kind)
    if rule is None:
        return ""
    reached = (
        Reach.ALL in rule.reach
        or (Reach.SAME_DOCUMENT in rule.reach and situation.same_document)
        or (Reach.ON_MODEL in rule.reach and situation.on_model)
    )
    return rule.reason if reached else ""


@dataclasses.dataclass
class Bench:
    """Two open documents, an engine over them, its scheduler and the gated backend."""

    engine: CompletionEngine
    scheduler: Scheduler
    backend: GatedBackend
    here: str
    """The document the arrivals are for."""
    there: str

    def query(
        self, uri: str, at: tuple[int, int], *, automatic: bool = False, early: bool = False
    ) -> CompletionQuery:
        """A query at ``at`` of the buffer as it is now."""
        snapshot = self.engine.session.buffers.snapshot(uri, disk=False)
        assert snapshot is not None
        trigger = "automatic" if automatic else "invoked"
        return CompletionQuery(
            snapshot=snapshot, line=at[0], column=at[1], trigger=trigger, answer_early=early
        )

    async def on_model(self, count: int) -> CancelToken:
        """Wait until the model thread holds its ``count``-th gated call; its token."""
        deadline = time.monotonic() + 5
        while len(self.backend.tokens) < count:
            assert time.monotonic() < deadline, "the work never reached the model"
            await asyncio.sleep(0.002)
        return self.backend.tokens[count - 1]


def bench(tmp_path: Path) -> Bench:
    raw = {
        "metrics": False,
        "persist": False,
        "watch": False,
        "debounceMs": DEBOUNCE_MS,
        "answerAfterMs": 1,
        "maxTokens": 8,
    }
    settings, warnings = parse_settings(raw)
    assert isinstance(settings, Settings) and not warnings, warnings
    backend = GatedBackend()
    for name in ("m.py", "n.py"):
        (tmp_path / name).write_text(TEXT)
    session = Session(settings, workspace=tmp_path, backend_factory=lambda _s: backend)
    assert session.index is not None
    session.index.scan()
    here, there = (
        session.buffers.open((tmp_path / name).as_uri(), TEXT, version=1).uri
        for name in ("m.py", "n.py")
    )
    assert session.load_backend() is backend
    engine = CompletionEngine(session)
    return Bench(engine, Scheduler(engine), backend, here, there)


async def start(
    b: Bench, situation: Situation, tasks: list[asyncio.Future[Any]]
) -> Callable[[], Awaitable[str]]:
    """Start the situation's work; return how to read, later, why it was cancelled ('' if not)."""
    uri = b.here if situation.same_document else b.there
    if situation.kind is Work.COMPLETION and not situation.on_model:
        waiting = asyncio.ensure_future(
            b.scheduler.complete(b.query(uri, WORKS_AT, automatic=True))
        )
        tasks.append(waiting)
        await asyncio.sleep(SETTLE_S)
        assert not waiting.done() and not b.backend.tokens, "not waiting in its debounce"

        async def outcome() -> str:
            b.backend.release.set()
            done: CompletionOutcome = await asyncio.wait_for(waiting, 5)
            return done.skipped if done.cancelled else ""

        return outcome
    if situation.kind is Work.COMPLETION:
        tasks.append(asyncio.ensure_future(b.scheduler.complete(b.query(uri, WORKS_AT))))
    elif situation.kind is Work.EARLY_REST:
        answered = await b.scheduler.complete(b.query(uri, WORKS_AT, early=True))
        assert answered.answered_early, answered
    elif situation.kind is Work.PREFILL:
        snapshot = b.engine.session.buffers.snapshot(uri, disk=False)
        assert snapshot is not None
        tasks.append(asyncio.ensure_future(b.scheduler.prefill(snapshot, *WORKS_AT)))
    else:
        tasks.append(asyncio.ensure_future(b.scheduler.rewrite(b.backend.hold)))
    token = await b.on_model(1)

    async def flag() -> str:
        return token.reason if token.cancelled else ""

    return flag


async def arrive(b: Bench, arrival: Arrival, tasks: list[asyncio.Future[Any]]) -> None:
    """Make ``arrival`` happen (for the document ``b.here``)."""
    buffers = b.engine.session.buffers
    snapshot = buffers.snapshot(b.here, disk=False)
    assert snapshot is not None
    if arrival is Arrival.COMPLETION:
        tasks.append(asyncio.ensure_future(b.scheduler.complete(b.query(b.here, ARRIVES_AT))))
    elif arrival is Arrival.CACHE_HIT:
        line, column = ARRIVES_AT
        hit = await b.scheduler.complete(b.query(b.here, (line, column + 1)))
        assert hit.cache_hit, hit
    elif arrival is Arrival.SKIPPED:
        query = b.query(b.here, SKIPPED_AT, automatic=True)
        tasks.append(asyncio.ensure_future(b.scheduler.complete(query)))
    elif arrival is Arrival.CURSOR_PREFILL:
        coro = b.scheduler.prefill(snapshot, *ARRIVES_AT, reason=CURSOR_MOVED)
        tasks.append(asyncio.ensure_future(coro))
    elif arrival is Arrival.OPEN_PREFILL:
        tasks.append(asyncio.ensure_future(b.scheduler.prefill(snapshot)))
    elif arrival is Arrival.REWRITE:
        tasks.append(asyncio.ensure_future(b.scheduler.rewrite(b.backend.hold)))
    else:
        b.scheduler.shutdown()
    await asyncio.sleep(SETTLE_S)


CELLS = [(arrival, situation) for arrival in Arrival for situation in SITUATIONS]


@pytest.mark.parametrize(("arrival", "situation"), CELLS, ids=[f"{a.value}: {s}" for a, s in CELLS])
async def test_the_table_says_who_cancels_whom(
    tmp_path: Path, arrival: Arrival, situation: Situation
) -> None:
    b = bench(tmp_path)
    tasks: list[asyncio.Future[Any]] = []
    try:
        if arrival is Arrival.CACHE_HIT:
            # a suggestion at the arrival's place, and one character of it typed
            b.backend.free = 1
            first = await b.scheduler.complete(b.query(b.here, ARRIVES_AT))
            assert first.text == "xxxx", first
            line, column = ARRIVES_AT
            b.engine.session.buffers.change(
                b.here, 2, [(Position(line, column), Position(line, column), "x")]
            )
        cancelled = await start(b, situation, tasks)
        await arrive(b, arrival, tasks)
        reason, wanted = await cancelled(), expected(arrival, situation)
        assert reason == wanted, (
            f"{arrival.value} over {situation}: the table says {wanted or 'it goes on'!r}, "
            f"the scheduler {reason or 'left it'!r}"
        )
    finally:
        b.backend.release.set()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 5)
        b.scheduler.shutdown(wait=True)
        b.engine.session.close()


def test_the_table_names_every_arrival_and_what_completions_give_way_to() -> None:
    assert set(SUPERSEDES) == set(Arrival)
    # a rewrite cut by a completion runs again behind it: it is told by this reason
    assert SUPERSEDES[Arrival.COMPLETION][Work.REWRITE].reason == COMPLETION_FIRST
    assert SUPERSEDES[Arrival.CACHE_HIT][Work.REWRITE].reason == COMPLETION_FIRST
