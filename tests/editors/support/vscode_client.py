"""The VS Code extension's client side in plain node: its driver and its compiled logic.

editors/vscode/test/drive-server.mjs drives the server with the libraries
vscode-languageclient is built on (``drive_command``, ``drive``: its exit code, its JSON
report, its stderr); ``compile_logic`` compiles src/logic.ts alone for it (the
``logic_js`` fixture of conftest.py). ``NODE`` and ``HAVE_MODULES`` say whether node and
the extension's node_modules are there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .project import CURSOR_LINE, EDITORS, MAIN, SETTINGS

NODE = shutil.which("node")
VSCODE = EDITORS / "vscode"
HAVE_MODULES = (VSCODE / "node_modules" / "vscode-languageserver-protocol").is_dir()


def compile_logic(out_dir: Path) -> Path:
    """src/logic.ts compiled alone by esbuild into ``out_dir`` (50 ms; tsc takes seconds)."""
    out = out_dir / "logic.js"
    esbuild = VSCODE / "node_modules" / "esbuild" / "bin" / "esbuild"
    proc = subprocess.run(
        [str(esbuild), "src/logic.ts", "--format=cjs", "--platform=node", f"--outfile={out}"],
        cwd=VSCODE,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return out


def drive_command(
    workspace: Path, server: str, settings: dict[str, Any], logic: Path, *extra: str
) -> list[str]:
    """drive-server.mjs at the end of main.py's CURSOR_LINE, polling status until ready."""
    assert NODE is not None
    last_line = MAIN.splitlines()[CURSOR_LINE - 1]
    return [
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
        json.dumps(settings),
        "--timeout-ms",
        "120000",
        # The status bar's loop: lspAssist.status from `initialized` until ready or error
        # (the answers are empty while the model loads).
        "--status-poll-ms",
        "100",
        "--logic",
        str(logic),
        *extra,
    ]


def drive(
    workspace: Path,
    server: str,
    env: dict[str, str],
    logic: Path,
    settings: dict[str, Any] | None = None,
    retries: int = 10,
    extra: tuple[str, ...] | None = None,
) -> tuple[int, dict[str, Any], str]:
    """Run drive-server.mjs against the server; return its exit code, JSON report, stderr.

    ``extra``: its other arguments (default: a settings change, what the extension sends
    when a setting changes: workspace/didChangeConfiguration)."""
    if extra is None:
        extra = ("--change-settings", json.dumps({"lspAssist": {"maxTokens": 10}}))
    cmd = drive_command(
        workspace,
        server,
        SETTINGS if settings is None else settings,
        logic,
        "--retries",
        str(retries),
        *extra,
    )
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
