"""Edits racing completions: every suggestion and cache entry belongs to its own version.

The event loop applies edits (as didChange handlers do) while the model thread
generates; the fake backend's answer names the version its prompt came from
(tests/serving/fakes.py), so a suggestion or a type-through cache entry built from any
other text than the request's is caught. Also: a failed request logs its own prompt.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from lsp_assist.serving.typethrough import EntryKey
from tests.serving.fakes import (
    CURSOR_COLUMN,
    CURSOR_LINE,
    MARKER_LINE,
    MarkerBackend,
    make_engine,
    snapshot,
    suggestion_for,
)


def _record_puts(engine: CompletionEngine) -> list[tuple[str, str, str]]:
    """Wrap the type-through cache's puts: return the (prefix, suffix, suggestion) list.

    The engine hashes the snapshot's texts into a key once (``key``) and puts the
    suggestion under it as it grows (``put_at``, under ``grow`` and ``put``): the texts of
    each key are remembered to name them again.
    """
    puts: list[tuple[str, str, str]] = []
    typethrough, cache = engine.typethrough, engine.typethrough.cache
    key, put_at = typethrough.key, cache.put_at
    texts: dict[EntryKey, tuple[str, str]] = {}

    def recording_key(doc: DocumentSnapshot, pos: Position) -> EntryKey:
        made = key(doc, pos)
        offset = doc.offset_at(pos)
        texts[made] = (doc.text[:offset], doc.text[offset:])
        return made

    def recording_put_at(entry: EntryKey, suggestion: str, kept: str = "") -> None:
        if suggestion:
            puts.append((*texts[entry], suggestion))
        put_at(entry, suggestion, kept)

    typethrough.key = recording_key  # type: ignore[method-assign]
    cache.put_at = recording_put_at  # type: ignore[method-assign]
    return puts


@pytest.mark.timeout(120)
async def test_edits_racing_completions_never_mix_versions(tmp_path: Path) -> None:
    backend = MarkerBackend(step_s=0.003)
    engine, uri = make_engine(tmp_path, backend)
    scheduler = Scheduler(engine)
    puts = _record_puts(engine)
    doc = engine.session.buffers.get(uri)
    assert doc is not None
    texts = {doc.version: doc.text}
    done = asyncio.Event()

    async def edit() -> None:
        # didChange runs on the event loop: rewrite the marker line every few ms
        n = 0
        while not done.is_set():
            n += 1
            old = doc.line(MARKER_LINE)
            engine.session.buffers.change(
                uri,
                doc.version + 1,
                [(Position(MARKER_LINE, 0), Position(MARKER_LINE, len(old)), f"# edit {n}")],
            )
            texts[doc.version] = doc.text
            await asyncio.sleep(0.004 if n % 3 else 0.0005)

    answers: list[tuple[int, str]] = []

    async def complete() -> None:
        for _ in range(60):
            # the handler builds its query from the buffer as it is when the request arrives
            query = CompletionQuery(snapshot=doc.snapshot(), line=CURSOR_LINE, column=CURSOR_COLUMN)
            outcome = await scheduler.complete(query)
            if outcome.text:
                answers.append((query.version, outcome.text))
            await asyncio.sleep(0.001)
        done.set()

    try:
        await asyncio.gather(edit(), complete())
    finally:
        scheduler.shutdown()

    assert len(answers) >= 20, f"too few suggestions to show anything: {len(answers)}"
    assert len(puts) >= 20
    for version, text in answers:
        assert text == suggestion_for(texts[version]), (version, text)
    made_for = {text: version for version, text in texts.items()}
    for prefix, suffix, suggestion in puts:
        # the entry is keyed by the text the suggestion was made for, not a newer one
        version = made_for.get(prefix + suffix)
        assert version is not None, "cache entry keyed by a text no request was made for"
        assert suggestion == suggestion_for(texts[version]), (version, suggestion)
    assert len(engine.typethrough) > 0


def test_a_failed_request_logs_its_own_prompt(tmp_path: Path) -> None:
    backend = MarkerBackend(step_s=0.0)
    backend.fail_on = {2}
    engine, uri = make_engine(
        tmp_path, backend, metrics=True, logPrompts=True, cacheDir=str(tmp_path / "cache")
    )
    first = engine.complete(
        CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN)
    )
    assert first.text == "x0" and not first.error
    engine.session.buffers.change(
        uri, 2, [(Position(MARKER_LINE, 0), Position(MARKER_LINE, 8), "# edit 7")]
    )
    second = engine.complete(
        CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN)
    )
    assert "failed on purpose" in second.error
    assert engine.session.metrics is not None
    engine.session.metrics.flush()  # written on the log's own thread
    records = [json.loads(line) for line in engine.session.metrics.path.read_text().splitlines()]
    assert [bool(r["error"]) for r in records] == [False, True]
    assert "# edit 0" in records[0]["prompt"]
    # the failed request's own prompt, not the one before it
    assert records[1]["prompt"] == backend.prompts[1]
    assert "# edit 7" in records[1]["prompt"] and "# edit 0" not in records[1]["prompt"]


def test_the_tree_read_for_a_snapshot_is_of_its_text(tmp_path: Path) -> None:
    engine, uri = make_engine(tmp_path, MarkerBackend())
    doc = engine.session.buffers.get(uri)
    assert doc is not None and engine.session.index is not None
    before = doc.snapshot()
    old_tree = engine.session.index.tree_for(before.path, before.text)
    assert old_tree is not None
    engine.session.buffers.change(uri, 2, [(Position(0, 4), Position(0, 5), "g")])
    # the buffer moved on: the older snapshot gets no tree rather than the newer one
    assert engine.session.index.tree_for(before.path, before.text) is None
    new_tree = engine.session.index.tree_for(doc.path, doc.snapshot().text)
    assert new_tree is not None and new_tree is not old_tree
    assert new_tree.root_node.text.startswith(b"def g(")
