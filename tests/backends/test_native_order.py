"""llama.cpp's libraries load before numpy's (a CUDA build's model load crashed otherwise).

The crash itself needs a CUDA machine (docs/backends.md, "GPU offload"); these tests
check the order that avoids it, in fresh interpreters, on any Linux machine.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from lsp_assist._native import llama_library_path

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads /proc/self/maps"
)

MAPPED = "[l.split()[-1] for l in open('/proc/self/maps') if 'libllama' in l]"


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return proc.stdout.strip()


def test_the_library_is_found_where_llama_cpp_loads_it() -> None:
    path = llama_library_path()
    assert path is not None and path.name.startswith("libllama")
    assert path.parent.name == "lib" and path.parent.parent.name == "llama_cpp"


@pytest.mark.parametrize(
    "entry", ["lsp_assist", "lsp_assist.cli.main", "lsp_assist.backends.embedding"]
)
def test_importing_the_package_maps_libllama_before_numpy(entry: str) -> None:
    out = _run(
        f"""
        import builtins, sys
        seen = []
        real_import = builtins.__import__
        def spy(name, *args, **kwargs):
            if name.split(".")[0] == "numpy" and "numpy" not in sys.modules:
                seen.append(bool({MAPPED}))
            return real_import(name, *args, **kwargs)
        builtins.__import__ = spy
        import {entry}
        builtins.__import__ = real_import
        print(bool({MAPPED}), seen[:1])
        """
    )
    mapped, first_numpy = out.split(" ", 1)
    assert mapped == "True", f"libllama is not loaded after import {entry}"
    # where the entry imports numpy, libllama was already mapped at that moment
    assert first_numpy in ("[]", "[True]"), out


def test_numpy_first_is_left_alone() -> None:
    out = _run(
        """
        import numpy
        from lsp_assist._native import load_llama_first
        print(load_llama_first())
        """
    )
    assert out == "False"
