"""Acceptance per shown suggestion over real stdio, with the real model (SmolLM2).

The raw client sends what Copilot's clients send: ``textDocument/didShowCompletion``
with the item as the server answered it, ``textDocument/didPartiallyAcceptCompletion``
with the accepted length, the item's accept command; and lsp-assist's
``lspAssist/didDismissCompletion`` with ``{item: {command}}`` (copilot.el's shape). The
metrics log then holds one ``shown`` line per suggestion with its outcome, and
``lsp-assist stats`` reports them by trigger and model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.models import small_model_path
from tests.e2e.conftest import demo_with_tail, open_with_small_model, server_env, shown_stats
from tests.support.jsonrpc import SERVE, StdioClient

pytestmark = pytest.mark.slow


def inline(client: StdioClient, uri: str, line: int, character: int, kind: int) -> list[Any]:
    params = {
        "textDocument": {"uri": uri},
        "position": {"line": line, "character": character},
        "context": {"triggerKind": kind},
    }
    result = client.request("textDocument/inlineCompletion", params, timeout=180)
    return list(result["items"])


def insert(client: StdioClient, uri: str, version: int, line: int, col: int, text: str) -> None:
    at = {"line": line, "character": col}
    client.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": at, "end": at}, "text": text}],
        },
    )


def test_shown_partly_accepted_dismissed_superseded_and_accepted(tmp_path: Path) -> None:
    workspace, path, line, col = demo_with_tail(tmp_path)
    cache = tmp_path / "cache"
    client = StdioClient(SERVE, env=server_env())
    try:
        uri = open_with_small_model(client, workspace, cache, path)

        items = inline(client, uri, line, col, kind=1)  # Invoked: alternatives
        assert len(items) >= 2, items
        ids = [item["command"]["arguments"][0] for item in items]
        assert ids[1] == f"{ids[0]}.1" and len(set(ids)) == len(ids), ids
        first, second = items[0], items[1]
        client.notify("textDocument/didShowCompletion", {"item": first})
        client.notify("textDocument/didShowCompletion", {"item": second})  # cycled to it
        part = second["insertText"][:2]
        insert(client, uri, 2, line, col, part)
        client.notify(
            "textDocument/didPartiallyAcceptCompletion", {"item": second, "acceptedLength": 2}
        )
        client.notify("lspAssist/didDismissCompletion", {"item": {"command": second["command"]}})

        [auto] = inline(client, uri, line, col + 2, kind=2)  # Automatic
        client.notify("textDocument/didShowCompletion", {"item": auto})
        accepted = client.command("lspAssist.accept", *auto["command"]["arguments"])
        assert accepted == {"accepted": True, "request_id": auto["command"]["arguments"][0]}
        # an alternative's id names its request: the accept event joins onto it
        assert client.command("lspAssist.accept", ids[1])["request_id"] == ids[0]
    finally:
        assert client.close() == 0, "".join(client.stderr_lines[-20:])

    [log] = list(cache.rglob("metrics.jsonl"))
    lines = [json.loads(x) for x in log.read_text().splitlines()]
    shown = [x for x in lines if x.get("event") == "shown"]
    got = [(x["item"], x["outcome"], x["trigger"], x["accepted_chars"]) for x in shown]
    assert got == [
        (ids[0], "superseded", "explicit", 0),
        (ids[1], "dismissed", "explicit", 2),
        (auto["command"]["arguments"][0], "accepted", "automatic", len(auto["insertText"])),
    ], got
    assert {x["model"] for x in shown} == {small_model_path().name}
    assert all("insertText" not in x and "text" not in x for x in shown), "no code in the log"

    stats = shown_stats(log)
    assert stats["shown"] == 3
    assert stats["acceptance"] == round(1 / 3, 4)
    assert stats["partial_acceptance"] == round(1 / 3, 4)
    assert stats["by_trigger"]["automatic"]["acceptance"] == 1.0
    assert stats["by_trigger"]["explicit"]["dismissed"] == 0.5
    assert list(stats["by_model"]) == [small_model_path().name]
