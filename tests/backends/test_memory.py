"""A local model's context and KV memory, decided from its GGUF before llama.cpp allocates.

``contextLength: 2**31`` (clamped by the settings to 1,048,576) reloaded Gemma with a
1,048,576-token KV cache: 18.8 GB of RSS for a model trained on 32,768 tokens. The
context is now clamped to the trained one, and a KV cache that does not fit in the
memory available is refused before anything is allocated.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lsp_assist.backends import memory
from lsp_assist.backends.factory import create_backend, memory_plan
from lsp_assist.backends.gguf_meta import read_gguf_header
from lsp_assist.backends.memory import MEMORY_MARGIN, kv_cache_bytes, plan_memory
from lsp_assist.backends.models import preset_installed, preset_path, small_model_path
from lsp_assist.config import ModelSettings
from lsp_assist.errors import ModelLoadError
from tests.support.tiny_gguf import write_tiny_gguf

MiB = 1024 * 1024
TINY_KV_PER_TOKEN = 1 * 2 * (8 + 8) * 2
"""write_tiny_gguf's model: 1 layer, 2 KV heads of 8 dimensions, K and V in f16."""


def _settings(path: Path, **kw: object) -> ModelSettings:
    return ModelSettings(model_path=str(path), draft="off", **kw)  # type: ignore[arg-type]


def _available(monkeypatch: pytest.MonkeyPatch, nbytes: int) -> None:
    monkeypatch.setattr(memory, "available_memory", lambda: nbytes)


def test_kv_estimate_from_the_header(tmp_path: Path) -> None:
    tiny = read_gguf_header(write_tiny_gguf(tmp_path / "t.gguf"))
    assert kv_cache_bytes(tiny, 1000) == 1000 * TINY_KV_PER_TOKEN
    smol = read_gguf_header(small_model_path())
    # SmolLM2-135M: 30 layers, 3 KV heads of 576 / 9 = 64 dimensions
    assert kv_cache_bytes(smol, 8192) == 30 * 3 * (64 + 64) * 2 * 8192


def test_kv_estimate_reads_gemmas_head_size() -> None:
    if not preset_installed("gemma-270m"):
        pytest.skip("Gemma-3-270M not installed")
    gemma = read_gguf_header(preset_path("gemma-270m"))
    # 18 layers, 1 KV head of 256 (key_length, not 640 / 4): the 18 GiB at 2**20
    assert kv_cache_bytes(gemma, 1 << 20) == 18 * 1 * 512 * 2 * (1 << 20)
    assert memory.trained_context(gemma) == 32768


def test_context_is_clamped_to_the_trained_one(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", context_length=512)
    plan = plan_memory(_settings(path, context_length=1 << 20))
    assert plan.settings.context_length == 512 and plan.settings.batch_size == 512
    assert plan.kv_bytes == 512 * TINY_KV_PER_TOKEN
    assert len(plan.warnings) == 1 and "using its 512 tokens" in plan.warnings[0]
    assert not plan.refusal
    within = plan_memory(_settings(path, context_length=256))
    assert within.settings.context_length == 256 and not within.warnings


def test_a_kv_cache_over_the_available_memory_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", context_length=1 << 20)
    _available(monkeypatch, MEMORY_MARGIN + 16 * MiB)
    plan = plan_memory(_settings(path, context_length=1 << 20))  # 64 MiB of KV
    assert "KV cache of 64 MiB (t.gguf)" in plan.refusal and "not loaded" in plan.refusal
    assert f"at most {16 * MiB // TINY_KV_PER_TOKEN:,} tokens fit" in plan.refusal
    assert not plan_memory(_settings(path, context_length=1 << 18)).refusal  # 16 MiB
    # what a model about to be closed gives back counts
    assert not plan_memory(_settings(path, context_length=1 << 20), releasing=64 * MiB).refusal


def test_the_draft_models_cache_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    main = write_tiny_gguf(tmp_path / "main.gguf", context_length=1 << 20)
    draft = write_tiny_gguf(tmp_path / "draft.gguf", context_length=1 << 20, seed=1)
    _available(monkeypatch, MEMORY_MARGIN + 48 * MiB)
    alone = _settings(main, context_length=1 << 19)  # 32 MiB
    assert not plan_memory(alone).refusal
    both = ModelSettings(
        model_path=str(main), draft="model", draft_model_path=str(draft), context_length=1 << 19
    )
    plan = plan_memory(both)
    assert plan.kv_bytes == 64 * MiB and "(draft.gguf)" in plan.refusal


def test_create_backend_clamps_the_context(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", context_length=512)
    backend = create_backend(_settings(path, context_length=1 << 20))
    try:
        assert backend.n_ctx == 512  # type: ignore[attr-defined]
    finally:
        backend.close()


def test_create_backend_refuses_before_allocating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_tiny_gguf(tmp_path / "t.gguf", context_length=1 << 20)
    _available(monkeypatch, MEMORY_MARGIN + MiB)
    with pytest.raises(ModelLoadError, match="needs a KV cache"):
        create_backend(_settings(path, context_length=1 << 20))


def test_memory_plan_leaves_what_it_cannot_judge_to_the_load(tmp_path: Path) -> None:
    missing = _settings(tmp_path / "missing.gguf")
    assert memory_plan(missing) == memory.MemoryPlan(missing)
    remote = ModelSettings(backend="remote", context_length=1 << 20)
    assert not memory_plan(remote).refusal and not memory_plan(remote).warnings
