"""Copilot's inline-completion telemetry notifications, and lsp-assist's dismiss.

``textDocument/didShowCompletion`` ``{item}`` and
``textDocument/didPartiallyAcceptCompletion`` ``{item, acceptedLength}`` (UTF-16 units
from the start of the item's text to the end of what was accepted), as
copilot-language-server defines them: ``item`` is the item as the server sent it, of
which only ``command.arguments[0]``, the item's id, is read (copilot.el sends
``{command}`` alone). ``lspAssist/didDismissCompletion`` ``{item}`` is lsp-assist's own:
the user dismissed it. Each calls the session's shown-suggestion tracker
(``telemetry.ShownSuggestions``). An accept (partial here, whole in commands.py) sets
the timer that measures, ``RETAIN_AFTER_S`` later, how much of it is still there
(:func:`measure_later`).
"""

from __future__ import annotations

import asyncio
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


def measure_later(ls: LspAssistServer) -> None:
    """Measure the retention of accepted text when the next measurement is due (a timer
    on the event loop, where the documents change: the spans and the text agree)."""
    session = ls.session
    delay = session.shown.next_due() if session is not None else None
    if delay is None:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not on the event loop: close() measures what is left
        return
    loop.call_later(delay + 0.01, _measure_due, ls)


def _measure_due(ls: LspAssistServer) -> None:
    session = ls.session
    if session is None or ls.closed:
        return
    if session.shown.measure_due():
        measure_later(ls)  # the next accept waiting, if any


def register(server: LspAssistServer) -> None:
    """Register the show, partial-accept and dismiss notifications."""

    @server.feature(DID_SHOW)
    def did_show(ls: LspAssistServer, params: Any) -> None:
        if ls.session is not None and (item := item_of(params)):
            ls.session.shown.shown(item)

    @server.feature(DID_PARTIALLY_ACCEPT)
    def did_partially_accept(ls: LspAssistServer, params: Any) -> None:
        length = field_of(params, "acceptedLength")
        if ls.session is None or not isinstance(length, int) or isinstance(length, bool):
            return
        if (item := item_of(params)) and ls.session.shown.partially_accepted(item, length):
            measure_later(ls)

    @server.feature(DID_DISMISS)
    def did_dismiss(ls: LspAssistServer, params: Any) -> None:
        if ls.session is not None and (item := item_of(params)):
            ls.session.shown.dismissed(item)
