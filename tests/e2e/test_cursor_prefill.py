"""The prompt where the cursor rests is evaluated before the user types (issue 21, part 2).

Over real stdio with the real model (SmolLM2): a stdlib file nobody here wrote is
opened (the didOpen prefill evaluates the prompt at its start), the client reports the
cursor far down the file with ``lspAssist/didMoveCursor``, and the first request there
finds the whole stable prefix evaluated; a request at another place nobody reported
finds only the prompt's head, as every first request did before.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import open_with_small_model, server_env
from tests.support.jsonrpc import SERVE, StdioClient
from tests.support.workspace import copy_demo

pytestmark = pytest.mark.slow

SOURCE = Path(asyncio.__file__).with_name("queues.py")


def wait_prefill(client: StdioClient, **expected: Any) -> dict[str, Any]:
    """Poll the status until its ``last_prefill`` has the expected fields; return it."""
    deadline = time.monotonic() + 120
    record: dict[str, Any] = {}
    while time.monotonic() < deadline:
        record = client.command("lspAssist.status").get("last_prefill") or {}
        if record and all(record.get(key) == value for key, value in expected.items()):
            return record
        time.sleep(0.1)
    raise AssertionError(f"no prefill with {expected}; the last: {record}")


def invoke(client: StdioClient, uri: str, line: int, character: int) -> dict[str, Any]:
    """An explicit request at a position; return the status's record of it."""
    params = {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": 1},
    }
    client.request("textDocument/inlineCompletion", params, timeout=180)
    last: dict[str, Any] = client.command("lspAssist.status")["last"]
    return last


def test_the_first_request_where_the_cursor_rests_reuses_its_prefill(tmp_path: Path) -> None:
    workspace = copy_demo(tmp_path)
    path = workspace / "queues.py"
    text = SOURCE.read_text()
    path.write_text(text)
    lines = text.split("\n")
    # two places far from the file's start and from each other: the ends of the first
    # lines of code after 40 % and after 80 % of the file
    rested, elsewhere = (
        next(i for i in range(len(lines) * share // 10, len(lines)) if lines[i].strip())
        for share in (4, 8)
    )
    client = StdioClient(SERVE, env=server_env())
    try:
        uri = open_with_small_model(client, workspace, tmp_path / "cache", path)
        wait_prefill(client, uri=uri, reason="open", line=0)

        position = {"line": rested, "character": len(lines[rested])}
        client.notify(
            "lspAssist/didMoveCursor",
            {"textDocument": {"uri": uri, "version": 1}, "position": position},
        )
        prefill = wait_prefill(client, uri=uri, reason="cursor", line=rested)
        # the prompt there shares little with the one at the file's start
        assert prefill["evaluated"] > prefill["prompt_tokens"] // 2, prefill
        first = invoke(client, uri, rested, len(lines[rested]))
        assert first["reused_tokens"] == prefill["prompt_tokens"], (first, prefill)

        # a report for another version of the buffer is ignored
        stale = {"line": elsewhere, "character": 0}
        client.notify(
            "lspAssist/didMoveCursor",
            {"textDocument": {"uri": uri, "version": 7}, "position": stale},
        )
        cold = invoke(client, uri, elsewhere, len(lines[elsewhere]))
        assert client.command("lspAssist.status")["last_prefill"]["line"] == rested
        assert cold["reused_tokens"] < cold["prompt_tokens"] // 2, cold
    finally:
        client.close()
