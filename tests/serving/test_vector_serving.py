"""Vector retrieval through the completion engine: started with indexing, in explain.

The real pieces a user has: the workspace index, the packaged all-MiniLM-L6-v2 through
llama.cpp, the vectors persisted in the workspace's cache; the model answering
completions is the serving fakes' character backend.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")
pytest.importorskip("all_minilm_l6_v2")

from lsp_assist.config import Settings, parse_settings
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.session import Session
from lsp_assist.serving.vectors_wiring import open_workspace_vectors
from tests.support.workspace import scanned_index, write_files

from .fakes import MarkerBackend, snapshot

FILES = {
    "app/checksum.py": (
        "def compute_checksum(data):\n"
        '    """Return the rolling checksum of a byte string."""\n'
        "    total = 17\n"
        "    for byte in data:\n"
        "        total = (total * 31 + byte) % 65521\n"
        "    return total\n"
    ),
    "app/weather.py": "def forecast_rain(city):\n    return clouds(city) * humidity(city)\n",
}
MAIN = (
    "def send_packet(sock, payload):\n"
    "    body = payload.encode()\n"
    "    # append the rolling checksum of the body bytes\n"
    "    \n"
)


def _engine(tmp_path: Path, **raw: object) -> tuple[CompletionEngine, str]:
    workspace = write_files(tmp_path / "ws", {**FILES, "app/net.py": MAIN})
    values: dict[str, object] = {
        "metrics": False,
        "watch": False,
        "cacheDir": str(tmp_path / "cache"),
        "layerVector": True,
        "vectorThreshold": 0.3,
        "vectorWaitMs": 5000,
        "contextBudget": 1024,
        **raw,
    }
    settings, warnings = parse_settings(values)
    assert isinstance(settings, Settings) and not warnings, warnings
    engine = CompletionEngine(
        Session(settings, workspace=workspace, backend_factory=lambda s: MarkerBackend())
    )
    path = workspace / "app" / "net.py"
    doc = engine.session.buffers.open(path.as_uri(), MAIN, version=1, language_id="python")
    assert engine.session.load_backend() is not None
    return engine, doc.uri


def test_vectors_start_with_indexing_and_reach_explain(tmp_path: Path) -> None:
    engine, uri = _engine(tmp_path)
    try:
        engine.session.start_indexing()
        assert engine.session.vectors is not None
        assert engine.session.vectors.ready.wait(120), engine.session.vectors.stats
        assert engine.session.vectors.stats.chunks == 3 and not engine.session.vectors.stats.error
        prompt = engine.explain(snapshot(engine, uri), 3, 4)
        similar = next(layer for layer in prompt.layers if layer.name == "similar")
        assert [item.source for item in similar.items] == ["app/checksum.py"]
        assert similar.items[0].reason.startswith("vector cosine")
        assert "total = (total * 31 + byte) % 65521" in prompt.prompt
        assert "forecast_rain" not in prompt.prompt  # scored under the threshold
    finally:
        engine.session.close()

    # a restart reads the vectors from the workspace's cache: nothing is embedded again
    again, _ = _engine(tmp_path)
    try:
        again.session.start_indexing()
        assert again.session.vectors is not None and again.session.vectors.ready.wait(120)
        assert again.session.vectors.stats.embedded == 0 and again.session.vectors.stats.reused == 3
    finally:
        again.session.close()


def test_switch_off_starts_nothing(tmp_path: Path) -> None:
    engine, uri = _engine(tmp_path, layerVector=False)
    try:
        engine.session.start_indexing()
        assert engine.session.vectors is None
        context = engine.session.context_engine()
        assert context is not None and context.vectors is None
        prompt = engine.explain(snapshot(engine, uri), 3, 4)
        assert "65521" not in prompt.prompt
    finally:
        engine.session.close()


def test_the_workspace_wiring_follows_events(tmp_path: Path) -> None:
    index = scanned_index(tmp_path / "ws", {"a.py": "def a():\n    return 1\n"})
    vectors = open_workspace_vectors(index, Settings(), None)
    assert vectors.poll_s is None  # the index reports its changes
    assert vectors.source is index  # and its gate is the one the worker yields to
    vectors.stop()
