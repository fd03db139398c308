"""Index: the live tree-sitter symbol index of the workspace."""

from lsp_assist.index.model import FileEntry, Import, IndexLookup, Symbol, SymbolKind

__all__ = ["FileEntry", "Import", "IndexLookup", "Symbol", "SymbolKind"]
