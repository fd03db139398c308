"""Documents: the editor's buffers, their versions, positions and incremental edits."""

from lsp_assist.documents.document import ByteEdit, Document, Position, language_for_path
from lsp_assist.documents.store import DocumentStore

__all__ = ["ByteEdit", "Document", "DocumentStore", "Position", "language_for_path"]
