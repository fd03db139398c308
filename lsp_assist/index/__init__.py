"""Index: the live tree-sitter symbol index of the workspace.

:class:`WorkspaceIndex` is the index itself; the value types and the
:class:`IndexLookup` protocol the context engine reads it through are in ``model``.
The symbolic next edits (``next_edit``, a package of its own) read the same trees.
"""

from lsp_assist.index.files import FileRules
from lsp_assist.index.languages import available_languages, parse
from lsp_assist.index.model import (
    EmptyIndex,
    FileEntry,
    Import,
    IndexLookup,
    Symbol,
    SymbolKind,
)
from lsp_assist.index.next_edit import (
    FollowUp,
    UserEdit,
    classify,
    follow_ups,
    follow_ups_elsewhere,
)
from lsp_assist.index.vectors import Embedding, VectorIndex, VectorSource
from lsp_assist.index.workspace import WorkspaceIndex

__all__ = [
    "Embedding",
    "EmptyIndex",
    "FileEntry",
    "FileRules",
    "FollowUp",
    "Import",
    "IndexLookup",
    "Symbol",
    "SymbolKind",
    "UserEdit",
    "VectorIndex",
    "VectorSource",
    "WorkspaceIndex",
    "available_languages",
    "classify",
    "follow_ups",
    "follow_ups_elsewhere",
    "parse",
]
