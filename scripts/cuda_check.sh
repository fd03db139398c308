#!/bin/bash
# GPU check of the in-process backend on a CUDA machine (docs/backends.md, "GPU offload").
#
#   scripts/cuda_check.sh prepare   # here, with PyPI: llama-cpp-python's pinned source,
#                                   # pruned to ~26 MB, and its pure-Python packages in .gpu/
#   scripts/cuda_check.sh run       # on the CUDA machine (nvcc, cmake, ninja, numpy, pytest):
#                                   # build libllama for CUDA (~160 s on 16 cores), then
#                                   # tests/backends/test_gpu.py
#   scripts/cuda_check.sh model GGUF [DRAFT_GGUF]
#                                   # build if not yet, then a packaged model on the GPU
#                                   # beside the CPU (scripts/gpu_model_check.py)
#
# .gpu/ is ignored by .gitignore (so a device machine keeps it between calls) and travels
# there named in carry. A model that does not fit one call (64 MiB) travels in chunks:
# docs/backends.md, "GPU offload".
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-run}
version=$(grep -E '^llama-cpp-python==' constraints.txt | cut -d= -f3)

if [ "$mode" = prepare ]; then
    rm -rf .gpu && mkdir -p .gpu/src .gpu/site
    python3 -m pip download -q --no-deps --no-binary :all: -d .gpu/src "llama-cpp-python==$version"
    python3 -m pip download -q --no-deps --only-binary :all: -d .gpu/src \
        "$(grep -E '^diskcache==' constraints.txt)" "$(grep -E '^gguf==' constraints.txt)"
    tar xzf .gpu/src/llama_cpp_python-"$version".tar.gz -C .gpu/src
    mv .gpu/src/llama_cpp_python-"$version"/vendor/llama.cpp .gpu/llama.cpp
    (cd .gpu/llama.cpp && rm -rf models docs tools tests benches examples gguf-py scripts media grammars)
    (cd .gpu/llama.cpp/ggml/src && rm -rf ggml-{cann,et,hexagon,hip,metal,musa,opencl,openvino,rpc,sycl,virtgpu,vulkan,webgpu,zdnn,zendnn,blas})
    cp -r .gpu/src/llama_cpp_python-"$version"/llama_cpp .gpu/site/
    for whl in .gpu/src/*.whl; do python3 -m zipfile -e "$whl" .gpu/site; done
    rm -rf .gpu/site/llama_cpp/lib/* .gpu/site/llama_cpp/server .gpu/src
    du -sh .gpu
    exit 0
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
export PYTHONPATH=$PWD/.gpu/site:$PWD PYTHONUNBUFFERED=1
# one build at a time: a second call waits for a build running in the background
exec 9>.gpu/build.lock
flock 9
if ls .gpu/site/llama_cpp/lib/libllama.so* >/dev/null 2>&1; then
    echo "build: kept from an earlier run"
else
t0=$(date +%s)
# FA kernels off: the backend runs with flash attention off (docs/backends.md)
cmake -S .gpu/llama.cpp -B .gpu/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-90-real}" -DGGML_CUDA_FA=OFF \
    -DGGML_CUDA_NCCL=OFF -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON >.gpu/cmake.log
ninja -C .gpu/build llama >.gpu/build.log
echo "build: $(($(date +%s) - t0)) s"
mkdir -p .gpu/site/llama_cpp/lib
cp -a .gpu/build/bin/*.so* .gpu/site/llama_cpp/lib/
fi
flock -u 9
python3 -c "import llama_cpp; print(llama_cpp.llama_print_system_info().decode())"
if [ "$mode" = model ]; then
    python3 scripts/gpu_model_check.py --model "$2" ${3:+--draft-model "$3"} --json "${OUT:-.gpu}/gpu_model_check.json"
    exit $?
fi
python3 -m pytest -q -rA -p no:cacheprovider -o addopts="" tests/backends/test_gpu.py || true
