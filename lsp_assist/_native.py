"""Load order of native libraries: llama.cpp's before numpy's.

On a CUDA build of llama.cpp, a process that had imported numpy before llama.cpp's
shared libraries were loaded died with SIGSEGV inside ``llama_model_load_from_file``
(NVIDIA H200, CUDA 13.0, 2026-12-04; docs/backends.md, "GPU offload"); the same load
with ``libllama`` loaded first offloaded every layer. The pipeline imports numpy at
module level (vectors, embeddings, drafting) and llama_cpp only where a model is
loaded, so ``import lsp_assist`` loads the library here, the way llama-cpp-python
does, without importing the llama_cpp package (its import costs ~200 ms).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import sys
from pathlib import Path

_LIBRARY_NAMES = {
    "linux": ("libllama.so",),
    "darwin": ("libllama.so", "libllama.dylib"),
    "win32": ("llama.dll", "libllama.dll"),
}


def llama_library_path() -> Path | None:
    """Return llama-cpp-python's ``libllama`` (where it would load it), None if absent."""
    override = os.environ.get("LLAMA_CPP_LIB_PATH")
    if override:
        base = Path(override)
    else:
        try:
            spec = importlib.util.find_spec("llama_cpp")
        except (ImportError, ValueError):
            return None
        if spec is None or spec.origin is None:
            return None
        base = Path(spec.origin).parent / "lib"
    platform = "linux" if sys.platform.startswith(("linux", "freebsd")) else sys.platform
    for name in _LIBRARY_NAMES.get(platform, ()):
        if (base / name).is_file():
            return base / name
    return None


def load_llama_first() -> bool:
    """Load ``libllama`` now unless numpy is already in; True when it was loaded here.

    A failure is left to :func:`lsp_assist.backends.vocab.llama_cpp_lib`, which reports
    it when a model is loaded.
    """
    if "numpy" in sys.modules or sys.platform == "win32":  # Windows: DLL folders first
        return False
    path = llama_library_path()
    if path is None:
        return False
    try:
        ctypes.CDLL(str(path))
    except OSError:
        return False
    return True
