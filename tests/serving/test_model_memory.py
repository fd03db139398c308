"""New model settings whose KV cache would not fit are refused, and the loaded model runs on.

The engine asks the backends' memory plan before it closes a loaded model for new
settings (the available memory is made small here, the models are tiny GGUFs): a
refusal keeps the model and its settings and says why in ``status``; an accepted
change whose context is longer than the model was trained on is clamped with a
warning.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_assist.backends import memory
from lsp_assist.config import Settings, parse_settings
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.session import Session
from lsp_assist.serving.status import status_json
from tests.support.tiny_gguf import write_tiny_gguf

MiB = 1024 * 1024


def _settings(**raw: object) -> Settings:
    values: dict[str, object] = {"metrics": False, "draft": "off", "contextBudget": 256, **raw}
    settings, warnings = parse_settings(values)
    assert not warnings, warnings
    return settings


def test_a_context_that_does_not_fit_keeps_the_loaded_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tiny_gguf(tmp_path / "long.gguf", context_length=1 << 20)
    engine = CompletionEngine(Session(_settings(modelPath=str(path), contextLength=1024)))
    try:
        loaded = engine.session.load_backend()
        assert loaded is not None
        monkeypatch.setattr(memory, "available_memory", lambda: memory.MEMORY_MARGIN + 8 * MiB)
        wanted = _settings(modelPath=str(path), contextLength=1 << 20, maxTokens=7)
        assert engine.session.update_settings(wanted) == []
        assert engine.session.backend is loaded and engine.session.load_backend() is loaded
        assert engine.settings.model.context_length == 1024  # the model's settings stay
        assert engine.settings.completion.max_tokens == 7  # the rest is applied
        assert "needs a KV cache of 64 MiB" in engine.session.model_refused
        status = status_json(engine)["model"]
        assert status["loaded"] and not status["error"]
        assert status["refused"] == engine.session.model_refused
        # a context that fits is taken: the old model is closed, the new one loads
        fits = _settings(modelPath=str(path), contextLength=4096)
        assert engine.session.update_settings(fits) == [] and not engine.session.model_refused
        assert engine.session.backend is None
        assert engine.session.load_backend() is not None
    finally:
        engine.session.close()


def test_a_context_past_the_trained_one_is_clamped_with_a_warning(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "short.gguf", context_length=512)
    engine = CompletionEngine(Session(_settings(modelPath=str(path), contextLength=256)))
    try:
        assert engine.session.load_backend() is not None
        warnings = engine.session.update_settings(
            _settings(modelPath=str(path), contextLength=1 << 20)
        )
        assert len(warnings) == 1 and "using its 512 tokens" in warnings[0]
        backend = engine.session.load_backend()
        assert backend is not None and backend.n_ctx == 512  # type: ignore[attr-defined]
    finally:
        engine.session.close()
