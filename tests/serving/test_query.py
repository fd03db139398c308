"""The request as a value: a frozen query over a snapshot, the scheduler's bookkeeping apart."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lsp_assist.documents import Document
from lsp_assist.serving.model import CompletionQuery
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, MarkerBackend, make_engine, snapshot


def test_the_query_cannot_be_changed(tmp_path: Path) -> None:
    engine, uri = make_engine(tmp_path, MarkerBackend(step_s=0.0))
    query = CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.column = CURSOR_COLUMN  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        query.snapshot = snapshot(engine, uri)  # type: ignore[misc]
    # what the scheduler adds is not the query's
    for name in ("cancel", "queued_at", "on_answer"):
        assert not hasattr(query, name), name
    assert query.uri == uri and query.version == 1
    engine.session.close()


def test_at_converts_the_client_position_once() -> None:
    # "😀" is two UTF-16 units, one code point, four UTF-8 bytes
    snap = Document("file:///w/m.py", "s = '😀x'\n", version=3).snapshot()
    utf16 = CompletionQuery.at(snap, 0, 8, "utf-16", trigger="automatic")
    utf8 = CompletionQuery.at(snap, 0, 10, "utf-8", answer_early=True)
    assert (utf16.line, utf16.column) == (utf8.line, utf8.column) == (0, 7)
    assert utf16.trigger == "automatic" and not utf16.answer_early
    assert utf8.answer_early and utf8.version == 3
    past = CompletionQuery.at(snap, 0, 99)  # past the line's end: its end (LSP 3.17)
    assert past.column == len("s = '😀x'")


def test_the_engine_reads_no_buffer_and_no_disk(tmp_path: Path) -> None:
    engine, uri = make_engine(tmp_path, MarkerBackend(step_s=0.0))
    query = CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN)

    def no_snapshot(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the engine took a snapshot on the model thread")

    engine.session.buffers.snapshot = no_snapshot  # type: ignore[method-assign,assignment]
    (tmp_path / "m.py").unlink()  # nothing to read on disk either
    outcome = engine.complete(query)
    assert outcome.text == "x0" and not outcome.error, outcome
    engine.session.close()
