"""The vector layer's query thread ends with its session and with a model swap.

``VectorLayer`` starts a thread when a context engine gets it; the serving session
owns it and stops it when it closes and when it drops the context engine for another
model (a settings change). The embedding is the counting bag of words of
tests/index/test_vectors.py, the model the serving fakes' character backend.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from lsp_assist.config import Settings, parse_settings
from lsp_assist.index.vectors import VectorIndex
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.session import Session
from tests.support.vectors import BagOfWords
from tests.support.workspace import write_files

from .fakes import MarkerBackend


def _settings(tmp_path: Path, **raw: object) -> Settings:
    values: dict[str, object] = {
        "metrics": False,
        "watch": False,
        "persist": False,
        "cacheDir": str(tmp_path / "cache"),
        "layerVector": True,
        **raw,
    }
    settings, warnings = parse_settings(values)
    assert isinstance(settings, Settings) and not warnings, warnings
    return settings


def _engine(tmp_path: Path) -> CompletionEngine:
    """An engine whose vectors are a bag-of-words index over a scanned workspace."""
    workspace = write_files(tmp_path / "ws", {"app/a.py": "def a():\n    return 1\n"})
    engine = CompletionEngine(
        Session(_settings(tmp_path), workspace=workspace, backend_factory=lambda s: MarkerBackend())
    )
    assert engine.session.index is not None
    engine.session.index.scan()
    engine.session.use_vectors(VectorIndex(engine.session.index, BagOfWords, model_id="bag"))
    assert engine.session.load_backend() is not None
    return engine


def _query_threads(build: Callable[[], object]) -> list[threading.Thread]:
    """The vector query threads started while ``build()`` ran."""
    before = set(threading.enumerate())
    build()
    return [t for t in threading.enumerate() if t not in before and t.name == "lsp-assist-query"]


def test_closing_the_session_ends_the_query_thread(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    try:
        started = _query_threads(engine.session.context_engine)
        context = engine.session.context_engine()
        assert context is not None and context.vectors is not None
        assert len(started) == 1 and started[0].is_alive()
    finally:
        engine.session.close()
    started[0].join(5)
    assert not started[0].is_alive()


def test_a_model_swap_ends_the_old_query_thread(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    try:
        first = _query_threads(engine.session.context_engine)
        assert len(first) == 1
        engine.session.update_settings(_settings(tmp_path, modelPath=str(tmp_path / "other.gguf")))
        first[0].join(5)
        assert not first[0].is_alive()  # the old context engine's layer is gone with it
        assert engine.session.load_backend() is not None
        second = _query_threads(engine.session.context_engine)
        assert len(second) == 1 and second[0].is_alive()  # the new engine has its own
    finally:
        engine.session.close()
    second[0].join(5)
    assert not second[0].is_alive()
