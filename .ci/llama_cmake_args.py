#!/usr/bin/env python3
"""Print the CMAKE_ARGS that build llama-cpp-python for this machine without AMX.

llama.cpp's default native build (-march=native) enables Intel AMX on CPUs that
have it, and its AMX matmul segfaults on the first decode (upstream llama.cpp
issue #20824). We build with GGML_NATIVE=OFF and switch on, one by one, the
instruction sets /proc/cpuinfo reports, AMX excluded. LSP_ASSIST_GPU=cuda or
metal adds the GPU backend. Standard library only: runs before any install.
"""

from __future__ import annotations

import os
import platform
import sys

# ggml CMake option -> /proc/cpuinfo flag that must be present to turn it on.
X86_OPTIONS = {
    "GGML_AVX": "avx",
    "GGML_AVX2": "avx2",
    "GGML_FMA": "fma",
    "GGML_F16C": "f16c",
    "GGML_BMI2": "bmi2",
    "GGML_AVX_VNNI": "avx_vnni",
    "GGML_AVX512": "avx512f",
    "GGML_AVX512_VBMI": "avx512vbmi",
    "GGML_AVX512_VNNI": "avx512_vnni",
    "GGML_AVX512_BF16": "avx512_bf16",
}
AMX_OFF = ["GGML_AMX_TILE", "GGML_AMX_INT8", "GGML_AMX_BF16"]


def cpu_flags() -> set[str]:
    """Return the CPU feature flags of the first processor in /proc/cpuinfo."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def cmake_args() -> list[str]:
    """Return the CMake arguments for this machine."""
    args: list[str] = []
    gpu = os.environ.get("LSP_ASSIST_GPU", "").lower()
    if gpu == "cuda":
        args.append("-DGGML_CUDA=ON")
    elif gpu == "metal":
        args.append("-DGGML_METAL=ON")
    if platform.system() == "Darwin":
        # Apple silicon has no Intel AMX; the native build is safe there.
        return args
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        flags = cpu_flags()
        args.append("-DGGML_NATIVE=OFF")
        for option, flag in X86_OPTIONS.items():
            args.append(f"-D{option}={'ON' if flag in flags else 'OFF'}")
        args.extend(f"-D{option}=OFF" for option in AMX_OFF)
    return args


if __name__ == "__main__":
    sys.stdout.write(" ".join(cmake_args()) + "\n")
