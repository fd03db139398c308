"""A second quantization of a GGUF, made offline with llama.cpp's own quantizer.

The bench's ``--model2 TYPE`` and ``lsp-assist quantize`` both come here: the model is
rewritten with ``llama_cpp.llama_model_quantize`` (``allow_requantize`` on, since the
packaged models are already quantized) into the user cache, once; later runs reuse
the file. Requantizing never restores what the first quantization dropped: a Q8_0 of a
Q4_K_M file is larger and slower with the same information; a Q4_0 of it loses a little
more. It serves the product command (cli/quantize_cmd.py) and the bench alike; llama_cpp
comes from its one home (vocab.llama_cpp_lib: the backend initialised, the log routed).
docs/evaluation.md.
"""

from __future__ import annotations

import os
from pathlib import Path

from lsp_assist.backends.vocab import llama_cpp_lib
from lsp_assist.errors import BackendError

TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K_M", "Q5_K_M", "Q6_K", "F16")
"""The llama.cpp file types offered (``llama_cpp.LLAMA_FTYPE_MOSTLY_<TYPE>``)."""


def quant_type(name: str) -> str | None:
    """Return ``name`` as one of TYPES (any case), or None when it is not one."""
    upper = name.strip().upper()
    return upper if upper in TYPES else None


def models_folder() -> Path:
    """Return where made quantizations are kept: ``<cache root>/models``."""
    from lsp_assist.config import cache_root, parse_settings

    settings, _ = parse_settings({})
    return cache_root(settings) / "models"


def quantized_path(source: Path, kind: str, folder: Path | None = None) -> Path:
    """Return where the ``kind`` quantization of ``source`` is kept (default models_folder)."""
    return (folder or models_folder()) / f"{source.stem}.{kind.lower()}.gguf"


def quantize(source: Path, target: Path, kind: str, threads: int = 0) -> Path:
    """Write ``source`` requantized to ``kind`` (one of TYPES) at ``target``; return it.

    The file appears whole or not at all (written beside it, then renamed). Raises
    BackendError when llama.cpp cannot read or write the model.
    """
    llama_cpp = llama_cpp_lib()
    checked = quant_type(kind)
    if checked is None:
        raise BackendError(f"unknown quantization {kind!r}: one of {', '.join(TYPES)}")
    if not source.is_file():
        raise BackendError(f"no such model: {source}")
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{checked}")
    params.allow_requantize = True
    params.nthread = threads
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.{os.getpid()}.part")
    try:
        code = llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), params)
        if code != 0 or not partial.is_file():
            raise BackendError(f"llama.cpp could not quantize {source} to {checked} (code {code})")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


def ensure_quantized(source: Path, kind: str, folder: Path | None = None, threads: int = 0) -> Path:
    """Return the ``kind`` quantization of ``source`` in ``folder``, made now if missing."""
    checked = quant_type(kind)
    if checked is None:
        raise BackendError(f"unknown quantization {kind!r}: one of {', '.join(TYPES)}")
    target = quantized_path(source, checked, folder)
    if target.is_file() and target.stat().st_mtime >= source.stat().st_mtime:
        return target
    return quantize(source, target, checked, threads)


def second_model(model: Path, value: str, folder: Path | None = None, threads: int = 0) -> Path:
    """Return the GGUF ``value`` names: a file, or a TYPE meaning ``model`` requantized.

    An existing file wins over a type of the same name; a TYPE's file is kept in
    ``folder`` (made once).
    """
    given = Path(value).expanduser()
    if given.is_file():
        return given.resolve()
    if quant_type(value) is not None:
        return ensure_quantized(model, value, folder, threads)
    raise BackendError(f"--model2 {value}: no such file, and not one of {', '.join(TYPES)}")
