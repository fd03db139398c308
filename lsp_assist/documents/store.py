"""The set of open documents, keyed by URI."""

from __future__ import annotations

from collections.abc import Iterator

from lsp_assist.documents.document import Document


class DocumentStore:
    """Open documents by URI; the single source of truth for buffer text."""

    def __init__(self) -> None:
        self._docs: dict[str, Document] = {}

    def open(self, uri: str, text: str, *, version: int = 0, language_id: str = "") -> Document:
        """Open (or reopen) a document and return it."""
        doc = Document(uri, text, version=version, language_id=language_id)
        self._docs[uri] = doc
        return doc

    def get(self, uri: str) -> Document | None:
        """Return the open document for ``uri`` or None."""
        return self._docs.get(uri)

    def close(self, uri: str) -> Document | None:
        """Forget a document; return it if it was open."""
        return self._docs.pop(uri, None)

    def __iter__(self) -> Iterator[Document]:
        return iter(list(self._docs.values()))

    def __len__(self) -> int:
        return len(self._docs)
