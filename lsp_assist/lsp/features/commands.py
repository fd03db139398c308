"""workspace/executeCommand: accept, explain context, status."""

from __future__ import annotations

from typing import Any

from lsp_assist.errors import LspAssistError
from lsp_assist.lsp.features.shown import measure_later
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import explain_with_budget, status_json
from lsp_assist.telemetry import request_of


def register(server: LspAssistServer) -> None:
    """Register the lspAssist.* commands."""

    @server.command("lspAssist.accept")
    def accept(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # the argument is the item's id: the request id, with ".N" for an alternative
        item = str(args[0]) if args else ""
        request_id = request_of(item)
        session = ls.session
        counted = bool(request_id) and session is not None and session.accept(request_id)
        if session is not None and item and session.shown.accepted(item):
            measure_later(ls)  # how much of it is still there, RETAIN_AFTER_S later
        return {"accepted": counted, "request_id": request_id}

    @server.command("lspAssist.explainContext")
    async def explain(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        buffers, engine, scheduler = ls.buffers, ls.engine, ls.scheduler
        if buffers is None or engine is None or scheduler is None or len(args) < 3:
            return {"error": "usage: lspAssist.explainContext(uri, line, character)"}
        uri, line, character = str(args[0]), int(args[1]), int(args[2])
        # the model thread builds the prompt from the buffer as it is now, not as edited later
        snapshot = buffers.snapshot(uri, disk=False)
        column = snapshot.from_lsp(line, character, ls.encoding).column if snapshot else character
        if snapshot is None:  # not open: the file on disk, read off the event loop
            snapshot = await scheduler.run(buffers.snapshot, uri)
        if snapshot is None:
            return {"error": f"cannot read {uri}"}
        try:
            prompt = await scheduler.run(engine.explain, snapshot, line, column)
        except LspAssistError as exc:
            return {"error": str(exc)}
        result: dict[str, Any] = prompt.to_json()
        result["text"] = explain_with_budget(prompt)
        return result

    @server.command("lspAssist.documentState")
    def document_state(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # What the server believes the buffer is: editors and tests compare it with theirs.
        if ls.buffers is None or not args:
            return {"error": "usage: lspAssist.documentState(uri)"}
        doc = ls.buffers.get(str(args[0]))
        if doc is None:
            return {"error": f"not open: {args[0]}"}
        return {"uri": doc.uri, "version": doc.version, "text": doc.text}

    @server.command("lspAssist.status")
    def status(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        if ls.engine is None:
            return {"initialized": False}
        # ready: the model is loaded and the open files' stable prefixes are evaluated.
        return {"initialized": True, "ready": ls.ready.is_set(), **status_json(ls.engine)}
