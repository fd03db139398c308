"""The VS Code extension: its protocol use, its logic's unit tests, its bundle.

Besides real VS Code (test_vscode_real.py, code-server), editors/vscode/test/drive-server.mjs
drives the server with the libraries vscode-languageclient 11 is built on (vscode-jsonrpc,
vscode-languageserver-protocol) in plain node: initialize with the inlineCompletion
client capability, didOpen, textDocument/inlineCompletion, textDocument/completion, the
lspAssist commands; it exits non-zero on any protocol error. The extension's logic
(src/logic.ts: status bar states, settings diff, listener disposal, doctor command)
has unit tests run by node's test runner, and the esbuild bundle is loaded in node with
a stand-in `vscode` module and listed by `vsce ls`. Next edits
(textDocument/copilotInlineEdit): `drive-server.mjs --next-edit` renames a definition
and follows the server's edits with the extension's compiled logic (which edit shows,
the key's jump then apply, the decoration's text and hint).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .support.next_edit_source import ACCEPT, SHAPES
from .support.project import CURSOR_LINE, EARLY_SETTINGS, MAIN
from .support.vscode_client import HAVE_MODULES, NODE, VSCODE, drive, drive_command

pytestmark = [pytest.mark.editor, pytest.mark.slow]


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_protocol_client(
    workspace: Path, server_command: str, server_env: dict[str, str], logic_js: Path
) -> None:
    rc, report, stderr = drive(workspace, server_command, server_env, logic_js)
    context = json.dumps(report, indent=1)[:4000] + "\n--- stderr ---\n" + stderr[-3000:]
    assert rc == 0, context
    assert report["errors"] == [], context

    # The status bar said loading until lspAssist.status said ready, then ready.
    timeline = report["statusTimeline"]
    assert timeline[-1]["ready"] is True and timeline[-1]["loaded"] is True, timeline
    assert all(entry["ready"] is False for entry in timeline[:-1]), timeline
    assert [view["state"] for view in report["statusStates"]] == ["loading", "ready"], context

    caps = report["capabilities"]
    assert caps["inlineCompletionProvider"] is not None, context
    assert caps["completionProvider"] is not None
    sync = caps["textDocumentSync"]
    assert (sync["change"] if isinstance(sync, dict) else sync) == 2  # incremental
    assert set(report["commands"]) >= {
        "lspAssist.accept",
        "lspAssist.explainContext",
        "lspAssist.status",
    }

    # textDocument/inlineCompletion: an InlineCompletionList (or item array).
    result = report["inlineCompletion"]
    assert result is None or isinstance(result, dict | list), context
    for item in report["inlineItems"]:
        assert isinstance(item["insertText"], str | dict)
        if "range" in item:
            assert item["range"]["start"]["line"] == CURSOR_LINE - 1
        assert item["command"]["command"] == "lspAssist.accept"
        assert item["command"]["arguments"], "accept needs the request id"
    if report["inlineItems"]:
        # VS Code runs the item's command on acceptance; the server counted it.
        assert report["acceptSent"] is True
        assert report["accept"]["accepted"] is True, context

    completion = report["completion"]
    assert completion is None or isinstance(completion, dict | list)
    items = completion["items"] if isinstance(completion, dict) else (completion or [])
    manifest = json.loads((VSCODE / "package.json").read_text())
    described = manifest["contributes"]["configuration"]["properties"]["lspAssist.completionItems"]
    for item in items:
        assert "textEdit" in item and item["command"]["command"] == "lspAssist.accept"
        # lspAssist.completionItems describes the item the server sends.
        assert f"detail '{item['detail']}'" in described["description"], (item, described)

    assert report["status"]["initialized"] is True, context
    explain = report["explainContext"]
    assert isinstance(explain, dict) and isinstance(explain.get("text"), str), context
    assert "error" not in explain, context
    # The initializationOptions and the configuration change were accepted: the server
    # warns (window/showMessage) about any unknown or invalid key.
    warnings = [e["message"] for e in report["log"] if "setting" in (e.get("message") or "")]
    assert warnings == [], warnings

    # The server exited cleanly after shutdown/exit.
    assert report["serverExit"] == {"code": 0, "signal": None}, context


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
@pytest.mark.parametrize("opt_in", [True, False], ids=["opted-in", "not-opted-in"])
def test_vscode_early_answer_notice(
    workspace: Path, server_command: str, server_env: dict[str, str], logic_js: Path, opt_in: bool
) -> None:
    """The extension's opt-in gets lspAssist/suggestionReady and then the whole suggestion;
    without it, no notice comes, though the whole is written (and cached) all the same."""
    last_line = MAIN.splitlines()[CURSOR_LINE - 1]
    flags = ["--early", "--opt-in"] if opt_in else ["--early"]
    cmd = drive_command(workspace, server_command, EARLY_SETTINGS, logic_js, *flags)
    proc = subprocess.run(
        cmd, cwd=VSCODE, env=server_env, capture_output=True, text=True, timeout=200, check=False
    )
    report: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    context = json.dumps(report, indent=1)[:4000] + "\n--- stderr ---\n" + proc.stderr[-3000:]
    assert proc.returncode == 0 and report["errors"] == [], context
    early = report["early"]
    first = early["first"]["text"]
    assert first and early["first"]["triggerKind"] == 2, context
    again = early.get("again")
    assert again is not None, f"no lspAssist/suggestionReady in 60 s\n{context}"
    # The second answer (Automatic) is the whole suggestion, from the server's cache.
    whole = again["text"]
    assert again["triggerKind"] == 2, context
    assert whole and len(whole) > len(first) and whole.startswith(first.rstrip()), context
    assert early["last"] == {"cache_hit": True, "text": whole}, context
    if opt_in:
        assert report["sentExperimental"] == {"lspAssistSuggestionReady": True}, context
        (notice,) = early["notices"]
        assert notice["textDocument"]["uri"] == (workspace / "main.py").as_uri(), context
        assert notice["position"] == {"line": CURSOR_LINE - 1, "character": len(last_line)}
        # logic.ts's readyIgnored, as the extension runs it on the notice: ask again.
        assert early["decision"] == "ask again", context
    else:
        assert report["sentExperimental"] is None, context
        assert early["whole"] == whole, context  # the server had finished writing it
        assert early["notices"] == [] and early["noticesBeforeAgain"] == 0, context


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_early_check_fails_without_an_early_answer(
    workspace: Path, server_command: str, server_env: dict[str, str], logic_js: Path
) -> None:
    """`--early --opt-in` with no early answer (answerAfterMs 0: the first answer is the
    whole) gets no notice: the driver says so and exits 1, not 0."""
    settings = {**EARLY_SETTINGS, "answerAfterMs": 0}
    cmd = drive_command(
        workspace,
        server_command,
        settings,
        logic_js,
        "--early",
        "--opt-in",
        "--early-wait-ms",
        "3000",
    )
    proc = subprocess.run(
        cmd, cwd=VSCODE, env=server_env, capture_output=True, text=True, timeout=200, check=False
    )
    report: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    context = json.dumps(report, indent=1)[:4000] + "\n--- stderr ---\n" + proc.stderr[-3000:]
    assert proc.returncode == 1, context
    assert report["early"]["notices"] == [] and "again" not in report["early"], context
    messages = [e.get("message", "") for e in report["errors"] if e.get("request") == "early"]
    assert any("no lspAssist/suggestionReady within 3000 ms" in m for m in messages), context


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
def test_vscode_status_bar_on_model_error(
    workspace: Path, server_command: str, server_env: dict[str, str], logic_js: Path
) -> None:
    """A model that cannot load: the status bar goes from loading to error, with the reason."""
    missing = str(workspace / "missing.gguf")
    rc, report, stderr = drive(
        workspace, server_command, server_env, logic_js, {"modelPath": missing}, retries=0
    )
    context = json.dumps(report, indent=1)[:4000] + "\n--- stderr ---\n" + stderr[-3000:]
    assert rc == 0 and report["errors"] == [], context
    assert missing in report["statusTimeline"][-1]["error"], context
    states = report["statusStates"]
    assert [view["state"] for view in states] == ["loading", "error"], context
    assert states[-1]["text"] == "$(error) lsp-assist: error"
    assert missing in states[-1]["tooltip"], context
    # explain has no model to build with: a RequestFailed error, not a result
    assert report["explainError"]["code"] == -32803, context


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code extension needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_extension_compiles() -> None:
    """The extension type-checks against vscode-languageclient 11; its unit tests pass."""
    tsc = VSCODE / "node_modules" / "typescript" / "bin" / "tsc"
    proc = subprocess.run(
        [str(NODE), str(tsc), "-p", "."],  # -> out/, which the unit tests import
        cwd=VSCODE,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    unit = subprocess.run(
        [str(NODE), "--test", "test/unit/"],
        cwd=VSCODE,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert unit.returncode == 0, unit.stdout[-6000:] + unit.stderr[-2000:]
    passed = re.search(r"^# pass (\d+)$", unit.stdout, re.M)
    assert passed and int(passed.group(1)) >= 21 and "# fail 0" in unit.stdout, unit.stdout
    manifest = json.loads((VSCODE / "package.json").read_text())
    settings = manifest["contributes"]["configuration"]["properties"]
    for key in ("modelPath", "draftModelPath", "contextBudget", "draft", "debounceMs"):
        assert f"lspAssist.{key}" in settings
    for key in ("maxTokens", "backend", "remoteUrl", "serverPath"):
        assert f"lspAssist.{key}" in settings
    # Every server-side key the extension offers is a real server setting.
    # and its default there is the server's default (the extension sends only changed keys,
    # so a different default would show one value and use another).
    from lsp_assist.config import SETTING_KEYS, Settings

    defaults = Settings()
    client_only = {
        "serverPath",
        "serverArgs",
        "completionItems",
        "extraSettings",
        "nextEdit.enabled",
        "reportCursorMs",
    }
    for name, schema in settings.items():
        key = name.removeprefix("lspAssist.")
        if key in client_only:
            continue
        assert key in SETTING_KEYS, f"{name} is not a server setting"
        section, field = SETTING_KEYS[key]
        assert schema["default"] == getattr(getattr(defaults, section), field), name
        if "enum" in schema:
            assert schema["default"] in schema["enum"]


# Loads the bundle with a stand-in for the `vscode` module (only VS Code provides it) and
# prints its exports: a bundle that missed a dependency fails to load here.
LOAD_BUNDLE = r"""
const Module = require('module');
const stub = new Proxy(function () {}, {
  get: (t, p) => (p === Symbol.toPrimitive || p === 'then' ? undefined : stub),
  apply: () => stub,
  construct: () => stub,
});
const load = Module._load;
Module._load = function (request, ...rest) {
  return request === 'vscode' ? stub : load.call(this, request, ...rest);
};
const ext = require(process.argv[1]);
console.log(JSON.stringify({ activate: typeof ext.activate, deactivate: typeof ext.deactivate }));
"""


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code extension needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_extension_bundle() -> None:
    """esbuild bundles the extension into one file; the .vsix holds four files."""
    esbuild = VSCODE / "node_modules" / "esbuild" / "bin" / "esbuild"
    manifest = json.loads((VSCODE / "package.json").read_text())
    assert manifest["main"] == "./dist/extension.js"
    bundle = manifest["scripts"]["bundle"].split()
    assert bundle[0] == "esbuild" and "--external:vscode" in bundle
    proc = subprocess.run(
        [str(esbuild), *bundle[1:]], cwd=VSCODE, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    out = VSCODE / "dist" / "extension.js"
    source = out.read_text()
    # Everything but VS Code's own module and node's built-ins is inside the bundle.
    required = set(re.findall(r"require\(\"([^\"]+)\"\)", source))
    builtins = subprocess.run(
        [str(NODE), "-p", "JSON.stringify(require('module').builtinModules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    node_modules = set(json.loads(builtins.stdout))
    outside = {r for r in required if r != "vscode" and r.removeprefix("node:") not in node_modules}
    assert outside == set(), outside
    loaded = subprocess.run(
        [str(NODE), "-e", LOAD_BUNDLE, str(out)], capture_output=True, text=True, timeout=60
    )
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout) == {"activate": "function", "deactivate": "function"}
    # What `vsce package` would put in the .vsix (229 files before the bundle).
    vsce = VSCODE / "node_modules" / "@vscode" / "vsce" / "vsce"
    listed = subprocess.run(
        [str(NODE), str(vsce), "ls"], cwd=VSCODE, capture_output=True, text=True, timeout=120
    )
    assert listed.returncode == 0, listed.stderr
    files = set(listed.stdout.split())
    assert files == {"package.json", "README.md", "LICENSE", "dist/extension.js"}, files


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_next_edit_rename_and_deletion(
    tmp_path: Path, server_command: str, logic_js: Path
) -> None:
    """`drive-server.mjs --next-edit`: `area` renamed to `surface` at its definition; the
    edit at the use above shows first, the key jumps then applies, the next ones follow
    until every use is renamed; removing `depth` shows the deletion of a call's third
    argument, applied; a stale version gets no edits. No model: symbolic edits need none."""
    assert NODE is not None
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "ws"\nversion = "0"\n')
    (root / "shapes.py").write_text(SHAPES)
    settings = {"modelPath": str(root / "absent.gguf"), "metrics": False, "persist": False}
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.setdefault("LSP_ASSIST_THREADS", "2")
    cmd = [
        NODE,
        str(VSCODE / "test" / "drive-server.mjs"),
        "--file",
        str(root / "shapes.py"),
        "--root",
        str(root),
        "--line",
        "4",
        "--character",
        "4",
        "--server",
        server_command,
        "--settings",
        json.dumps(settings),
        "--logic",
        str(logic_js),
        "--next-edit",
        "--rename-to",
        "surface",
        "--remove-param",
        "depth",
    ]
    proc = subprocess.run(
        cmd, cwd=VSCODE, env=env, capture_output=True, text=True, timeout=200, check=False
    )
    report: dict[str, Any] = json.loads(proc.stdout) if proc.stdout.strip() else {}
    context = json.dumps(report, indent=1)[:8000] + "\n--- stderr ---\n" + proc.stderr[-3000:]
    assert proc.returncode == 0 and report["errors"] == [], context
    assert ACCEPT in report["capabilities"]["executeCommandProvider"]["commands"], context
    ne = report["nextEdit"]
    assert ne["offered"] is True, context

    rename = ne["rename"]
    assert (rename["from"], rename["definition"]) == ("area", "def surface(width, height, depth):")
    steps = rename["steps"]
    where = [(s["edit"]["range"]["start"]["line"], s["edit"]["text"]) for s in steps]
    assert where == [(1, "surface"), (9, "surface"), (12, "surface")], context
    # The first edit is above the cursor (on the definition, line 5): shown with the new
    # name after `area` and the hint, the key jumps there, then applies it.
    first = steps[0]
    assert first["cursorBefore"] == {"line": 4, "character": 11}, context
    assert first["view"] == {
        "range": {"start": {"line": 1, "character": 10}, "end": {"line": 1, "character": 14}},
        "deletion": False,
        "after": "surface",
        "hint": "next edit (Tab)",
    }, context
    assert first["lineBefore"] == "    print(area(2, 3))"
    assert first["lineAfter"] == "    print(surface(2, 3))", context
    for step in steps:
        assert step["keys"] == ["jump", "apply"], context
        args = step["edit"]["command"]["arguments"]
        assert step["edit"]["command"]["command"] == ACCEPT
        assert step["accept"] == {"accepted": True, "id": args[0]}, context
    # Every use renamed, nothing else changed; then the server proposed nothing more.
    assert rename["text"] == SHAPES.replace("area(", "surface("), context

    # A request for the version before the rename's last key, when the current one has
    # three edits: none.
    stale = ne["stale"]
    assert stale["version"] == stale["current"] - 1 and stale["answer"] == {"edits": []}, context

    deletion = ne["deletion"]
    assert deletion["definition"] == "def surface(width, height):", context
    removal = deletion["steps"][0]
    assert removal["edit"]["text"] == "", context
    assert removal["edit"]["range"] == {
        "start": {"line": 9, "character": 27},
        "end": {"line": 9, "character": 30},
    }, context
    assert removal["view"] == {
        "range": removal["edit"]["range"],
        "deletion": True,
        "hint": "next edit: delete (Tab)",
    }, context  # no new text after it (`after` undefined)
    assert removal["keys"] == ["jump", "apply"], context
    assert removal["lineBefore"] == "    return sum(surface(w, h, 1) for w, h in shapes)"
    assert removal["lineAfter"] == "    return sum(surface(w, h) for w, h in shapes)", context
    assert removal["accept"]["accepted"] is True, context
    assert all(step["edit"]["text"] == "" for step in deletion["steps"]), context
    # the accepted deletion leads to the next call that still passes three arguments
    assert len(deletion["steps"]) == 2, context
    assert "print(surface(2, 3))" in deletion["text"] and ", 1)" not in deletion["text"], context

    # The server heard every show and every accept (and the stale request).
    stats = ne["stats"]
    applied = len(steps) + len(deletion["steps"])
    assert stats["mode"] == "symbolic", context
    assert (stats["shown"], stats["accepted"], stats["stale"]) == (
        ne["shownNotifications"],
        applied,
        1,
    ), context
    assert report["serverExit"] == {"code": 0, "signal": None}, context


def test_vscode_next_edit_contributions() -> None:
    """package.json's next-edit commands, keys and setting match what extension.ts does."""
    manifest = json.loads((VSCODE / "package.json").read_text())
    source = (VSCODE / "src" / "extension.ts").read_text()
    contributes = manifest["contributes"]
    for command in contributes["commands"]:
        assert f"registerCommand('{command['command']}'" in source, command
    keys = {(k["command"], k["key"]): k["when"] for k in contributes["keybindings"]}
    for command, key in (
        ("lspAssist.nextEditJumpOrApply", "tab"),
        ("lspAssist.nextEditDismiss", "escape"),
    ):
        when = keys[(command, key)]
        # Set by the extension while one shows; ghost text keeps its own Tab and Escape.
        assert "lspAssist.nextEditVisible" in when and "!inlineSuggestionVisible" in when, when
    assert "'lspAssist.nextEditVisible'" in source and "'setContext'" in source
    setting = contributes["configuration"]["properties"]["lspAssist.nextEdit.enabled"]
    assert setting["type"] == "boolean" and setting["default"] is True
    assert "'nextEdit.enabled'" in source
