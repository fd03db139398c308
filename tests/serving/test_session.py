"""The session: what it builds, and one ``close()`` that ends every thread it started.

A session over a real workspace starts the index scan, the file watcher, the vector
worker (``layerVector``, a bag-of-words embedding), the vector layer's query thread and
the metrics log's writer; after ``close()`` none of them is left. Threads end on their
own schedule, so the test waits for them (with a generous deadline) rather than
expecting them gone at once: it does not depend on an idle machine.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import Position
from lsp_assist.index.vectors import VectorIndex
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.session import Session
from lsp_assist.serving.status import status_json
from tests.support.vectors import BagOfWords
from tests.support.workspace import write_files

from .fakes import CURSOR_COLUMN, CURSOR_LINE, SOURCE, MarkerBackend


def _settings(tmp_path: Path, **raw: object) -> Settings:
    values: dict[str, object] = {
        "debounceMs": 0,
        "persist": False,
        "watch": True,
        "layerVector": True,
        "cacheDir": str(tmp_path / "cache"),
        **raw,
    }
    settings, warnings = parse_settings(values)
    assert isinstance(settings, Settings) and not warnings, warnings
    return settings


def _wait_gone(threads: set[threading.Thread], timeout: float = 30.0) -> set[threading.Thread]:
    """Join each thread until ``timeout`` has passed; return those still alive."""
    deadline = time.monotonic() + timeout
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return {t for t in threads if t.is_alive()}


def test_close_ends_every_thread_the_session_started(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    workspace = write_files(tmp_path / "ws", {"m.py": SOURCE, "lib/a.py": "def a():\n    pass\n"})
    session = Session(
        _settings(tmp_path), workspace=workspace, backend_factory=lambda s: MarkerBackend()
    )
    assert session.index is not None and session.metrics is not None
    scan = session.start_indexing()
    assert scan is not None
    scan.join(30)
    session.use_vectors(VectorIndex(session.index, BagOfWords, model_id="bag"))
    assert session.vectors is not None
    session.vectors.start()
    doc = session.buffers.open((workspace / "m.py").as_uri(), SOURCE, version=1)
    engine = CompletionEngine(session)
    snapshot = session.buffers.snapshot(doc.uri)
    assert snapshot is not None
    query = CompletionQuery(snapshot=snapshot, line=CURSOR_LINE, column=CURSOR_COLUMN)
    outcome = engine.complete(query)  # builds the context engine (its query thread) and logs
    assert outcome.text == "x0", outcome
    started = set(threading.enumerate()) - before
    names = {t.name for t in started}
    assert {"lsp-assist-query", "lsp-assist-vectors"} <= names, names
    session.close()
    left = _wait_gone(started)
    assert not left, sorted(t.name for t in left)
    assert session.backend is None and not session.loaded


def test_status_reads_the_session_and_the_engine(tmp_path: Path) -> None:
    workspace = write_files(tmp_path / "ws", {"m.py": SOURCE})
    session = Session(
        _settings(tmp_path, watch=False, layerVector=False, metrics=False),
        workspace=workspace,
        backend_factory=lambda s: MarkerBackend(),
    )
    try:
        engine = CompletionEngine(session)
        state = status_json(engine)
        assert state["model"]["loaded"] is False and state["documents"] == 0
        doc = session.buffers.open((workspace / "m.py").as_uri(), SOURCE, version=1)
        assert session.load_backend() is not None
        snapshot = session.buffers.snapshot(doc.uri)
        assert snapshot is not None
        engine.complete(CompletionQuery(snapshot=snapshot, line=CURSOR_LINE, column=CURSOR_COLUMN))
        state = status_json(engine)
        assert state["model"]["loaded"] is True and state["documents"] == 1
        assert state["last"]["text"] == "x0" and len(state["last_latencies_ms"]) == 1
    finally:
        session.close()


def test_buffers_hand_each_edit_to_the_index_and_keep_the_recent_files(tmp_path: Path) -> None:
    workspace = write_files(tmp_path / "ws", {"m.py": SOURCE, "n.py": "y = 2\n"})
    session = Session(
        _settings(tmp_path, watch=False, layerVector=False, metrics=False), workspace=workspace
    )
    try:
        buffers, index = session.buffers, session.index
        assert index is not None
        m, n = (workspace / "m.py"), (workspace / "n.py")
        opened_m = buffers.open(m.as_uri(), SOURCE, version=1, language_id="python")
        opened_n = buffers.open(n.as_uri(), "y = 2\n", version=1, language_id="python")
        assert buffers.recent == (opened_n.path, opened_m.path)  # newest first
        buffers.change(m.as_uri(), 2, [(Position(0, 4), Position(0, 5), "g")])
        assert buffers.version(m.as_uri()) == 2
        text = index.text_of(opened_m.path)
        assert text is not None and text.startswith("def g():")
        buffers.close(m.as_uri())
        assert buffers.get(m.as_uri()) is None
        assert buffers.snapshot(m.as_uri(), disk=False) is None
        on_disk = buffers.snapshot(m.as_uri())
        assert on_disk is not None and on_disk.text == SOURCE  # the file, as the index has it
    finally:
        session.close()
