"""didOpen, didChange, didClose, didSave: keep the session's own copy of each buffer.

pygls applies edits to its workspace before our handler runs; the session's buffers
(serving/buffers.py) keep their own documents so each change reaches the index with its
old byte offsets.
"""

from __future__ import annotations

import logging

from lsprotocol import types

from lsp_assist.errors import DocumentError
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.telemetry import trim_edit

logger = logging.getLogger(__name__)


def register(server: LspAssistServer) -> None:
    """Register the document synchronisation handlers."""

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: LspAssistServer, params: types.DidOpenTextDocumentParams) -> None:
        if ls.buffers is None or ls.session is None:
            return
        item = params.text_document
        doc = ls.buffers.open(
            item.uri, item.text, version=item.version, language_id=item.language_id
        )
        if ls.scheduler is not None and ls.session.loaded:
            # Evaluate the file's stable prompt prefix while the user reads the file.
            ls.background(ls.scheduler.prefill(doc.snapshot()))

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: LspAssistServer, params: types.DidChangeTextDocumentParams) -> None:
        buffers = ls.buffers
        if buffers is None:
            return
        uri = params.text_document.uri
        shown = ls.session.shown if ls.session is not None else None
        for change in params.content_changes:
            doc = buffers.get(uri)
            if doc is None:
                logger.warning("didChange for unopened %s", uri)
                return
            old = doc.text
            try:
                if isinstance(change, types.TextDocumentContentChangePartial):
                    start = doc.from_lsp(
                        change.range.start.line, change.range.start.character, ls.encoding
                    )
                    end = doc.from_lsp(
                        change.range.end.line, change.range.end.character, ls.encoding
                    )
                    offsets = (doc.offset_at(start), doc.offset_at(end))
                    buffers.change(uri, params.text_document.version, [(start, end, change.text)])
                else:
                    offsets = (0, len(old))
                    buffers.change(uri, params.text_document.version, [(None, None, change.text)])
            except DocumentError as exc:
                ls.warn(f"ignored an edit that does not fit {uri}: {exc}")
                continue
            if shown is not None and shown.follows(uri):  # accepted text to keep track of
                shown.changed(uri, *trim_edit(old, *offsets, change.text))
        doc = buffers.get(uri)
        if doc is not None and ls.session is not None:
            ls.session.shown.edited(uri, doc.line)  # typed over the suggestion shown?

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: LspAssistServer, params: types.DidCloseTextDocumentParams) -> None:
        if ls.session is not None:  # first: its accepts are measured on its text
            ls.session.shown.closed(params.text_document.uri)
        if ls.buffers is not None:
            ls.buffers.close(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: LspAssistServer, params: types.DidSaveTextDocumentParams) -> None:
        # The open buffer is already what the index knows; the watcher sees the file.
        logger.debug("saved %s", params.text_document.uri)
