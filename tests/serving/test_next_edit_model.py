"""The model source of next edits (serving/next_edit_model.py) around a scripted backend.

The backend writes a given rewrite one character at a time and applies the request's
stop rule as the real decoder does, so these tests pin what serving makes of a rewrite:
the smallest edits, the user's own edit never undone, a wild rewrite dropped, a buffer
that changed meanwhile answered with nothing, ``both`` without duplicates, and the
scheduler's cancels. The real model runs the same path over stdio in
tests/e2e/test_next_edit.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.config import parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving import CompletionEngine, CompletionQuery, NextEdits, Session
from lsp_assist.serving.next_edit_model import RewriteOutcome
from lsp_assist.serving.scheduler import Scheduler
from tests.serving.fakes import CharBackend

CODE = """def summarize(values):
    total = 0
    for value in values:
        total += value
    print(total)
    return total
"""
RENAMED = CODE.replace("total = 0", "count = 0")
RIGHT = RENAMED.replace("total", "count")


class RewriteBackend(CharBackend):
    """Writes ``answer`` a character per ``step_s``; stop strings, stop rule and cancel
    honoured as the real decoder honours them."""

    def __init__(self, answer: str, step_s: float = 0.0) -> None:
        self.answer = answer
        self.step_s = step_s
        self.requests: list[GenerationRequest] = []
        self.prompts: list[str] = []
        self.started = asyncio.Event()

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """The scripted rewrite, cut where the request says."""
        self.requests.append(request)
        self.prompts.append(self.detokenize(request.prompt_tokens))
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        text = ""
        result.stop_reason = "eos"
        for char in self.answer[: request.max_tokens]:
            if request.cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            time.sleep(self.step_s)
            text += char
            if any(text.endswith(s) for s in request.stop):
                text = text[: -len(next(s for s in request.stop if text.endswith(s)))]
                result.stop_reason = "stop"
                break
            cut = request.stop_rule(text) if request.stop_rule is not None else None
            if cut is not None:
                text, result.stop_reason = text[:cut], "rule"
                break
        result.text = text
        result.tokens = [ord(c) for c in text]
        result.output_tokens = len(text)
        return result


def open_session(tmp_path: Path, backend: RewriteBackend, mode: str = "model") -> Session:
    settings, warnings = parse_settings(
        {"metrics": False, "persist": False, "watch": False, "nextEdit": mode, "debounceMs": 0}
    )
    assert not warnings, warnings
    (tmp_path / "stats.py").write_text(CODE)
    session = Session(settings, workspace=tmp_path, backend_factory=lambda s: backend)
    assert session.load_backend() is backend
    session.buffers.open((tmp_path / "stats.py").as_uri(), CODE, version=1)
    return session


def rename_total(session: Session, uri: str) -> int:
    """Select ``total`` in its assignment and type ``count`` key by key; the new version."""
    session.buffers.change(uri, 2, [(Position(1, 4), Position(1, 9), "")])
    for i, ch in enumerate("count"):
        session.buffers.change(uri, 3 + i, [(Position(1, 4 + i), Position(1, 4 + i), ch)])
    return 7


def ask(next_edits: NextEdits, uri: str, version: int) -> list[tuple[int, int, int, int, str]]:
    answer = next_edits.propose(uri, version, Position(1, 9))
    assert answer.job is not None
    answer = next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    assert all(e.kind == "model" for e in answer.edits)
    return [(e.start.line, e.start.column, e.end.line, e.end.column, e.text) for e in answer.edits]


@pytest.fixture
def uri(tmp_path: Path) -> str:
    return (tmp_path / "stats.py").as_uri()


def test_the_rewrite_becomes_the_remaining_uses_renamed_and_nothing_else(
    tmp_path: Path, uri: str
) -> None:
    backend = RewriteBackend(RIGHT + "```")
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    edits = ask(next_edits, uri, version)
    # nearest the cursor (line 1) first; the user's own edit is not proposed again
    assert edits == [
        (3, 8, 3, 13, "count"),
        (4, 10, 4, 15, "count"),
        (5, 11, 5, 16, "count"),
    ]
    request = backend.requests[0]
    assert request.task_type == "next_edit" and request.prompt_timeout_s == 20.0
    prompt = backend.prompts[0]
    assert "original:\ndef summarize(values):\n    total = 0\n" in prompt
    assert "updated:\ndef summarize(values):\n    count = 0\n" in prompt
    assert f"```python\n{RENAMED}```" in prompt  # the window: the whole (short) file, as it is
    assert next_edits.counters.rewrites == 1 and next_edits.counters.rewrite_edits == 3


def test_the_rewrite_stops_once_it_rejoined_and_takes_the_rest_from_the_window(
    tmp_path: Path, uri: str
) -> None:
    lines = RIGHT.split("\n")
    rewrite = "\n".join(lines[:4]) + "\n" + RENAMED.split("\n")[4] + "\n"
    rewrite += RENAMED.split("\n")[5] + "\nGARBAGE that must never be read\n"
    backend = RewriteBackend(rewrite)
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    edits = ask(next_edits, uri, rename_total(session, uri))
    assert edits == [(3, 8, 3, 13, "count")]
    answer = next_edits.propose(uri, 7, Position(1, 9))
    assert answer.job is not None
    outcome = next_edits.rewrite(answer.job, CancelToken())
    assert outcome.stop_reason == "rule"
    assert outcome.output_tokens == len(rewrite.split("GARBAGE")[0])  # not a character more


def test_a_rewrite_that_undoes_the_users_edit_proposes_nothing(tmp_path: Path, uri: str) -> None:
    session = open_session(tmp_path, RewriteBackend(CODE + "```"))
    next_edits = NextEdits(session)
    assert ask(next_edits, uri, rename_total(session, uri)) == []


def test_a_rewrite_of_most_of_the_window_is_dropped(tmp_path: Path, uri: str) -> None:
    wild = "import os\nprint('hello')\nx = 1\ny = 2\nz = 3\nreturn total\n```"
    session = open_session(tmp_path, RewriteBackend(wild))
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    answer = next_edits.propose(uri, version, Position(1, 9))
    assert answer.job is not None
    answer = next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    assert answer.edits == [] and "changed" in answer.note


def test_a_buffer_changed_while_the_model_wrote_gets_no_edits(tmp_path: Path, uri: str) -> None:
    session = open_session(tmp_path, RewriteBackend(RIGHT + "```"))
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    answer = next_edits.propose(uri, version, Position(1, 9))
    assert answer.job is not None
    outcome = next_edits.rewrite(answer.job, CancelToken())
    assert len(outcome.edits) == 3
    session.buffers.change(uri, version + 1, [(Position(0, 0), Position(0, 0), "#\n")])
    answer = next_edits.merge(answer, outcome)
    assert answer.edits == [] and answer.note.startswith("stale")
    assert next_edits.counters.stale == 1


def test_both_gives_the_symbolic_edits_first_and_no_model_duplicate(
    tmp_path: Path, uri: str
) -> None:
    extra = RIGHT.replace("    print(count)\n", "    print(count)\n    print(len(values))\n")
    session = open_session(tmp_path, RewriteBackend(extra + "```"), mode="both")
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    answer = next_edits.propose(uri, version, Position(1, 9))
    symbolic = [(e.start.line, e.start.column, e.text) for e in answer.edits]
    assert sorted(symbolic) == [(3, 8, "count"), (4, 10, "count"), (5, 11, "count")]
    assert answer.job is not None
    answer = next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    kinds = [e.kind for e in answer.edits]
    assert kinds[:3] != ["model"] * 3 and kinds.count("model") == 1
    added = answer.edits[-1]
    assert (added.start.line, added.start.column, added.text) == (5, 0, "    print(len(values))\n")


def test_no_recent_edit_means_no_rewrite(tmp_path: Path, uri: str) -> None:
    backend = RewriteBackend(RIGHT)
    session = open_session(tmp_path, backend)
    answer = NextEdits(session).propose(uri, 1, Position(1, 9))
    assert answer.job is None and answer.note == "no recent edit" and not backend.requests


def test_a_completion_and_a_newer_rewrite_cancel_a_running_rewrite(
    tmp_path: Path, uri: str
) -> None:
    backend = RewriteBackend(RIGHT + "```", step_s=0.02)  # ~2 s for the whole rewrite
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    scheduler = Scheduler(CompletionEngine(session))

    async def scenario() -> tuple[str, str, str]:
        answer = next_edits.propose(uri, version, Position(1, 9))
        job = answer.job
        assert job is not None
        first = asyncio.ensure_future(scheduler.rewrite(lambda c: next_edits.rewrite(job, c)))
        await asyncio.sleep(0.2)
        second = asyncio.ensure_future(scheduler.rewrite(lambda c: next_edits.rewrite(job, c)))
        await asyncio.sleep(0.2)
        doc = session.buffers.snapshot(uri)
        assert doc is not None
        await scheduler.complete(CompletionQuery(snapshot=doc, line=1, column=9))
        began = time.perf_counter()
        one, two = await asyncio.gather(first, second)
        assert time.perf_counter() - began < 1.5  # neither ran its ~2 s to the end
        return one.stop_reason, two.stop_reason, one.note

    try:
        one, two, note = asyncio.run(scenario())
    finally:
        scheduler.shutdown()
        scheduler.executor.shutdown(wait=True)
    assert (one, two) == ("cancelled", "cancelled") and note == "rewrite cancelled"


def test_a_rewrite_cut_by_a_completion_runs_again_after_it(tmp_path: Path, uri: str) -> None:
    """Emacs asks for a suggestion and a next edit after the same change: the suggestion
    cancels the rewrite, which then runs again behind it while the buffer is unchanged
    and answers the remaining uses; after a change of the buffer it does not run again."""
    backend = RewriteBackend(RIGHT + "```", step_s=0.005)
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    scheduler = Scheduler(CompletionEngine(session))

    async def cut(change: bool) -> RewriteOutcome:
        answer = next_edits.propose(uri, version, Position(1, 9))
        job = answer.job
        assert job is not None
        running = asyncio.ensure_future(
            scheduler.rewrite(
                lambda c: next_edits.rewrite(job, c), wanted=lambda: next_edits.current(job)
            )
        )
        await asyncio.sleep(0.1)
        if change:
            session.buffers.change(uri, version + 1, [(Position(0, 0), Position(0, 0), "#\n")])
        doc = session.buffers.snapshot(uri)
        assert doc is not None
        await scheduler.complete(CompletionQuery(snapshot=doc, line=1, column=9))
        return await running

    try:
        again = asyncio.run(cut(change=False))
        rewrites = len([r for r in backend.requests if r.task_type == "next_edit"])
        gone = asyncio.run(cut(change=True))
    finally:
        scheduler.shutdown()
        scheduler.executor.shutdown(wait=True)
    assert again.stop_reason != "cancelled" and len(again.edits) == 3
    assert rewrites == 2  # the cut one and the one after the completion
    assert gone.stop_reason == "cancelled"
    assert len([r for r in backend.requests if r.task_type == "next_edit"]) == rewrites + 1


def test_an_edit_that_puts_back_what_a_recent_edit_replaced_is_dropped(
    tmp_path: Path, uri: str
) -> None:
    """Seen in Neovim with Qwen2.5-Coder-1.5B: after the first follow-up was applied
    (its own change, the newest), the next rewrite renamed the user's assignment back."""
    reverted = RENAMED.replace("        total += value", "        count += value")
    backend = RewriteBackend(reverted.replace("count = 0", "total = 0") + "```")
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    history = session.buffers.history.get(uri)
    assert history is not None
    history.break_burst()  # the accept ends the burst, as the plugin's apply does
    session.buffers.change(uri, version + 1, [(Position(3, 8), Position(3, 13), "count")])
    answer = next_edits.propose(uri, version + 1, Position(3, 13))
    assert answer.job is not None
    answer = next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    assert [(e.start.line, e.text) for e in answer.edits] == []
    backend.answer = reverted.replace("    print(total)", "    print(count)") + "```"
    edits = ask(next_edits, uri, version + 1)
    assert [(line, text) for line, _, _, _, text in edits] == [(4, "count")]


def test_after_an_accept_the_rest_of_the_rewrite_is_answered_without_the_model(
    tmp_path: Path, uri: str
) -> None:
    """The rewrite changed three lines; the user accepts the middle one, which makes its
    line 7 characters longer: the other two come back at once, at their places in the
    new text (the last one shifted by the accepted edit), and no second rewrite runs. A
    change of the user's own then asks the model again."""
    backend = RewriteBackend(RIGHT.replace("print(count)", "print(count, count)") + "```")
    session = open_session(tmp_path, backend)
    next_edits = NextEdits(session)
    version = rename_total(session, uri)
    answer = next_edits.propose(uri, version, Position(1, 9))
    assert answer.job is not None
    answer = next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    by_line = {e.start.line: e for e in answer.edits}
    assert sorted(by_line) == [3, 4, 5]
    accepted = by_line[4]
    assert accepted.text == "count, count"
    session.buffers.change(uri, version + 1, [(accepted.start, accepted.end, accepted.text)])
    assert next_edits.accept(accepted.id) is accepted
    again = next_edits.propose(uri, version + 1, Position(4, 10))
    assert again.job is None  # no model call
    rest = sorted((e.start.line, e.start.column, e.end.column, e.text) for e in again.edits)
    assert rest == [(3, 8, 13, "count"), (5, 11, 16, "count")]
    assert all(e.view.version == version + 1 and e.kind == "model" for e in again.edits)
    assert len(backend.requests) == 1
    # accepting one of the rest carries the last one on in the same way
    session.buffers.change(uri, version + 2, [(Position(3, 8), Position(3, 13), "count")])
    third = next(e for e in again.edits if e.start.line == 3)
    assert next_edits.accept(third.id) is third
    last = next_edits.propose(uri, version + 2, Position(3, 8))
    assert [(e.start.line, e.start.column, e.text) for e in last.edits] == [(5, 11, "count")]
    # the user's own change: the rest is dropped and the model rewrites the new text
    session.buffers.change(uri, version + 3, [(Position(0, 0), Position(0, 0), "#\n")])
    assert next_edits.propose(uri, version + 3, Position(5, 0)).job is not None
