"""Emacs 28 + eglot 1.9 (batch) with editors/emacs/lsp-assist.el against the real server.

emacs_driver.el registers lsp-assist with eglot, opens main.py, calls `eglot` directly,
then asks for completions through eglot's completion-at-point (wrapped by lsp-assist)
and through `lsp-assist-complete` (the textDocument/completion fallback: insert the
item's textEdit, report lspAssist.accept), runs explain and status, and writes JSON.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import CURSOR_LINE, EDITORS, REPO, SETTINGS

pytestmark = [pytest.mark.editor, pytest.mark.slow]

EMACS = shutil.which("emacs")


def eglot_available() -> bool:
    if EMACS is None:
        return False
    proc = subprocess.run(
        [EMACS, "--batch", "--eval", "(require 'eglot)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode == 0


HAVE_EGLOT = eglot_available()
SKIP_REASON = (
    "emacs not found (apt-get install emacs-nox elpa-eglot)"
    if EMACS is None
    else "eglot not loadable in emacs --batch (apt-get install elpa-eglot)"
)


def run_emacs(
    workspace: Path, server: str, env: dict[str, str], out: Path, typed: str
) -> dict[str, Any]:
    assert EMACS is not None
    env = dict(env)
    env.update(
        LSP_ASSIST_TEST_PLUGIN=str(EDITORS / "emacs"),
        LSP_ASSIST_TEST_SERVER=server,
        LSP_ASSIST_TEST_FILE=str(workspace / "main.py"),
        LSP_ASSIST_TEST_LINE=str(CURSOR_LINE),
        LSP_ASSIST_TEST_TYPE=typed,
        LSP_ASSIST_TEST_SETTINGS=json.dumps(SETTINGS),
        LSP_ASSIST_TEST_OUT=str(out),
        LSP_ASSIST_TEST_TIMEOUT_S="120",
    )
    cmd = [EMACS, "--batch", "-l", str(REPO / "tests/editors/emacs_driver.el")]
    proc = subprocess.run(
        cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=200, check=False
    )
    assert out.exists(), (
        f"emacs wrote no report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    report: dict[str, Any] = json.loads(out.read_text())
    return report


@pytest.mark.skipif(not HAVE_EGLOT, reason=SKIP_REASON)
def test_eglot_connects_and_completes(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_emacs(workspace, server_command, server_env, tmp_path / "emacs.json", "1, ")
    context = json.dumps(report, indent=1)[:4000]

    assert report["errors"] == [], context
    assert report["registered"] and report["major_mode"] == "python-mode", context
    # eglot connected and received the server's capabilities.
    assert report["connected"] and report["managed"], context
    caps = report["capabilities"]
    assert "completionProvider" in caps, context
    assert "inlineCompletionProvider" in caps, context
    assert "lspAssist.accept" in caps["executeCommandProvider"]["commands"]
    assert "lspAssist.explainContext" in caps["executeCommandProvider"]["commands"]
    assert caps["textDocumentSync"]["change"] == 2  # incremental
    assert report["lsp_assist_server"] and report["capf_installed"], context

    # completion-at-point went through eglot and answered (a list of proxies).
    assert report["capf_returned"], context
    assert isinstance(report["capf_candidates"], list)

    # The raw textDocument/completion through eglot's connection: a CompletionList.
    response = report["completion_response"]
    assert isinstance(response, dict), context
    assert isinstance(response.get("items", []), list), context
    for item in response.get("items", []):
        assert item["label"]
        edit = item["textEdit"]
        assert edit["range"]["start"]["line"] == CURSOR_LINE - 1
        assert item["command"]["command"] == "lspAssist.accept"

    # When there was a suggestion, lsp-assist-complete inserted it and the server
    # counted the acceptance.
    if report.get("inserted"):
        # eglot's completion-at-point listed the same suggestion (its label).
        assert any(c.startswith("✨") for c in report["capf_candidates"]), context
        # lsp-assist-preview-mode showed it as an overlay after point.
        assert report["preview_text"], context
        assert report["inserted"] in report["buffer_after"]
        assert report["accept_command"]["command"] == "lspAssist.accept"
        assert report["accept_response"]["accepted"] is True, context

    # The explain and status commands answered through workspace/executeCommand.
    assert isinstance(report["explain_text"], str) and report["explain_text"], context
    assert not report["explain_text"].startswith("error:"), context
    assert report["status"]["initialized"] is True, context
