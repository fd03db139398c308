"""The open buffers: didOpen/didChange/didClose applied, each edit handed on to the index.

Owns the session's copy of every editor buffer (a :class:`DocumentStore`: pygls applies
edits before the handlers run, too late for tree-sitter's old byte offsets), which of
them are too big for model work (``oversized``: no parsing, no completions), the recently
opened files (newest first, for the context engine's similar-code layer) and
:meth:`Buffers.snapshot`, the frozen buffer a request reads. Each change reaches the
index as an incremental edit (:meth:`WorkspaceIndex.edit_buffer`); the context engine
hears of opened and edited files through the two callbacks it is given.

Every method here runs on the thread that applies the edits (the event loop in the
server); what crosses to the model thread is a snapshot.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

from lsp_assist.config import Bounded, Settings
from lsp_assist.documents import (
    ByteEdit,
    Document,
    DocumentSnapshot,
    DocumentStore,
    EditHistories,
    TextView,
    uri_to_path,
)
from lsp_assist.index import FileRules, WorkspaceIndex
from lsp_assist.serving.model import Change
from lsp_assist.serving.triggers import oversized_reason

__all__ = ["Buffers"]

logger = logging.getLogger(__name__)


class Buffers:
    """The open documents of a session, kept in step with the index."""

    def __init__(
        self,
        settings: Callable[[], Settings],
        index: WorkspaceIndex | None,
        *,
        on_opened: Callable[[Path], None] | None = None,
        on_edited: Callable[[Path], None] | None = None,
    ) -> None:
        self._settings = settings
        self._index = index
        self._on_opened = on_opened
        self._on_edited = on_edited
        self._documents = DocumentStore()
        self._recent: tuple[Path, ...] = ()
        """Recently opened files, newest first; replaced whole, never changed in place."""
        self._oversized: set[str] = set()
        """URIs of open documents too big for model work (see ``oversized``)."""
        self.history = EditHistories()
        """Each open document's text at open and recent edits (none for denied files)."""

    @property
    def recent(self) -> tuple[Path, ...]:
        """The recently opened files, newest first (at most ``recentFiles``)."""
        return self._recent

    def __len__(self) -> int:
        return len(self._documents)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._documents)

    def bounds(self) -> dict[str, Bounded]:
        """What is kept per open document, against the documents open (and their constants)."""
        documents = len(self._documents)
        return {
            "buffers.oversized": Bounded(
                len(self._oversized), documents, "documents", "open documents"
            ),
            "buffers.recent": Bounded(
                len(self._recent), self._settings().context.recent_files, "files", "recentFiles"
            ),
            "edit_histories.documents": Bounded(
                len(self.history), documents, "documents", "open documents"
            ),
            **self.history.bounds(),
        }

    def uris(self) -> list[str]:
        """Return the URIs of the open documents."""
        return [doc.uri for doc in self._documents]

    def get(self, uri: str) -> Document | None:
        """Return the live open document of ``uri`` (None when it is not open)."""
        return self._documents.get(uri)

    def version(self, uri: str) -> int | None:
        """Return the open document's version (None when it is not open)."""
        doc = self._documents.get(uri)
        return doc.version if doc is not None else None

    def oversized(self, doc: TextView) -> str:
        """Return why a document is too big for model work and parsing ('' = it is not)."""
        return oversized_reason(doc, self._settings())

    def _note_oversized(self, doc: Document, reason: str) -> None:
        if reason and doc.uri not in self._oversized:
            logger.warning("%s: no completions and no parsing: %s", doc.uri, reason)
        if reason:
            self._oversized.add(doc.uri)
        else:
            self._oversized.discard(doc.uri)

    def open(self, uri: str, text: str, *, version: int = 0, language_id: str = "") -> Document:
        """Open a buffer; the index then knows its text instead of the disk's."""
        doc = self._documents.open(uri, text, version=version, language_id=language_id)
        self._note_recent(doc.path)
        reason = self.oversized(doc)
        self._note_oversized(doc, reason)
        if self._index is not None and doc.language_id and not reason:
            self._index.open_buffer(doc.path, doc.text)
        if reason or self._denied(doc.path):
            self.history.drop(uri)  # secrets never feed a history
        else:
            self.history.open(uri, doc.text)
        return doc

    def _denied(self, path: Path) -> bool:
        if self._index is not None:
            return self._index.is_denied(path)
        return FileRules([], self._settings().index).is_denied(path)

    def change(self, uri: str, version: int, changes: list[Change]) -> Document | None:
        """Apply content changes in order; each reaches the index as an incremental edit."""
        doc = self._documents.get(uri)
        if doc is None:
            logger.warning("didChange for a document that is not open: %s", uri)
            return None
        index = self._index
        was_oversized = uri in self._oversized
        for start, end, new_text in changes:
            before = doc.snapshot()
            edit: ByteEdit = doc.apply_change(start, end, new_text)
            self.history.record(uri, before, doc, start, end)
            if index is not None and doc.language_id and not was_oversized:
                index.edit_buffer(doc.path, doc.text, edit)
        doc.version = version
        reason = self.oversized(doc)
        self._note_oversized(doc, reason)
        if index is not None and doc.language_id and bool(reason) != was_oversized:
            # Crossed the size limit: the index drops the buffer or parses it afresh.
            if reason:
                index.close_buffer(doc.path)
            else:
                index.open_buffer(doc.path, doc.text)
        if self._on_edited is not None:
            self._on_edited(doc.path)
        return doc

    def close(self, uri: str) -> None:
        """Close a buffer; the index goes back to the file on disk."""
        doc = self._documents.close(uri)
        self.history.drop(uri)
        oversized = uri in self._oversized
        self._oversized.discard(uri)
        if doc is not None and self._index is not None and doc.language_id and not oversized:
            self._index.close_buffer(doc.path)

    def _note_recent(self, path: Path) -> None:
        recent = (path, *(p for p in self._recent if p != path))
        self._recent = recent[: self._settings().context.recent_files]
        if self._on_opened is not None:
            self._on_opened(path)

    def snapshot(self, uri: str, *, disk: bool = True) -> DocumentSnapshot | None:
        """Return the buffer of ``uri`` frozen as it is now (with ``disk``, the file if not open).

        Call it on the thread that applies the edits (the event loop in the server). A
        file the index may not read (a secret, outside the workspace's rules) is None.
        """
        doc = self._documents.get(uri)
        if doc is not None:
            return doc.snapshot()
        if not disk:
            return None
        path = uri_to_path(uri)
        if self._index is not None and self._index.is_denied(path):
            return None
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return Document(uri, text).snapshot()
