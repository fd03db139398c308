"""Scheduler logic with a slow fake backend: newest-wins, cancels, prefill yields to typing.

The fake only stands in for timing; the same paths run against the real model in
tests/e2e/test_server.py.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from lsp_assist.serving.session import Session
from lsp_assist.serving.status import status_json
from tests.serving.fakes import SlowBackend, snapshot


def make(tmp_path: Path, backend: SlowBackend) -> tuple[CompletionEngine, Scheduler, str]:
    settings, _ = parse_settings(
        {"metrics": False, "debounceMs": 0, "persist": False, "watch": False, "maxTokens": 20}
    )
    assert isinstance(settings, Settings)
    (tmp_path / "m.py").write_text("def f():\n    return 1\n\nvalue = ")
    engine = CompletionEngine(
        Session(settings, workspace=tmp_path, backend_factory=lambda s: backend)
    )
    engine.session.index.scan()
    path = tmp_path / "m.py"
    doc = engine.session.buffers.open(path.as_uri(), path.read_text(), version=1)
    engine.session.load_backend()
    return engine, Scheduler(engine), doc.uri


def at(engine: CompletionEngine, uri: str, line: int, column: int) -> CompletionQuery:
    """A query at ``line``/``column`` of the buffer as it is now."""
    return CompletionQuery(snapshot=snapshot(engine, uri), line=line, column=column)


async def test_newer_request_cancels_the_running_one(tmp_path: Path) -> None:
    backend = SlowBackend()
    engine, scheduler, uri = make(tmp_path, backend)
    first = asyncio.ensure_future(scheduler.complete(at(engine, uri, 3, 8)))
    await asyncio.sleep(0.1)
    second = await scheduler.complete(at(engine, uri, 3, 8))
    older = await first
    assert older.cancelled and older.text == ""
    assert second.text.startswith("x") and not second.cancelled
    scheduler.shutdown()


async def test_completion_cancels_a_running_prefill(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0.02)
    engine, scheduler, uri = make(tmp_path, backend)
    prefill = asyncio.ensure_future(scheduler.prefill(snapshot(engine, uri)))
    await asyncio.sleep(0.1)
    outcome = await scheduler.complete(at(engine, uri, 3, 8))
    evaluated = await prefill
    # The prefill stopped part-way instead of running its 50 steps before the completion.
    assert backend.prefill_cancelled == 1
    assert evaluated < 50
    assert outcome.text
    scheduler.shutdown()


async def test_a_prefill_at_the_cursor_cancels_the_older_prefills(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0.02)
    engine, scheduler, uri = make(tmp_path, backend)
    at_open = asyncio.ensure_future(scheduler.prefill(snapshot(engine, uri)))
    await asyncio.sleep(0.1)
    first = asyncio.ensure_future(scheduler.prefill(snapshot(engine, uri), 1, 4, reason="cursor"))
    await asyncio.sleep(0)
    second = await scheduler.prefill(snapshot(engine, uri), 3, 8, reason="cursor")
    # the didOpen prefill stopped part-way; the first cursor report never ran (it was
    # queued behind it when the second came); the second ran whole and is the record
    assert await at_open < 50 and await first == 0 and second == 50
    assert backend.prefill_cancelled == 1
    record = engine.last_prefill
    assert record is not None and (record.line, record.column, record.reason) == (3, 8, "cursor")
    assert record.evaluated == 50 and record.prompt_tokens > 0
    scheduler.shutdown()


async def test_an_automatic_request_the_model_will_not_see_leaves_the_prefill(
    tmp_path: Path,
) -> None:
    backend = SlowBackend(step_s=0.02)
    engine, scheduler, uri = make(tmp_path, backend)
    prefill = asyncio.ensure_future(scheduler.prefill(snapshot(engine, uri), 1, 0, reason="cursor"))
    await asyncio.sleep(0.1)
    # at the start of "    return 1": text right of the cursor, skipped before the model
    query = dataclasses.replace(at(engine, uri, 1, 0), trigger="automatic")
    outcome = await scheduler.complete(query)
    assert outcome.skipped == "text right of cursor"
    assert await prefill == 50 and backend.prefill_cancelled == 0
    scheduler.shutdown()


async def test_stale_version_is_not_sent_to_the_model(tmp_path: Path) -> None:
    backend = SlowBackend()
    engine, scheduler, uri = make(tmp_path, backend)
    query = at(engine, uri, 3, 8)
    # made for version 0: the buffer has moved on to 1 since
    old = CompletionQuery(snapshot=dataclasses.replace(query.snapshot, version=0), line=3, column=8)
    outcome = await scheduler.complete(old)
    assert outcome.cancelled and outcome.skipped == "stale version"
    assert backend.calls == 0
    scheduler.shutdown()


async def test_type_through_is_served_without_the_model(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0.001, tokens=6)
    engine, scheduler, uri = make(tmp_path, backend)
    first = await scheduler.complete(at(engine, uri, 3, 8))
    assert first.text == "xxxxxx"
    engine.session.buffers.change(uri, 2, [(Position(3, 8), Position(3, 8), "xx")])
    second = await scheduler.complete(at(engine, uri, 3, 10))
    assert second.cache_hit and second.text == "xxxx"
    assert backend.calls == 1
    scheduler.shutdown()


def test_automatic_trigger_skip_rules(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0.0, tokens=2)
    engine, _scheduler, _ = make(tmp_path, backend)
    path = tmp_path / "rules.py"
    text = "total = compute(values)\n# a comment here\nname = 'text in a string'\nx = \n"
    path.write_text(text)
    doc = engine.session.buffers.open(path.as_uri(), text, version=1)

    def skipped(line: int, column: int, trigger: str = "automatic") -> str:
        query = CompletionQuery(snapshot=doc.snapshot(), line=line, column=column, trigger=trigger)
        return engine.complete(query).skipped

    assert skipped(0, 3) == "mid-word"
    assert skipped(0, 8) == "text right of cursor"
    # a skip is the last outcome status reports (a benchmark's record says why it is empty)
    assert engine.last_outcomes[-1].skipped == "text right of cursor"
    assert status_json(engine)["last"]["skipped"] == "text right of cursor"
    assert skipped(1, 16) == "inside a comment"
    assert skipped(2, 24) == ""  # strings are allowed unless skipInStrings is on
    assert skipped(3, 4) == ""
    assert skipped(0, 3, trigger="invoked") == ""  # an explicit request is always answered
    engine.settings.completion.skip_in_strings = True
    assert skipped(2, 24) == "inside a string"
