"""GPU offload: runs where llama-cpp-python was built for CUDA or Metal, skipped elsewhere.

The CPU CI machines skip this module; it was run on a CUDA machine (docs/backends.md,
"GPU offload"). Models are small GGUFs written here (F32 and Q8_0 matrices), so no
model download is needed on the GPU machine.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import GenerationRequest
from lsp_assist.backends.llama import LocalBackend
from lsp_assist.backends.llama_engine import INVARIANT_MAX_ROWS
from lsp_assist.config import ModelSettings
from tests.support.tiny_gguf import write_tiny_gguf

from .identity import check_rows_bit_identical, plain_and_drafted


def _gpu_build() -> bool:
    try:
        import llama_cpp
    except ImportError:
        return False
    return bool(llama_cpp.llama_supports_gpu_offload())


pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not _gpu_build(), reason="llama-cpp-python built without GPU offload"),
]

N_LAYERS = 4


@pytest.fixture(scope="module", params=["F32", "Q8_0"])
def gguf_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A four-layer llama GGUF with 256-wide layers."""
    path = tmp_path_factory.mktemp("gpu") / f"tiny-{request.param}.gguf"
    return write_tiny_gguf(path, n_embd=256, n_layers=N_LAYERS, n_ff=512, quant=request.param)


def _settings(**kw: Any) -> ModelSettings:
    base: dict[str, Any] = {
        "context_length": 512,
        "gpu_layers": -1,
        "draft": "prompt-lookup",
        "batch_invariant": True,
    }
    base.update(kw)
    return ModelSettings(**base)


@pytest.fixture
def gpu(gguf_path: Path) -> Iterator[LocalBackend]:
    """The model with every layer offloaded."""
    backend = LocalBackend(_settings(), model_path=gguf_path)
    yield backend
    backend.close()


def test_doctor_reports_gpu_offload() -> None:
    from lsp_assist.cli.doctor_cmd import llama_build

    build = llama_build()
    assert build["gpu_offload"] is True
    assert build["cuda"] or build["metal"]


def test_every_layer_is_offloaded(gguf_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="lsp_assist.backends.llama.native")
    backend = LocalBackend(_settings(), model_path=gguf_path)
    try:
        text = "\n".join(r.getMessage() for r in caplog.records)
        match = re.search(r"offloaded (\d+)/(\d+) layers to GPU", text)
        assert match, "llama.cpp did not report offloading"
        assert int(match.group(1)) == int(match.group(2)) >= N_LAYERS
        result = backend.generate(
            GenerationRequest(prompt_tokens=[1, *backend.tokenize("abc def abc")], max_tokens=16)
        )
        assert len(result.tokens) > 0
    finally:
        backend.close()


def test_verified_rows_are_bit_identical_on_gpu(
    gpu: LocalBackend, gguf_path: Path, request: pytest.FixtureRequest
) -> None:
    if "F32" in gguf_path.name:
        # seen on an H200 (2026-12-04): Q8_0 rows are bit-identical (one quantized kernel
        # up to 8 rows), F32 rows are not (docs/backends.md, "GPU offload")
        request.applymarker(pytest.mark.xfail(reason="CUDA F32 matmul kernels differ by rows"))
    prompt = [1, *gpu.tokenize("def abc(x): return x + abc(x - 1) " * 8)]
    follow = gpu.tokenize("def abcdef")[: INVARIANT_MAX_ROWS - 1]
    check_rows_bit_identical(gpu, prompt, follow, (2, len(follow)))


def test_drafting_matches_greedy_on_gpu(gguf_path: Path) -> None:
    # the draft model (the same file) proposes at every step; prompt lookup proposes
    # nothing on a random model's output (seen on the CPU too), so it is checked with a
    # packaged model by scripts/gpu_model_check.py
    settings = _settings(draft="model", draft_model_path=str(gguf_path))
    backend = LocalBackend(settings, model_path=gguf_path)
    try:
        prompt = [1, *backend.tokenize("abc def ghi abc def ghi abc def ghi abc de")]
        plain, drafted = plain_and_drafted(backend, prompt, 48)
        assert drafted.draft_proposed > 0
        assert len(plain.tokens) >= 16
        assert drafted.tokens == plain.tokens
    finally:
        backend.close()
