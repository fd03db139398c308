"""Index: the live tree-sitter symbol index of the workspace.

:class:`WorkspaceIndex` is the index itself; the value types and the
:class:`IndexLookup` protocol the context engine reads it through are in ``model``.
"""

from lsp_assist.index.languages import available_languages
from lsp_assist.index.model import (
    EmptyIndex,
    FileEntry,
    Import,
    IndexLookup,
    Symbol,
    SymbolKind,
)
from lsp_assist.index.vectors import VectorIndex, start_workspace_vectors
from lsp_assist.index.workspace import WorkspaceIndex

__all__ = [
    "EmptyIndex",
    "FileEntry",
    "Import",
    "IndexLookup",
    "Symbol",
    "SymbolKind",
    "VectorIndex",
    "WorkspaceIndex",
    "available_languages",
    "start_workspace_vectors",
]
