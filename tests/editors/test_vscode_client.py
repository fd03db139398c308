"""The VS Code extension's protocol side: editors/vscode/test/drive-server.mjs.

VS Code itself cannot run here, so the test drives the server with the libraries
vscode-languageclient 11 is built on (vscode-jsonrpc, vscode-languageserver-protocol)
in plain node: initialize with the inlineCompletion client capability, didOpen,
textDocument/inlineCompletion, textDocument/completion, the three lspAssist commands.
The script exits non-zero on any protocol error.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import CURSOR_LINE, EDITORS, MAIN, SETTINGS

pytestmark = [pytest.mark.editor, pytest.mark.slow]

NODE = shutil.which("node")
VSCODE = EDITORS / "vscode"
HAVE_MODULES = (VSCODE / "node_modules" / "vscode-languageserver-protocol").is_dir()


def drive(workspace: Path, server: str, env: dict[str, str]) -> tuple[int, dict[str, Any], str]:
    assert NODE is not None
    last_line = MAIN.splitlines()[CURSOR_LINE - 1]
    cmd = [
        NODE,
        str(VSCODE / "test" / "drive-server.mjs"),
        "--file",
        str(workspace / "main.py"),
        "--root",
        str(workspace),
        "--line",
        str(CURSOR_LINE - 1),
        "--character",
        str(len(last_line)),
        "--server",
        server,
        "--settings",
        json.dumps(SETTINGS),
        "--timeout-ms",
        "120000",
        # What the extension sends when a setting changes (workspace/didChangeConfiguration).
        "--retries",
        "10",
        "--change-settings",
        json.dumps({"lspAssist": {"maxTokens": 10}}),
    ]
    proc = subprocess.run(
        cmd, cwd=VSCODE, env=env, capture_output=True, text=True, timeout=200, check=False
    )
    try:
        report: dict[str, Any] = json.loads(proc.stdout)
    except json.JSONDecodeError:
        pytest.fail(
            f"drive-server.mjs printed no JSON (rc {proc.returncode}):\n"
            f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
        )
    return proc.returncode, report, proc.stderr


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_protocol_client(
    workspace: Path, server_command: str, server_env: dict[str, str]
) -> None:
    rc, report, stderr = drive(workspace, server_command, server_env)
    context = json.dumps(report, indent=1)[:4000] + "\n--- stderr ---\n" + stderr[-3000:]
    assert rc == 0, context
    assert report["errors"] == [], context

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
    for item in items:
        assert "textEdit" in item and item["command"]["command"] == "lspAssist.accept"

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


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code extension needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_extension_compiles() -> None:
    """The extension type-checks against vscode-languageclient 11 and @types/vscode."""
    tsc = VSCODE / "node_modules" / "typescript" / "bin" / "tsc"
    proc = subprocess.run(
        [str(NODE), str(tsc), "-p", ".", "--noEmit"],
        cwd=VSCODE,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
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
    client_only = {"serverPath", "serverArgs", "completionItems", "extraSettings"}
    for name, schema in settings.items():
        key = name.removeprefix("lspAssist.")
        if key in client_only:
            continue
        assert key in SETTING_KEYS, f"{name} is not a server setting"
        section, field = SETTING_KEYS[key]
        assert schema["default"] == getattr(getattr(defaults, section), field), name
        if "enum" in schema:
            assert schema["default"] in schema["enum"]
