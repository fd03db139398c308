"""Open documents too big for model work: no model call, no parsing, back to normal below.

The backend is the scheduler tests' slow fake (it counts calls); the same guard is
exercised over real JSON-RPC in tests/e2e/test_document_drift.py.
"""

from __future__ import annotations

from pathlib import Path

from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.session import Session
from tests.serving.fakes import SlowBackend, snapshot


def make(tmp_path: Path, backend: SlowBackend) -> CompletionEngine:
    settings, _ = parse_settings(
        {
            "metrics": False,
            "persist": False,
            "watch": False,
            "maxTokens": 2,
            "maxFileBytes": 5_000,
            "maxLineChars": 500,
        }
    )
    assert isinstance(settings, Settings)
    engine = CompletionEngine(
        Session(settings, workspace=tmp_path, backend_factory=lambda s: backend)
    )
    engine.session.load_backend()
    return engine


def test_minified_line_gets_no_model_call_and_no_tree(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0, tokens=2)
    engine = make(tmp_path, backend)
    path = tmp_path / "min.py"
    doc = engine.session.buffers.open(path.as_uri(), "x = [" + "1, " * 300 + "]\n", version=1)
    assert engine.session.index is not None and engine.session.index.tree_of(path) is None
    outcome = engine.complete(CompletionQuery(snapshot=snapshot(engine, doc.uri), line=1, column=0))
    assert "maxLineChars" in outcome.skipped
    assert backend.calls == 0
    # Shortened below the limit: parsed again, and the model is asked.
    engine.session.buffers.change(doc.uri, 2, [(Position(0, 5), Position(0, 905), "1")])
    assert doc.text == "x = [1]\n"
    assert engine.session.index.tree_of(path) is not None
    outcome = engine.complete(CompletionQuery(snapshot=snapshot(engine, doc.uri), line=1, column=0))
    assert outcome.skipped == "" and backend.calls == 1


def test_growing_past_the_size_limit_drops_the_parse(tmp_path: Path) -> None:
    backend = SlowBackend(step_s=0, tokens=2)
    engine = make(tmp_path, backend)
    path = tmp_path / "big.py"
    doc = engine.session.buffers.open(path.as_uri(), "a = 1\n", version=1)
    assert engine.session.index is not None and engine.session.index.tree_of(path) is not None
    engine.session.buffers.change(doc.uri, 2, [(Position(1, 0), Position(1, 0), "b = 2\n" * 1_000)])
    assert engine.session.index.tree_of(path) is None
    assert doc.line_count == 1_002
    outcome = engine.complete(CompletionQuery(snapshot=snapshot(engine, doc.uri), line=5, column=0))
    assert "maxFileBytes" in outcome.skipped and backend.calls == 0
    assert engine.prefill(snapshot(engine, doc.uri)) == 0
    engine.session.buffers.close(doc.uri)
    assert engine.session.buffers.get(doc.uri) is None
