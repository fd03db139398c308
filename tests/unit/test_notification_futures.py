"""Notifications leave nothing behind in the protocol (issue 11, the soak's leak).

pygls 2.1 files the future of every notification handled by a generator (all its
built-ins: didOpen, didChange, didClose, $/setTrace ...) in ``_request_futures`` under
a fresh uuid, and only a response pops an entry there: one future per keystroke, never
freed. The server's protocol drops each once it is done.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lsp_assist.lsp.server import LspAssistServer, create_server


def test_notifications_do_not_accumulate_futures() -> None:
    server = create_server()
    protocol = server.protocol
    protocol.initialize_seen = True  # type: ignore[attr-defined]
    for _ in range(50):
        message = protocol.structure_message(
            {"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}}
        )
        protocol.handle_message(message)
    assert server.protocol.trace == "off"  # type: ignore[attr-defined]
    assert len(protocol._request_futures) == 0, "a future kept per notification"


async def test_an_async_command_leaves_no_future_behind() -> None:
    """``workspace/executeCommand`` is a generator: its step that runs an ``async`` command
    (``lspAssist.explainContext``) was filed under a fresh uuid and kept with its result
    (issue 47: one per explain in the long day)."""
    server = create_server()
    protocol = server.protocol
    protocol.initialize_seen = True  # type: ignore[attr-defined]
    sent: list[Any] = []
    protocol._send_data = sent.append  # type: ignore[method-assign]
    answered = asyncio.Event()

    @server.command("test.asyncCommand")
    async def command(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        answered.set()
        return {"big": "x" * 10_000}

    for request_id in range(1, 21):
        message = protocol.structure_message(
            {
                "jsonrpc": "2.0",
                "id": request_id,
                "method": "workspace/executeCommand",
                "params": {"command": "test.asyncCommand", "arguments": []},
            }
        )
        protocol.handle_message(message)
    for _ in range(100):  # the steps and their callbacks run on the loop
        await asyncio.sleep(0)
    assert answered.is_set() and len(sent) == 20, sent[:1]
    assert len(protocol._request_futures) == 0, "a future kept per async command"
