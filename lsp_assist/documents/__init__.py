"""Documents: the editor's buffers, their versions, positions and incremental edits."""

from lsp_assist.documents.document import (
    ByteEdit,
    Document,
    DocumentSnapshot,
    Position,
    TextView,
    canonical_language,
    language_for_path,
    uri_to_path,
)
from lsp_assist.documents.history import EditHistories, EditHistory, TextChange
from lsp_assist.documents.store import DocumentStore

__all__ = [
    "ByteEdit",
    "Document",
    "DocumentSnapshot",
    "DocumentStore",
    "EditHistories",
    "EditHistory",
    "Position",
    "TextChange",
    "TextView",
    "canonical_language",
    "language_for_path",
    "uri_to_path",
]
