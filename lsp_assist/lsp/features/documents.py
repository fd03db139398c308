"""didOpen, didChange, didClose, didSave: keep the session's own copy of each buffer.

pygls applies edits to its workspace before our handler runs; the session's buffers
(serving/buffers.py) keep their own documents so each change reaches the index with its
old byte offsets. The handlers hand the serving object each change's range as the
client sent it (its position encoding): :meth:`Service.change` converts them.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import LspChange

logger = logging.getLogger(__name__)


def content_change(change: types.TextDocumentContentChangeEvent) -> LspChange:
    """A content change as the serving object takes it: its range (None: all), its text."""
    if isinstance(change, types.TextDocumentContentChangePartial):
        start, end = change.range.start, change.range.end
        return (start.line, start.character, end.line, end.character), change.text
    return None, change.text


def register(server: LspAssistServer) -> None:
    """Register the document synchronisation handlers."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LspAssistServer, params: types.DidOpenTextDocumentParams) -> None:
        item = params.text_document
        ls.service.open(item.uri, item.text, version=item.version, language_id=item.language_id)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LspAssistServer, params: types.DidChangeTextDocumentParams) -> None:
        document = params.text_document
        changes = [content_change(change) for change in params.content_changes]
        ls.service.change(document.uri, document.version, changes, ls.encoding)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LspAssistServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.service.close_document(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LspAssistServer, params: types.DidSaveTextDocumentParams) -> None:
        # The open buffer is already what the index knows; the watcher sees the file.
        logger.debug("saved %s", params.text_document.uri)
