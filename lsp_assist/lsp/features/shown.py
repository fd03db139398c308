"""Copilot's inline-completion telemetry notifications, and lsp-assist's dismiss.

``textDocument/didShowCompletion`` ``{item}`` and
``textDocument/didPartiallyAcceptCompletion`` ``{item, acceptedLength}`` (UTF-16 units
from the start of the item's text to the end of what was accepted), as
copilot-language-server defines them: ``item`` is the item as the server sent it, of
which only ``command.arguments[0]``, the item's id, is read (copilot.el sends
``{command}`` alone). ``lspAssist/didDismissCompletion`` ``{item}`` is lsp-assist's own:
the user dismissed it. Each tells the serving object, whose shown-suggestion tracker
(``telemetry.ShownSuggestions``) counts it; an accept (partial here, whole in
commands.py) also sets the timer that measures, ``RETAIN_AFTER_S`` later, how much of
it is still there.
"""

from __future__ import annotations

from typing import Any

from lsp_assist.lsp.params import field_of
from lsp_assist.lsp.server import LspAssistServer

DID_SHOW = "textDocument/didShowCompletion"
DID_PARTIALLY_ACCEPT = "textDocument/didPartiallyAcceptCompletion"
DID_DISMISS = "lspAssist/didDismissCompletion"


def item_of(params: Any) -> str:
    """The item id a notification names (``item.command.arguments[0]``), '' if none."""
    arguments = field_of(field_of(field_of(params, "item"), "command"), "arguments")
    if isinstance(arguments, list | tuple) and arguments and isinstance(arguments[0], str):
        return arguments[0]
    return ""


def register(server: LspAssistServer) -> None:
    """Register the show, partial-accept and dismiss notifications."""

    @server.feature(DID_SHOW)
    def did_show(ls: LspAssistServer, params: Any) -> None:
        if item := item_of(params):
            ls.service.shown(item)

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(ls: LspAssistServer, params: Any) -> None:
        length = field_of(params, "acceptedLength")
        if isinstance(length, int) and not isinstance(length, bool) and (item := item_of(params)):
            ls.service.partially_accepted(item, length)

    @server.feature(DID_DISMISS)
    def did_dismiss(ls: LspAssistServer, params: Any) -> None:
        if item := item_of(params):
            ls.service.dismissed(item)
