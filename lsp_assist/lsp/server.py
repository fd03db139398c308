"""The pygls server object: the protocol's fixes and the one serving object. Features beside it.

pygls 2.1 behaviours corrected here: a request whose params fail to deserialize got
no response at all (the editor waited forever) and now gets InvalidParams; a request
after shutdown got no response and now gets InvalidRequest; malformed JSON is answered
with ParseError where its id can be read; requests before ``initialize`` get
ServerNotInitialized and a second ``initialize`` gets InvalidRequest (pygls built a
second engine, model and all); ``exit`` hands its code (0 after ``shutdown``, else 1)
to the transport (pygls's ``sys.exit`` inside the handler was swallowed: the process
always ended with 0). Framing and the stdio/TCP loops are in ``lsp/transport.py``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.exceptions import (
    JsonRpcException,
    JsonRpcInvalidRequest,
    JsonRpcParseError,
    JsonRpcServerNotInitialized,
)
from pygls.lsp.server import LanguageServer
from pygls.protocol.json_rpc import JsonRPCNotification
from pygls.protocol.language_server import lsp_method

from lsp_assist import __version__
from lsp_assist.config import Settings
from lsp_assist.documents import Position, uri_to_path
from lsp_assist.lsp.document_sync import OwnDocumentSync
from lsp_assist.lsp.transport import peek_request_id
from lsp_assist.serving import CompletionOutcome, CompletionQuery, Service, settings_from_options

logger = logging.getLogger(__name__)

READY_NOTIFICATION = "lspAssist/suggestionReady"
READY_CAPABILITY = "lspAssistSuggestionReady"
"""A client that sets this in ``capabilities.experimental`` gets READY_NOTIFICATION."""

_HANDLED = object()
"""Returned by structure_message for a request already answered with an error."""


class AssistProtocol(OwnDocumentSync):
    """LanguageServerProtocol that answers every request, even malformed ones."""

    def __init__(self, server: Any, converter: Any) -> None:
        super().__init__(server, converter)
        self.initialize_seen = False
        self.on_exit: Callable[[int], None] | None = None
        """Set by the transport: ``exit`` ends the session with this code."""
        self.refusal = ""
        """Set by the transport when this connection must not start a session: the error."""

    def structure_message(self, data: dict[str, Any]) -> Any:
        """Deserialize a message; answer a request with an error if its params are invalid."""
        if data.get("method") == types.WORKSPACE_EXECUTE_COMMAND and "id" not in data:
            # copilot.el sends a next edit's accept command as a notification: run it
            try:
                params = self._converter.structure(data.get("params"), types.ExecuteCommandParams)
            except Exception:  # malformed: logged below like any unreadable notification
                params = None
            if params is not None:
                return JsonRPCNotification(method=data["method"], params=params, jsonrpc="2.0")
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                logger.warning("invalid params for %s (id %s)", data.get("method"), data["id"])
                self._send_response(data["id"], error=exc.to_response_error())
                return _HANDLED
            raise

    def receive_body(self, body: bytes) -> None:
        """Parse one framed body and handle it; malformed JSON is logged, answered if it can be."""
        try:
            message = json.loads(body, object_hook=self.structure_message)
        except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError
            self._answer_unreadable(body, JsonRpcParseError(f"malformed JSON: {exc}"))
            return
        except Exception:
            logger.exception("unable to deserialize a %d-byte message", len(body))
            return
        try:
            self.handle_message(message)
        except BrokenPipeError:
            raise
        except Exception:
            logger.exception("unable to handle a %d-byte message", len(body))

    def reject_frame(self, head: bytes, reason: str) -> None:
        """Answer a frame the transport skipped unread (its first bytes and why)."""
        self._answer_unreadable(head, JsonRpcInvalidRequest(f"message rejected: {reason}"))

    def _answer_unreadable(self, data: bytes, error: JsonRpcException) -> None:
        msg_id = peek_request_id(data)
        answer = "no request id to answer" if msg_id is None else f"answered id {msg_id!r}"
        logger.error("%s (%s)", error.message, answer)
        # The bytes may hold code: only at DEBUG, like every message pygls logs.
        logger.debug("unreadable message starts %r", data[:200])
        if msg_id is not None:
            self._send_response(msg_id, error=error.to_response_error())

    def handle_message(self, message: Any) -> None:
        """Dispatch a message: answer requests out of order in the lifecycle with an error."""
        if message is _HANDLED:
            return
        if getattr(message, "jsonrpc", None) != "2.0":
            self._not_jsonrpc(message)
            return
        method = getattr(message, "method", "")
        if method and not hasattr(message, "id"):  # a notification
            early = not self.initialize_seen or method == types.INITIALIZE
            if early and method != types.EXIT:
                logger.warning("notification %s before initialize: dropped", method)
                return
        elif method:
            error = self._lifecycle_error(method)
            if error is not None:
                logger.warning("request %s (id %s) refused: %s", method, message.id, error.message)
                self._send_response(message.id, error=error.to_response_error())
                return
        super().handle_message(message)

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        """Run a handler as pygls does, then forget the future it filed once it is done.

        pygls 2.1 files the future of a generator, coroutine or thread handler in
        ``_request_futures``, and only the response to a client's request pops it: a
        notification's (every built-in is a generator: didChange, ~1 KB per keystroke;
        issue 11) and each step of a generator request, such as an ``async`` command run
        by ``workspace/executeCommand`` (an explain's future held its whole prompt; issue
        47), were filed under a fresh uuid and never freed."""
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(self._forget_future(msg_id))

    def pending(self) -> dict[str, int]:
        """pygls's records of requests in flight (its futures, and the result types of the
        requests sent to the client): at rest, only the request being answered (one)."""
        return {
            "lsp.request_futures": len(self._request_futures),
            "lsp.result_types": len(self._result_types),
        }

    def _forget_future(self, key: Any) -> Callable[[Any], None]:
        def forget(_future: Any) -> None:
            self._request_futures.pop(key, None)

        return forget

    def _lifecycle_error(self, method: str) -> JsonRpcException | None:
        """The error for a request out of order in the lifecycle, else None; notes initialize."""
        if self._shutdown:
            return JsonRpcInvalidRequest("server is shutting down")
        if method == types.INITIALIZE:
            if self.refusal:
                return JsonRpcInvalidRequest(self.refusal)
            if self.initialize_seen:
                return JsonRpcInvalidRequest("initialize was already received on this connection")
            self.initialize_seen = True
            return None
        if not self.initialize_seen:
            return JsonRpcServerNotInitialized(f"{method} before initialize")
        return None

    def _not_jsonrpc(self, message: Any) -> None:
        # A dict when "jsonrpc" is missing, a structured message when it is not "2.0".
        data = message if isinstance(message, dict) else {}
        for name in ("id", "method"):
            if hasattr(message, name):
                data[name] = getattr(message, name)
        if "id" in data and "method" in data:
            logger.warning("request %r (id %r) is not JSON-RPC 2.0", data["method"], data["id"])
            error = JsonRpcInvalidRequest('not a JSON-RPC 2.0 request (needs "jsonrpc": "2.0")')
            self._send_response(data["id"], error=error.to_response_error())
        else:
            logger.error("not a JSON-RPC 2.0 message: a %s", type(message).__name__)

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """End the session: code 0 after shutdown, 1 without (LSP 3.17)."""
        if (user_handler := self.fm.features.get(types.EXIT)) is not None:
            yield user_handler, args, None
        code = 0 if self._shutdown else 1
        if code:
            logger.warning("exit without shutdown: exit code 1")
        if self.on_exit is not None:
            self.on_exit(code)
        else:  # run by pygls's own loop
            raise SystemExit(code)


class LspAssistServer(LanguageServer):
    """The lsp-assist language server: pygls with the protocol fixed, and one serving object.

    Made at ``initialize`` (:meth:`setup`), the :class:`~lsp_assist.serving.Service` owns
    the session, the model's lifecycle and every answer; the handlers in
    ``lsp/features`` each call it once. The server is its :class:`~lsp_assist.serving.Client`
    (messages, work-done progress) and sends ``lspAssist/suggestionReady``.
    """

    def __init__(self, settings: Settings | None = None) -> None:
        super().__init__(
            name="lsp-assist",
            version=__version__,
            protocol_cls=AssistProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.base_settings = settings or Settings()
        self._service: Service | None = None
        """The connection's serving object, made at initialize (None before it: a
        connection closed before ``initialize`` has nothing to free)."""
        self.setup_hooks: list[Callable[[LspAssistServer], None]] = []
        """Run at the end of setup, before pygls builds the capabilities (features)."""

    @property
    def service(self) -> Service:
        """The serving object (the protocol refuses every request before ``initialize``)."""
        if self._service is None:
            raise JsonRpcServerNotInitialized("the server is not initialized")
        return self._service

    @property
    def encoding(self) -> str:
        """The negotiated position encoding: utf-16 (default), utf-8 or utf-32."""
        try:
            value = self.workspace.position_encoding
        except RuntimeError:
            return "utf-16"
        if value is None:
            return "utf-16"
        return str(getattr(value, "value", value))

    def setup(self, params: types.InitializeParams) -> None:
        """Make the serving object for the client's workspace, settings and capabilities."""
        settings, warnings = settings_from_options(
            params.initialization_options, self.base_settings
        )
        # chosen here, from the client's capabilities: no request handler installs it
        on_ready = self.announce_ready if wants_ready_notices(params.capabilities) else None
        self._service = Service(
            settings,
            client=self,
            workspace=workspace_root(params),
            on_ready=on_ready,
            warnings=warnings,
        )
        for hook in self.setup_hooks:
            hook(self)

    def announce_ready(self, query: CompletionQuery, whole: CompletionOutcome) -> None:
        """Tell the client that an early-answered suggestion is now whole: asking again gets it."""
        line, character = query.snapshot.to_lsp(Position(whole.line, whole.column), self.encoding)
        self.protocol.notify(
            READY_NOTIFICATION,
            {
                "textDocument": {"uri": query.uri, "version": whole.version},
                "position": {"line": line, "character": character},
            },
        )

    # -- the serving object's Client --------------------------------------------------

    def warn(self, message: str, *, error: bool = False) -> None:
        """Log a message and show it in the editor."""
        logger.warning(message)
        kind = types.MessageType.Error if error else types.MessageType.Warning
        self.window_show_message(
            types.ShowMessageParams(type=kind, message=f"lsp-assist: {message}")
        )

    async def begin_progress(self, token: str, title: str) -> bool:
        """Create a work-done progress token and begin it; False if the client has none."""
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), timeout=5)
            self.work_done_progress.begin(
                token, types.WorkDoneProgressBegin(title=title, percentage=0)
            )
        except Exception as exc:  # client without work-done progress support
            logger.debug("no work-done progress: %s", exc)
            return False
        return True

    def report_progress(self, token: str, message: str, percentage: int) -> None:
        """Report a phase of a work-done progress begun."""
        self.work_done_progress.report(
            token, types.WorkDoneProgressReport(message=message, percentage=percentage)
        )

    def end_progress(self, token: str, message: str) -> None:
        """End a work-done progress begun."""
        self.work_done_progress.end(token, types.WorkDoneProgressEnd(message=message))

    # -- the end of a session ---------------------------------------------------------

    def shutdown_engine(self) -> None:
        """Stop background work and release the model (blocking, idempotent)."""
        if self._service is not None:
            self._service.close()

    def close_session(self) -> None:
        """Free everything the connection held: the session, the model, pygls's thread pool."""
        self.shutdown_engine()
        self.shutdown()  # type: ignore[no-untyped-call]


def wants_ready_notices(capabilities: types.ClientCapabilities | None) -> bool:
    """True when the client asked for ``lspAssist/suggestionReady`` (an experimental capability)."""
    experimental = capabilities.experimental if capabilities is not None else None
    return isinstance(experimental, dict) and bool(experimental.get(READY_CAPABILITY))


def workspace_root(params: types.InitializeParams) -> Path | None:
    """Return the first workspace folder (or rootUri / rootPath) as a path."""
    if params.workspace_folders:
        return uri_to_path(params.workspace_folders[0].uri)
    if params.root_uri:
        return uri_to_path(params.root_uri)
    if params.root_path:
        return Path(params.root_path)
    return None


def create_server(settings: Settings | None = None) -> LspAssistServer:
    """Return a server with every feature registered."""
    # local: the feature modules import LspAssistServer from this module (a real cycle)
    from lsp_assist.lsp.features import register_all

    server = LspAssistServer(settings)
    register_all(server)
    return server
