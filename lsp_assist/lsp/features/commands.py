"""workspace/executeCommand: accept, explain context, document state, status.

A command used wrongly (an argument missing, of the wrong type, or naming a document
that is neither open nor readable) is answered with a JSON-RPC error, InvalidParams
(-32602); one used rightly that cannot be done (no model to build the prompt with) with
RequestFailed (-32803). A result never carries an ``error``.
"""

from __future__ import annotations

from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from lsp_assist.errors import LspAssistError
from lsp_assist.lsp.features.shown import measure_later
from lsp_assist.lsp.params import command_arguments
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import explain_with_budget, status_json
from lsp_assist.telemetry import request_of


class JsonRpcRequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid, the server could not do it."""

    CODE = -32803


def register(server: LspAssistServer) -> None:
    """Register the lspAssist.* commands."""

    @server.command("lspAssist.accept")
    def accept(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # the argument is the item's id: the request id, with ".N" for an alternative
        (item,) = command_arguments(args, "lspAssist.accept(item)", str)
        request_id = request_of(item)
        session = ls.session
        counted = bool(request_id) and session is not None and session.accept(request_id)
        if session is not None and item and session.shown.accepted(item):
            measure_later(ls)  # how much of it is still there, RETAIN_AFTER_S later
        return {"accepted": counted, "request_id": request_id}

    @server.command("lspAssist.explainContext")
    async def explain(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        buffers, engine, scheduler = ls.buffers, ls.engine, ls.scheduler
        usage = "lspAssist.explainContext(uri, line, character)"
        uri, line, character = command_arguments(args, usage, str, int, int)
        assert buffers is not None and engine is not None and scheduler is not None
        # the model thread builds the prompt from the buffer as it is now, not as edited later
        snapshot = buffers.snapshot(uri, disk=False)
        column = snapshot.from_lsp(line, character, ls.encoding).column if snapshot else character
        if snapshot is None:  # not open: the file on disk, read off the event loop
            snapshot = await scheduler.run(buffers.snapshot, uri)
        if snapshot is None:
            raise JsonRpcInvalidParams(f"cannot read {uri}: neither open nor a readable file")
        try:
            prompt = await scheduler.run(engine.explain, snapshot, line, column)
        except LspAssistError as exc:
            raise JsonRpcRequestFailed(str(exc)) from exc
        result: dict[str, Any] = prompt.to_json()
        result["text"] = explain_with_budget(prompt)
        return result

    @server.command("lspAssist.documentState")
    def document_state(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # What the server believes the buffer is: editors and tests compare it with theirs.
        (uri,) = command_arguments(args, "lspAssist.documentState(uri)", str)
        assert ls.buffers is not None
        doc = ls.buffers.get(uri)
        if doc is None:
            raise JsonRpcInvalidParams(f"not open: {uri}")
        return {"uri": doc.uri, "version": doc.version, "text": doc.text}

    @server.command("lspAssist.status")
    def status(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        if ls.engine is None:
            return {"initialized": False}
        # ready: the model is loaded and the open files' stable prefixes are evaluated.
        return {"initialized": True, "ready": ls.ready.is_set(), **status_json(ls.engine)}
