"""What users keep, over real stdio with the real model (SmolLM2).

The raw client does what an editor does when the user takes a suggestion: it shows the
item (``didShowCompletion``), puts its text in (``didChange``) and runs the item's
command. Then the user deletes two of its characters and adds a line above it (the span
moves). With ``LSP_ASSIST_RETAIN_AFTER_S=1`` the server's timer measures a second after
the accept, without the test sleeping 30 s: the metrics log gets a ``retained`` line
with the accepted characters less the two deleted, and ``lsp-assist stats`` reports
them; the session's end writes the keys (the two edits after the accept, with nothing
shown after them: quiet).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.telemetry.retention import RETAIN_AFTER_ENV
from tests.e2e.conftest import demo_with_tail, open_with_small_model, server_env, shown_stats
from tests.support.jsonrpc import SERVE, StdioClient, replace_range

pytestmark = pytest.mark.slow


def utf16(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def position_in(text: str, index: int, line: int, col: int) -> tuple[int, int]:
    """The LSP position of ``text[index]`` when ``text`` starts at (line, col)."""
    head = text[:index]
    if "\n" not in head:
        return line, col + utf16(head)
    return line + head.count("\n"), utf16(head.rsplit("\n", 1)[1])


def retained_lines(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    lines = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    return [x for x in lines if x.get("event") == "retained"]


def test_accepted_then_partly_edited_is_partly_retained(tmp_path: Path) -> None:
    workspace, path, line, col = demo_with_tail(tmp_path)
    cache = tmp_path / "cache"
    client = StdioClient(SERVE, env=server_env(**{RETAIN_AFTER_ENV: "1"}))
    try:
        uri = open_with_small_model(client, workspace, cache, path)
        params = {
            "textDocument": {"uri": uri},
            "position": {"line": line, "character": col},
            "context": {"triggerKind": 1},
        }
        items = client.request("textDocument/inlineCompletion", params, timeout=180)["items"]
        item = next((i for i in items if len(i["insertText"].replace("\n", "")) >= 3), None)
        assert item is not None, items
        suggestion = item["insertText"]
        client.notify("textDocument/didShowCompletion", {"item": item})
        replace_range(client, uri, 2, (line, col), (line, col), suggestion)  # the editor puts it in
        name = item["command"]["arguments"][0]
        assert client.command("lspAssist.accept", name)["accepted"] is True
        accepted_at = time.monotonic()
        # the user deletes two of its characters (two on one line) ...
        cut = next(i for i in range(len(suggestion) - 1) if "\n" not in suggestion[i : i + 2])
        replace_range(
            client,
            uri,
            3,
            position_in(suggestion, cut, line, col),
            position_in(suggestion, cut + 2, line, col),
            "",
        )
        # ... and adds a line above it: the span moves down
        replace_range(client, uri, 4, (0, 0), (0, 0), "# a new first line\n")
        state = client.command("lspAssist.documentState", uri)
        assert suggestion[:cut] + suggestion[cut + 2 :] in state["text"]

        [log] = list(cache.rglob("metrics.jsonl"))
        deadline = time.monotonic() + 30
        while not retained_lines(log):  # the server's timer, a second after the accept
            assert time.monotonic() < deadline, "no retention measured"
            time.sleep(0.1)
        assert time.monotonic() - accepted_at >= 0.9, "measured before RETAIN_AFTER_S"
    finally:
        assert client.close() == 0, "".join(client.stderr_lines[-20:])

    lines = [json.loads(x) for x in log.read_text().splitlines()]
    [shown] = [x for x in lines if x.get("event") == "shown"]
    assert (shown["item"], shown["outcome"]) == (name, "accepted")
    [retained] = retained_lines(log)
    assert retained["item"] == name and retained["measured"] == "on_time"
    assert retained["accepted_chars"] == utf16(suggestion) == shown["accepted_chars"]
    assert retained["retained_chars"] == utf16(suggestion) - utf16(suggestion[cut : cut + 2])
    assert 0.9 <= retained["after_s"] < 20
    assert set(retained) >= {"trigger", "model"} and "text" not in retained, "no code"
    [keys] = [x for x in lines if x.get("event") == "keys"]
    # the accept's own change is not a key; the two edits after it showed nothing
    assert (keys["keys"], keys["quiet"]) == (2, 2)

    stats = shown_stats(log)
    assert stats["accepted_chars"] == utf16(suggestion)
    assert stats["retained_chars"] == retained["retained_chars"]
    assert stats["retained_share"] == round(retained["retained_chars"] / utf16(suggestion), 4)
    assert stats["quiet_rate"] == 1.0
    table = subprocess.run(
        [sys.executable, "-m", "lsp_assist.cli.main", "stats", "--metrics", str(log)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    print(table)
    assert "chars retained (30 s)" in table and "quiet keys" in table
