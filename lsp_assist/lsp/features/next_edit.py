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
the model thread (``Scheduler.rewrite``).
"""

from __future__ import annotations

from dataclasses import asdict
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


def _edit_id(item: Any) -> str:
    command = field_of(item, "command")
    arguments = field_of(command, "arguments") or []
    return str(arguments[0]) if arguments else ""


def register(server: LspAssistServer) -> None:
    """Register the next-edit request, its notifications and its accept command."""

    def accept(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        edit_id = str(args[0]) if args else ""
        found = ls.next_edits.accept(edit_id) if ls.next_edits is not None else None
        return {"accepted": found is not None, "id": edit_id}

    def advertise(ls: LspAssistServer) -> None:
        # Off at initialize: the accept command is not among executeCommandProvider's.
        if ls.settings.completion.next_edit == "off":
            ls.protocol.fm.commands.pop(ACCEPT_COMMAND, None)

    server.command(ACCEPT_COMMAND)(accept)
    server.setup_hooks.append(advertise)

    @server.command(STATS_COMMAND)
    def stats(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        if ls.next_edits is None:
            return {"initialized": False}
        return {"mode": ls.next_edits.mode, **asdict(ls.next_edits.counters)}

    @server.feature(INLINE_EDIT)
    async def inline_edit(ls: LspAssistServer, params: Any) -> dict[str, Any]:
        document = field_of(params, "textDocument")
        position = field_of(params, "position")
        uri, version = field_of(document, "uri"), field_of(document, "version")
        if ls.next_edits is None or ls.buffers is None or not isinstance(uri, str):
            return {"edits": []}
        if ls.next_edits.mode != "off" and ACCEPT_COMMAND not in ls.protocol.fm.commands:
            server.command(ACCEPT_COMMAND)(accept)  # switched on after initialize
        doc = ls.buffers.get(uri)
        cursor = None
        if doc is not None and position is not None:
            line, character = field_of(position, "line"), field_of(position, "character")
            if isinstance(line, int) and isinstance(character, int):
                cursor = doc.from_lsp(line, character, ls.encoding)
        next_edits = ls.next_edits
        answer = next_edits.propose(uri, version if isinstance(version, int) else None, cursor)
        job = answer.job
        if job is not None and ls.scheduler is not None:
            outcome = await ls.scheduler.rewrite(
                lambda cancel: next_edits.rewrite(job, cancel),
                wanted=lambda: next_edits.current(job),
            )
            answer = next_edits.merge(answer, outcome)
        return {"edits": [_lsp_edit(ls, edit) for edit in answer.edits]}

    @server.feature(DID_SHOW)
    def did_show(ls: LspAssistServer, params: Any) -> None:
        edit_id = _edit_id(field_of(params, "item"))
        if ls.next_edits is not None and edit_id:
            ls.next_edits.shown(edit_id)

    @server.feature(DID_FOCUS)
    def did_focus(ls: LspAssistServer, params: Any) -> None:
        # sidekick.nvim and copilot-lsp send it on BufEnter; nothing depends on focus here.
        return None
