"""workspace/executeCommand: accept, explain context, document state, status, memory.

A command used wrongly (an argument missing, of the wrong type, or naming a document
that is neither open nor readable: the serving object's ``UsageError``) is answered
with a JSON-RPC error, InvalidParams (-32602); one used rightly that cannot be done (no
model to build the prompt with) with RequestFailed (-32803). A result never carries an
``error``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from lsp_assist.errors import LspAssistError, UsageError
from lsp_assist.lsp.params import command_arguments
from lsp_assist.lsp.server import AssistProtocol, LspAssistServer


class JsonRpcRequestFailed(JsonRpcException):
    """LSP's RequestFailed: the request was valid, the server could not do it."""

    CODE = -32803


@contextmanager
def answered_as_errors() -> Iterator[None]:
    """Turn the serving object's errors into JSON-RPC errors: misuse is InvalidParams."""
    try:
        yield
    except UsageError as exc:
        raise JsonRpcInvalidParams(str(exc)) from exc
    except LspAssistError as exc:
        raise JsonRpcRequestFailed(str(exc)) from exc


def register(server: LspAssistServer) -> None:
    """Register the lspAssist.* commands."""

    @server.command("lspAssist.accept")
    def accept(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # the argument is the item's id: the request id, with ".N" for an alternative
        (item,) = command_arguments(args, "lspAssist.accept(item)", str)
        return ls.service.accept(item)

    @server.command("lspAssist.explainContext")
    async def explain(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        usage = "lspAssist.explainContext(uri, line, character)"
        uri, line, character = command_arguments(args, usage, str, int, int)
        with answered_as_errors():
            return await ls.service.explain(uri, line, character, ls.encoding)

    @server.command("lspAssist.documentState")
    def document_state(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # What the server believes the buffer is: editors and tests compare it with theirs.
        (uri,) = command_arguments(args, "lspAssist.documentState(uri)", str)
        with answered_as_errors():
            return ls.service.document_state(uri)

    @server.command("lspAssist.memory")
    def memory(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # What grows with use against its bounds; with a number, the top allocators too
        # (when the server runs under tracemalloc: LSP_ASSIST_TRACEMALLOC).
        (top,) = command_arguments(args, "lspAssist.memory([top])", int) if args else (0,)
        protocol = ls.protocol
        pending = protocol.pending() if isinstance(protocol, AssistProtocol) else {}
        with answered_as_errors():
            return ls.service.memory(top, in_flight=pending)

    @server.command("lspAssist.status")
    def status(ls: LspAssistServer, *args: Any) -> dict[str, Any]:
        # ready: the model is loaded and the open files' stable prefixes are evaluated.
        return ls.service.status()
