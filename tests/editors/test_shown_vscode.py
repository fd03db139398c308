"""Acceptance per shown suggestion from the VS Code extension's side, through its driver.

Without VS Code (test_vscode_real.py has it): ``drive-server.mjs --telemetry`` sends, against the
real server with SmolLM2, the notifications the extension sends (their params built by
the compiled src/logic.ts): the second item shown and dismissed, the first shown, its
first word partly accepted, then its accept command. The metrics log then holds a
``shown`` line per suggestion, and ``lsp-assist stats`` reports them.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from .support.metrics import in_order, shown_lines
from .support.vscode_client import HAVE_MODULES, NODE, drive

pytestmark = [pytest.mark.editor, pytest.mark.slow]


@pytest.mark.skipif(NODE is None, reason="node not found (the VS Code client test needs node 20)")
@pytest.mark.skipif(
    not HAVE_MODULES, reason="editors/vscode/node_modules missing: run `npm ci` in editors/vscode"
)
def test_vscode_driver_reports_shown_dismissed_partly_accepted_accepted(
    workspace: Path, server_command: str, server_env: dict[str, str], logic_js: Path
) -> None:
    rc, report, stderr = drive(
        workspace, server_command, server_env, logic_js, extra=("--telemetry",)
    )
    assert rc == 0, (report.get("errors"), stderr[-3000:])
    items = report["inlineItems"]
    assert len(items) >= 2, "an Invoked request here gets alternatives"
    sent = [
        (t["method"], t["params"]["item"]["command"]["arguments"][0]) for t in report["telemetry"]
    ]
    first, second = (item["command"]["arguments"][0] for item in items[:2])
    assert sent[:3] == [
        ("textDocument/didShowCompletion", second),
        ("lspAssist/didDismissCompletion", second),
        ("textDocument/didShowCompletion", first),
    ], sent
    partial = [t for t in report["telemetry"] if t["method"].endswith("PartiallyAcceptCompletion")]

    shown = shown_lines(Path(server_env["XDG_CACHE_HOME"]))
    dismissed, accepted = in_order(shown, ("dismissed", "explicit"), ("accepted", "explicit"))
    assert dismissed["item"] == second and accepted["item"] == first, shown
    assert accepted["accepted_chars"] == len(items[0]["insertText"].encode("utf-16-le")) // 2
    assert partial or accepted["accepted_chars"] <= 2, "a one-word suggestion has no partial"

    stats = subprocess.run(
        [server_command, "stats"], env=server_env, capture_output=True, text=True, timeout=60
    )
    assert stats.returncode == 0, stats.stderr
    print(stats.stdout)  # the replay's figures (pytest -s shows them)
    figures = json.loads(
        subprocess.run(
            [server_command, "stats", "--json"], env=server_env, capture_output=True, text=True
        ).stdout
    )["shown"]
    assert figures["shown"] == 2 and figures["acceptance"] == 0.5 and figures["dismissed"] == 0.5
