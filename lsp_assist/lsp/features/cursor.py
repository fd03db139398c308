"""lspAssist/didMoveCursor: the prompt where the cursor rests is evaluated before the user types.

``{textDocument: {uri, version?}, position}`` (the negotiated position encoding), sent
by lsp-assist's own clients when the cursor comes to rest on a new place: a file
opened or entered, a jump, a search (after ~300 ms without moving; not while typing,
whose requests do it). The server evaluates the stable prompt prefix at that position
on the model thread, as it does for the file's start at didOpen, so the first request
there reuses it instead of evaluating a cold prompt (~400 tokens, 2 s on two cores with
Qwen2.5-Coder-0.5B). A newer report cancels an older prefill; any completion cancels
one (the scheduler's table, ``SUPERSEDES``). A stale version, a closed file or no
model: ignored (``Service.cursor_rested``).
"""

from __future__ import annotations

from typing import Any

from lsp_assist.lsp.params import field_of
from lsp_assist.lsp.server import LspAssistServer

DID_MOVE_CURSOR = "lspAssist/didMoveCursor"


def register(server: LspAssistServer) -> None:
    """Register the cursor notification."""

    @server.feature(DID_MOVE_CURSOR)
    def did_move_cursor(ls: LspAssistServer, params: Any) -> None:
        document, position = field_of(params, "textDocument"), field_of(params, "position")
        uri, version = field_of(document, "uri"), field_of(document, "version")
        line, character = field_of(position, "line"), field_of(position, "character")
        if not (isinstance(uri, str) and isinstance(line, int) and isinstance(character, int)):
            return
        version = version if isinstance(version, int) else None
        ls.service.cursor_rested(uri, version, line, character, ls.encoding)
