"""Notifications leave nothing behind in the protocol (issue 11, the soak's leak).

pygls 2.1 files the future of every notification handled by a generator (all its
built-ins: didOpen, didChange, didClose, $/setTrace ...) in ``_request_futures`` under
a fresh uuid, and only a response pops an entry there: one future per keystroke, never
freed. The server's protocol drops each once it is done.
"""

from __future__ import annotations

from lsp_assist.lsp.server import create_server


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
