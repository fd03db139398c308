"""Commands answer misuse with a JSON-RPC error (InvalidParams), never a result ``{"error"}``.

The registered ``workspace/executeCommand`` handlers are called in process, as pygls
calls them, on a server set up for a workspace without a model; the same answers go
over real stdio in tests/e2e/test_command_errors.py.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from lsp_assist.config import Settings
from lsp_assist.lsp.server import LspAssistServer, create_server

MISUSE: list[tuple[str, list[Any]]] = [
    ("lspAssist.explainContext", []),
    ("lspAssist.explainContext", ["file:///open.py"]),
    ("lspAssist.explainContext", ["file:///open.py", "three", 0]),
    ("lspAssist.explainContext", ["file:///nowhere/missing.py", 0, 0]),
    ("lspAssist.documentState", []),
    ("lspAssist.documentState", ["file:///nowhere/not-open.py"]),
    ("lspAssist.accept", []),
    ("lspAssist.memory", ["many"]),
    ("lspAssist.memory", [-1]),
]
"""Commands with missing arguments, arguments of the wrong type, or naming nothing."""


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LspAssistServer]:
    """A server set up on an empty workspace whose model file does not exist."""
    server = create_server(Settings())
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(),
        root_uri=tmp_path.as_uri(),
        initialization_options={
            "metrics": False,
            "persist": False,
            "watch": False,
            "modelPath": str(tmp_path / "no-model.gguf"),
            "cacheDir": str(tmp_path / "cache"),
        },
    )
    server.setup(params)
    try:
        yield server
    finally:
        server.shutdown_engine()


async def run_command(server: LspAssistServer, name: str, args: list[Any]) -> Any:
    """Call a registered command as pygls does for ``workspace/executeCommand``."""
    answer = server.protocol.fm.commands[name](*args)
    return await answer if inspect.isawaitable(answer) else answer


@pytest.mark.parametrize(("name", "args"), MISUSE, ids=[f"{n}{a}" for n, a in MISUSE])
async def test_misuse_is_invalid_params(
    server: LspAssistServer, name: str, args: list[Any]
) -> None:
    with pytest.raises(JsonRpcInvalidParams) as raised:
        answer = await run_command(server, name, args)
        pytest.fail(f"{name}{args} answered {answer!r} instead of an error")
    assert raised.value.code == -32602
    assert raised.value.message, "the error says what was wrong"


async def test_commands_used_rightly_still_answer(server: LspAssistServer) -> None:
    status = await run_command(server, "lspAssist.status", [])
    assert status["initialized"] is True and "error" not in status
    stats = await run_command(server, "lspAssist.nextEditStats", [])
    assert "error" not in stats
    accepted = await run_command(server, "lspAssist.accept", ["unknown-item"])
    assert accepted == {"accepted": False, "request_id": "unknown-item"}
    memory = await run_command(server, "lspAssist.memory", [])
    assert memory["documents"] == 0 and memory["over"] == [] and "error" not in memory
    assert {s["name"] for s in memory["structures"]} >= {"buffers.recent", "shown.offered"}
