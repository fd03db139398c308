"""Document sync without pygls's own copy of each buffer.

pygls 2.1's built-in didOpen/didChange/didClose keep a second copy of every document
in its workspace, and its didChange converts positions by rewriting
``position.character`` in place on the incoming params (``position_from_client_units``:
a past-the-end character becomes ``len - 1``), so a handler running after it reads a
different range than the client sent and the buffers drift apart. lsp-assist keeps its
own documents (lsp_assist.documents), so these overrides skip pygls's copy and pass the
client's params, untouched, straight to the registered handler.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from lsprotocol import types
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method


class OwnDocumentSync(LanguageServerProtocol):
    """A protocol whose document sync notifications reach only lsp-assist's handlers."""

    def _user_handler(self, method: str, params: Any) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(
        self, params: types.DidOpenTextDocumentParams
    ) -> Generator[Any, Any, None]:
        """Pass didOpen to the handler; pygls's workspace keeps no copy."""
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(
        self, params: types.DidChangeTextDocumentParams
    ) -> Generator[Any, Any, None]:
        """Pass didChange to the handler with the client's positions unmodified."""
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(
        self, params: types.DidCloseTextDocumentParams
    ) -> Generator[Any, Any, None]:
        """Pass didClose to the handler."""
        yield from self._user_handler(types.TEXT_DOCUMENT_DID_CLOSE, params)
