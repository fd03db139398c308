"""One LSP feature per module; ``register_all`` wires them onto a server."""

from __future__ import annotations

from lsp_assist.lsp.features import (
    commands,
    completion,
    cursor,
    documents,
    inline_completion,
    lifecycle,
    next_edit,
    shown,
)
from lsp_assist.lsp.server import LspAssistServer


def register_all(server: LspAssistServer) -> None:
    """Register every feature module's handlers on ``server``."""
    for module in (
        lifecycle,
        documents,
        inline_completion,
        completion,
        commands,
        cursor,
        next_edit,
        shown,
    ):
        module.register(server)
