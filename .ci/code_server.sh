#!/usr/bin/env bash
# Install real VS Code for tests/editors/test_vscode_real.py: code-server 4.96.4 (the
# VS Code 1.96.4 workbench served over HTTP) and playwright-core 1.49.1, pinned by
# tests/editors/vscode_real/package-lock.json, plus Debian's chromium and ripgrep.
#
# `npm install code-server` cannot work here (no github.com): its postinstall runs
# `npm install` in lib/vscode, whose npm-shrinkwrap.json takes @vscode/proxy-agent
# 0.27.0 from git+ssh://github.com, @vscode/ripgrep's install script downloads rg from
# GitHub and argon2's fetches a prebuilt binary from GitHub. So the packages are
# installed without their scripts, proxy-agent comes from the npm registry (the same
# version), the native modules are compiled against node's headers, rg is Debian's, and
# the rest of code-server's postinstall.sh (three links, the built-in extensions'
# packages) is done here. docs/decisions.md says why code-server.
#
# Installed once per machine under $LSP_ASSIST_CODE_SERVER_DIR (default
# ~/.cache/lsp-assist/code-server)/<key>, the key naming the pinned versions, RECIPE and a
# hash of the lock file; a second run only checks (well under a second).
# A failure prints the end of its log and FAILED with the step, exits 1 (which stops
# .ci/setup.sh --editors unless LSP_ASSIST_SKIP names code-server) and leaves its reason
# in <dir>/FAILED, which the tests repeat.
#
#   bash .ci/code_server.sh            install (or check) it
#   bash .ci/code_server.sh --print-dir  print the install folder, install nothing
set -euo pipefail
cd "$(dirname "$0")/.."

HARNESS=tests/editors/vscode_real
# Bump when the steps below change, so an old install is not taken for a new one (the
# folder's name holds it).
RECIPE=1
CODE_SERVER_VERSION=4.96.4
PLAYWRIGHT_VERSION=1.49.1
PROXY_AGENT_TGZ=https://registry.npmjs.org/@vscode/proxy-agent/-/proxy-agent-0.27.0.tgz
# Native modules of lib/vscode the server loads (kerberos, optional, needs krb5 headers).
VSCODE_NATIVE="@parcel/watcher @vscode/spdlog @vscode/deviceid native-watchdog node-pty"

say() { printf '\033[1m[code-server]\033[0m %s\n' "$*" >&2; }

key="$(sha256sum <"$HARNESS/package-lock.json" | cut -c1-10)"
ROOT="${LSP_ASSIST_CODE_SERVER_DIR:-$HOME/.cache/lsp-assist/code-server}"
DIR="$ROOT/$CODE_SERVER_VERSION-pw$PLAYWRIGHT_VERSION-r$RECIPE-$key"

if [ "${1:-}" = "--print-dir" ]; then
  echo "$DIR"
  exit 0
fi

fail() {
  if [ -n "${log:-}" ] && [ -f "$log" ]; then
    say "the end of $log:"
    tail -n 40 "$log" | sed 's/^/    /' >&2
  fi
  say "FAILED: $*"
  mkdir -p "$DIR"
  printf '%s\n' "$*" >"$DIR/FAILED"
  exit 1
}

# Debian packages: chromium (the browser the tests drive) and ripgrep (VS Code's search:
# quick open finds files with it), installed as root when missing.
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v rg >/dev/null 2>&1 || missing+=(ripgrep)
if [ "${#missing[@]}" -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    say "installing ${missing[*]} (Debian)"
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null) \
      || fail "could not install ${missing[*]} with apt-get"
  else
    fail "${missing[*]} not found (Debian: apt-get install ${missing[*]}, as root)"
  fi
fi
CHROMIUM="$(command -v chromium)"
RG="$(command -v rg)"

if [ -f "$DIR/.installed" ]; then
  rm -f "$DIR/FAILED"  # from a run that could not install chromium or ripgrep
  say "code-server $CODE_SERVER_VERSION ready in $DIR"
  exit 0
fi

command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || fail "node and npm not found"
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" = 20 ] || fail "code-server $CODE_SERVER_VERSION needs node 20, this is node $(node --version)"
for tool in make g++ python3; do
  command -v "$tool" >/dev/null 2>&1 || fail "$tool not found (needed to compile code-server's native modules)"
done
# node-gyp compiles against these headers (else it downloads them from nodejs.org).
node_prefix="$(dirname "$(dirname "$(command -v node)")")"
if [ -f "$node_prefix/include/node/node.h" ]; then
  export npm_config_nodedir="$node_prefix"
fi
# Not the user's ~/.npmrc settings that would change what is installed.
export npm_config_audit=false npm_config_fund=false npm_config_update_notifier=false

say "installing code-server $CODE_SERVER_VERSION and playwright-core $PLAYWRIGHT_VERSION into $DIR (a few minutes, once)"
rm -rf "$DIR"
mkdir -p "$DIR"
log="$DIR/install.log"
step() {
  say "$1"
  shift
  { printf '\n$ %s\n' "$*"; "$@"; } >>"$log" 2>&1 || fail "'$*' failed (log: $log)"
}
cp "$HARNESS/package.json" "$HARNESS/package-lock.json" "$DIR/"
step "npm ci (no install scripts)" npm --prefix "$DIR" ci --ignore-scripts --no-audit --no-fund
step "compiling argon2" npm --prefix "$DIR" rebuild argon2

CS="$DIR/node_modules/code-server"
VSCODE="$CS/lib/vscode"
[ -f "$VSCODE/npm-shrinkwrap.json" ] || fail "$VSCODE/npm-shrinkwrap.json missing"
step "taking @vscode/proxy-agent from the npm registry" node -e '
const fs = require("fs");
const [file, tgz] = process.argv.slice(1);
const wrap = JSON.parse(fs.readFileSync(file, "utf8"));
const entry = wrap.packages["node_modules/@vscode/proxy-agent"];
if (!entry || entry.version !== "0.27.0") throw new Error("unexpected proxy-agent entry: " + JSON.stringify(entry));
entry.resolved = tgz;
delete entry.integrity;  // the git tarball`s, not the registry`s
fs.writeFileSync(file, JSON.stringify(wrap, null, 2) + "\n");
' "$VSCODE/npm-shrinkwrap.json" "$PROXY_AGENT_TGZ"
step "installing VS Code's packages (lib/vscode, no install scripts)" \
  npm --prefix "$VSCODE" install --omit=dev --ignore-scripts --no-audit --no-fund
# shellcheck disable=SC2086
step "compiling VS Code's native modules" npm --prefix "$VSCODE" rebuild $VSCODE_NATIVE
# The rest of code-server's postinstall.sh.
ln -sfn node_modules "$VSCODE/node_modules.asar"
ln -sfn code-linux.sh "$VSCODE/bin/remote-cli/code-server"
ln -sfn browser-linux.sh "$VSCODE/bin/helpers/browser.sh"
step "installing the built-in extensions' packages" \
  npm --prefix "$VSCODE/extensions" install --omit=dev --ignore-scripts --no-audit --no-fund
step "trimming the built-in extensions' typescript" node "$VSCODE/extensions/postinstall.mjs"
mkdir -p "$VSCODE/node_modules/@vscode/ripgrep/bin"
ln -sfn "$RG" "$VSCODE/node_modules/@vscode/ripgrep/bin/rg"

# The line that starts with the version: on the very first run on a machine code-server
# first prints "[...] info  Wrote default config file to ~/.config/code-server/config.yaml".
said="$("$DIR/node_modules/.bin/code-server" --version 2>>"$log")" \
  || fail "code-server --version failed (log: $log)"
version="$(printf '%s\n' "$said" | grep -m1 "^$CODE_SERVER_VERSION " || printf '%s\n' "$said" | tail -1)"
case "$version" in
  "$CODE_SERVER_VERSION "*) ;;
  *) fail "code-server --version said '$version'" ;;
esac
node -e "require(process.argv[1] + '/node_modules/playwright-core')" "$DIR" \
  || fail "playwright-core does not load"
cat >"$DIR/install.json" <<EOF
{"codeServer": "$DIR/node_modules/.bin/code-server", "version": "$version", "chromium": "$CHROMIUM", "modules": "$DIR/node_modules"}
EOF
touch "$DIR/.installed"
say "code-server ready: $version"
