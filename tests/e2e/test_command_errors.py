"""Commands misused over real stdio: a JSON-RPC error InvalidParams (-32602), not a result.

A ``lsp-assist serve`` subprocess on a small workspace, told to load a model file that
does not exist (it starts in a second and serves the protocol without completions):
each command asked with missing arguments, arguments of the wrong type, or a document
that is neither open nor on disk gets an error response with code -32602 and a message;
the same server still answers the commands used rightly.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SERVER, server_env
from tests.support.jsonrpc import JsonRpcError, StdioClient

INVALID_PARAMS = -32602


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[StdioClient, Path]]:
    """A server without a model on a workspace holding ``open.py``, which is open."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    path = workspace / "open.py"
    path.write_text("def f():\n    return 1\n")
    client = StdioClient(SERVER, env=server_env())
    options = {
        "modelPath": str(tmp_path / "no-model.gguf"),
        "metrics": False,
        "cacheDir": str(tmp_path / "cache"),
    }
    client.initialize(workspace, options)
    document = {
        "uri": path.as_uri(),
        "languageId": "python",
        "version": 1,
        "text": path.read_text(),
    }
    client.notify("textDocument/didOpen", {"textDocument": document})
    try:
        yield client, path
    finally:
        client.close()


def misuse(path: Path) -> list[tuple[str, list[Any]]]:
    """Commands with arguments missing, of the wrong type, or naming nothing."""
    uri = path.as_uri()
    missing = (path.parent / "missing.py").as_uri()
    return [
        ("lspAssist.explainContext", []),
        ("lspAssist.explainContext", [uri]),
        ("lspAssist.explainContext", [uri, "three", 0]),
        ("lspAssist.explainContext", [missing, 0, 0]),
        ("lspAssist.documentState", []),
        ("lspAssist.documentState", [missing]),
        ("lspAssist.accept", []),
    ]


def test_misused_commands_get_invalid_params(client: tuple[StdioClient, Path]) -> None:
    server, path = client
    for name, args in misuse(path):
        with pytest.raises(JsonRpcError) as raised:
            answer = server.command(name, *args)
            pytest.fail(f"{name}{args} answered {answer!r} instead of an error")
        assert raised.value.code == INVALID_PARAMS, f"{name}{args}: {raised.value}"
    # the session goes on: commands used rightly are answered
    state = server.command("lspAssist.documentState", path.as_uri())
    assert state["version"] == 1 and state["text"] == path.read_text()
    assert server.command("lspAssist.status")["initialized"] is True
