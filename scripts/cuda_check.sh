#!/bin/bash
# GPU check of the in-process backend on a CUDA machine (docs/backends.md, "GPU offload").
#
#   scripts/cuda_check.sh prepare   # here, with PyPI: llama-cpp-python's pinned source,
#                                   # pruned to ~25 MB, and its pure-Python packages in .gpu/
#   scripts/cuda_check.sh run       # on the CUDA machine (nvcc, cmake, ninja, numpy, pytest):
#                                   # build libllama for CUDA (~160 s on 16 cores), then
#                                   # tests/backends/test_gpu.py
#
# .gpu/ is ignored by git (add "/.gpu/" to .git/info/exclude) and travels to the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
version=$(grep -E '^llama-cpp-python==' constraints.txt | cut -d= -f3)

if [ "$mode" = prepare ]; then
    rm -rf .gpu && mkdir -p .gpu/src .gpu/site
    .venv/bin/python -m pip download --no-deps --no-binary :all: -d .gpu/src "llama-cpp-python==$version"
    tar xzf .gpu/src/llama_cpp_python-"$version".tar.gz -C .gpu/src
    mv .gpu/src/llama_cpp_python-"$version"/vendor/llama.cpp .gpu/llama.cpp
    (cd .gpu/llama.cpp && rm -rf models docs tools tests benches examples gguf-py scripts media grammars)
    (cd .gpu/llama.cpp/ggml/src && rm -rf ggml-{cann,et,hexagon,hip,metal,musa,opencl,openvino,rpc,sycl,virtgpu,vulkan,webgpu,zdnn,zendnn,blas})
    site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    cp -r "$site"/llama_cpp "$site"/diskcache "$site"/gguf .gpu/site/
    rm -rf .gpu/site/llama_cpp/lib/* .gpu/site/llama_cpp/server .gpu/src
    find .gpu/site -name __pycache__ -prune -exec rm -rf {} +
    du -sh .gpu
    exit 0
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
t0=$(date +%s)
# FA kernels off: the backend runs with flash attention off (docs/backends.md)
cmake -S .gpu/llama.cpp -B .gpu/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real}" -DGGML_CUDA_FA=OFF \
    -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON >.gpu/cmake.log
ninja -C .gpu/build llama >.gpu/build.log
echo "build: $(($(date +%s) - t0)) s"
cp -a .gpu/build/bin/*.so* .gpu/site/llama_cpp/lib/
export PYTHONPATH=$PWD/.gpu/site:$PWD PYTHONUNBUFFERED=1
python3 -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
# faulthandler off: every process that segfaulted in the model load had it on (docs/backends.md)
python3 -m pytest -q -rA -p no:cacheprovider -p no:faulthandler -o addopts="" tests/backends/test_gpu.py || true
