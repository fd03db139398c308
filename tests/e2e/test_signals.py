"""SIGTERM and SIGHUP close ``lsp-assist serve``'s session as shutdown and exit do.

An editor that quits may kill its server instead of sending ``shutdown`` and ``exit``
(and a closed terminal sends SIGHUP); the session must still end cleanly: the metrics
log holds the last requests, a suggestion still on screen is written as ``ignored``,
and the process exits 0, also with a completion in flight (its evaluation is aborted).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import demo_with_tail, open_with_small_model, server_env
from tests.support.jsonrpc import SERVE, StdioClient
from tests.support.ports import free_port
from tests.support.raw_server import ServerProcess

EXIT_BOUND_S = 30
"""Generous: the close frees the model and stops the index on 2 busy cores."""


def inline_params(uri: str, line: int, character: int, kind: int) -> dict[str, Any]:
    return {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": kind},
    }


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_closes_the_session_and_exits_0(tmp_path: Path, sig: signal.Signals) -> None:
    workspace, path, line, col = demo_with_tail(tmp_path)
    cache = tmp_path / "cache"
    serve = [*SERVE[:-1], "INFO"]  # the signal's log line
    client = StdioClient(serve, env=server_env())
    try:
        uri = open_with_small_model(client, workspace, cache, path)
        params = inline_params(uri, line, col, kind=2)  # Automatic: one item
        result = client.request("textDocument/inlineCompletion", params, timeout=180)
        [item] = result["items"]
        request_id = item["command"]["arguments"][0]
        client.notify("textDocument/didShowCompletion", {"item": item})  # still on screen
        # Another one in flight (Invoked: alternatives, the longest work), then the signal.
        client.send(
            {
                "jsonrpc": "2.0",
                "id": 999,
                "method": "textDocument/inlineCompletion",
                "params": inline_params(uri, line, col - 1, kind=1),
            }
        )
        time.sleep(0.3)
        sent = time.monotonic()
        client.process.send_signal(sig)
        try:
            code = client.process.wait(timeout=EXIT_BOUND_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running {EXIT_BOUND_S} s after {sig.name}")
        took = time.monotonic() - sent
    finally:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()
    stderr = "".join(client.stderr_lines)
    assert code == 0, f"exit code {code} after {sig.name}:\n{stderr[-3000:]}"
    assert f"{sig.name}: closing the session" in stderr, stderr[-3000:]
    print(f"{sig.name}: exited 0 after {took:.2f} s")

    [log] = list(cache.rglob("metrics.jsonl"))
    records = [json.loads(x) for x in log.read_text().splitlines()]
    ids = [x.get("request_id") for x in records if x.get("event") != "shown"]
    assert request_id in ids, (request_id, ids)  # an automatic answer's item id is its request's
    shown = [x for x in records if x.get("event") == "shown"]
    assert [(x["item"], x["outcome"]) for x in shown] == [(request_id, "ignored")], shown


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_ends_a_tcp_server_and_its_sessions_with_0(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """Over TCP (no model: the protocol only): the open session closes, the process ends 0."""
    port = free_port(socket.AF_INET, "127.0.0.1")
    process = ServerProcess(tmp_path, "--tcp", f"127.0.0.1:{port}")
    try:
        client = process.connect(socket.AF_INET, "127.0.0.1", port)
        client.initialize()
        process.process.send_signal(sig)
        client.wait_closed(timeout=EXIT_BOUND_S)
        assert process.wait(timeout=EXIT_BOUND_S) == 0, process.log()
        assert f"{sig.name}: closing the session" in process.log()
    finally:
        process.close()
