"""Index: the live tree-sitter symbol index of the workspace."""

from lsp_assist.index.model import (
    EmptyIndex,
    FileEntry,
    Import,
    IndexLookup,
    Symbol,
    SymbolKind,
)

__all__ = ["EmptyIndex", "FileEntry", "Import", "IndexLookup", "Symbol", "SymbolKind"]
