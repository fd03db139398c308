"""textDocument/copilotInlineEdit: next edits as GitHub's copilot-language-server serves them.

The request (``{textDocument: {uri, version}, position}``; clients add ``context``)
is answered ``{"edits": [{text, textDocument: {uri, version}, range, command}]}``, the
edit the cursor is nearest first, with an extra ``explain`` (why it is proposed) that
clients ignore. ``textDocument/didShowInlineEdit`` (``{item: {command}}`` or
``{item: edit}``) counts a shown edit; acceptance is the edit's ``command``,
``github.copilot.didAcceptNextEditSuggestionItem(id)`` through
``workspace/executeCommand`` (copilot.el sends it as a notification). The command is
advertised only when ``nextEdit`` is on at initialize (docs/editors.md). With
``nextEdit`` = ``model`` or ``both`` the answer waits for the model's rewrite, run on
the model thread: the serving object's round trip (``Service.propose_edits``).
"""

from __future__ import annotations

from typing import Any

from lsp_assist.lsp.params import field_of
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import ProposedEdit

INLINE_EDIT = "textDocument/copilotInlineEdit"
DID_SHOW = "textDocument/didShowInlineEdit"
DID_FOCUS = "textDocument/didFocus"
ACCEPT_COMMAND = "github.copilot.didAcceptNextEditSuggestionItem"
STATS_COMMAND = "lspAssist.nextEditStats"


def _lsp_edit(ls: LspAssistServer, edit: ProposedEdit) -> dict[str, Any]:
    view = edit.view
    start = view.to_lsp(edit.start, ls.encoding)
    end = view.to_lsp(edit.end, ls.encoding)
    return {
        "text": edit.text,
        "textDocument": {"uri": view.uri, "version": view.version},
        "range": {
            "start": {"line": start[0], "character": start[1]},
            "end": {"line": end[0], "character": end[1]},
        },
        "command": {"title": "Accept next edit", "command": ACCEPT_COMMAND, "arguments": [edit.id]},
        "explain": {"kind": edit.kind, "reason": edit.reason},
    }


def _cursor(position: Any) -> tuple[int, int] | None:
    """The request's position (line, character), None when it is not two numbers."""
    line, character = field_of(position, "line"), field_of(position, "character")
    return (line, character) if isinstance(line, int) and isinstance(character, int) else None


def _edit_id(item: Any) -> str:
    command = field_of(item, "command")
    arguments = field_of(command, "arguments") or []
    return str(arguments[0]) if arguments else ""


def register(server: LspAssistServer) -> None:
    """Register the next-edit request, its notifications and its accept command."""

    def accept(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # lenient: copilot.el sends it as a notification, which no error can answer
        return ls.service.accept_edit(str(args[0]) if args else "")

    def advertise(ls: LspAssistServer) -> None:
        # Off at initialize: the accept command is not among executeCommandProvider's.
        if ls.service.next_edit_mode == "off":
            ls.protocol.fm.commands.pop(ACCEPT_COMMAND, None)

    server.command(ACCEPT_COMMAND)(accept)
    server.setup_hooks.append(advertise)

    @server.command(STATS_COMMAND)
    def stats(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        return ls.service.next_edit_stats()

    @server.feature(INLINE_EDIT)
    async def inline_edit(ls: LspAssistServer, params: Any) -> dict[str, Any]:
        document, position = field_of(params, "textDocument"), field_of(params, "position")
        uri, version = field_of(document, "uri"), field_of(document, "version")
        if not isinstance(uri, str):
            return {"edits": []}
        if ls.service.next_edit_mode != "off" and ACCEPT_COMMAND not in ls.protocol.fm.commands:
            server.command(ACCEPT_COMMAND)(accept)  # switched on after initialize
        version = version if isinstance(version, int) else None
        edits = await ls.service.propose_edits(uri, version, _cursor(position), ls.encoding)
        return {"edits": [_lsp_edit(ls, edit) for edit in edits]}

    @server.feature(DID_SHOW)
    def did_show(ls: LspAssistServer, params: Any) -> None:
        if edit_id := _edit_id(field_of(params, "item")):
            ls.service.edit_shown(edit_id)

    @server.feature(DID_FOCUS)
    def did_focus(ls: LspAssistServer, params: Any) -> None:
        # sidekick.nvim and copilot-lsp send it on BufEnter; nothing depends on focus here.
        return None
