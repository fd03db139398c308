"""The index's value types: symbols, imports, per-file entries, and the lookup contract.

These are the types the context engine consumes. The concrete index lives in
``lsp_assist.index.workspace.WorkspaceIndex`` and satisfies :class:`IndexLookup`;
:class:`EmptyIndex` is the lookup with nothing in it (a document outside any workspace).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from tree_sitter import Tree

SymbolKind = Literal[
    "function",
    "method",
    "class",
    "interface",
    "struct",
    "enum",
    "constant",
    "variable",
    "type",
    "module",
]


@dataclass(frozen=True, slots=True)
class Symbol:
    """One definition found in a file."""

    name: str
    kind: SymbolKind
    path: Path
    """Absolute path of the defining file."""
    start_line: int
    """0-based first line of the definition."""
    end_line: int
    """0-based last line of the definition (inclusive)."""
    parent: str | None = None
    """Name of the enclosing class/struct/impl/namespace, if any."""
    signature: str = ""
    """The definition's first line(s) up to the body, stripped."""
    doc: str = ""
    """The first line of its docstring or leading comment, stripped."""


@dataclass(frozen=True, slots=True)
class Import:
    """One import/include/use statement of a file."""

    module: str
    """The imported module as written (``os.path``, ``./util``, ``"fmt"``, ``crate::a::b``)."""
    names: tuple[str, ...] = ()
    """Names bound by it (``from x import a, b`` -> ("a", "b")); empty for whole-module."""
    line: int = 0
    level: int = 0
    """Python relative import level (number of leading dots)."""


@dataclass(slots=True)
class FileEntry:
    """What the index knows about one file."""

    path: Path
    language: str
    symbols: list[Symbol] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    summary: str = ""
    """One line saying what the file is for."""
    size: int = 0
    mtime: float = 0.0
    content_hash: str = ""


class IndexLookup(Protocol):
    """The lookups the context engine needs from the index.

    A lookup raises nothing but ``lsp_assist.errors.IndexError_``: whatever fails below
    it (the file system, tree-sitter, the cache's blobs) is answered as "not found" or
    mapped to ``IndexError_`` inside the index.
    """

    @property
    def roots(self) -> Sequence[Path]:
        """The workspace folders, the first naming the repository (may be empty)."""
        ...

    def relative(self, path: Path) -> str:
        """Return the display path of ``path`` (workspace-relative where it is inside)."""
        ...

    def file(self, path: Path) -> FileEntry | None:
        """Return the entry of ``path`` (open buffer state if open) or None."""
        ...

    def lookup(self, name: str) -> list[Symbol]:
        """Return every symbol named exactly ``name``."""
        ...

    def lookup_prefix(self, prefix: str, limit: int = 50) -> list[Symbol]:
        """Return symbols whose name starts with ``prefix`` (at most ``limit``)."""
        ...

    def symbols_of(self, path: Path) -> list[Symbol]:
        """Return all symbols of one file."""
        ...

    def resolve_import(self, from_path: Path, imp: Import) -> Path | None:
        """Return the workspace file an import of ``from_path`` resolves to, or None."""
        ...

    def importers_of(self, path: Path) -> list[Path]:
        """Return the files that import ``path``."""
        ...

    def text_of(self, path: Path) -> str | None:
        """Return the text of a file (open buffer first, then the LRU cache, then disk)."""
        ...

    def is_denied(self, path: Path) -> bool:
        """True when a file must never be indexed nor read into a prompt (secrets)."""
        ...

    def tree_of(self, path: Path) -> Tree | None:
        """Return the syntax tree of a file's current text (None without one)."""
        ...


class EmptyIndex:
    """An :class:`IndexLookup` with nothing in it, for a document outside any workspace."""

    @property
    def roots(self) -> Sequence[Path]:
        """No workspace folders."""
        return ()

    def relative(self, path: Path) -> str:
        """Return the file's name (there is no workspace to be relative to)."""
        return path.name

    def file(self, path: Path) -> FileEntry | None:
        """Return None: no file is indexed."""
        return None

    def lookup(self, name: str) -> list[Symbol]:
        """Return no symbols."""
        return []

    def lookup_prefix(self, prefix: str, limit: int = 50) -> list[Symbol]:
        """Return no symbols."""
        return []

    def symbols_of(self, path: Path) -> list[Symbol]:
        """Return no symbols."""
        return []

    def resolve_import(self, from_path: Path, imp: Import) -> Path | None:
        """Return None: nothing to resolve to."""
        return None

    def importers_of(self, path: Path) -> list[Path]:
        """Return no importers."""
        return []

    def text_of(self, path: Path) -> str | None:
        """Return None: the index reads no file."""
        return None

    def is_denied(self, path: Path) -> bool:
        """Return False: the empty index denies nothing (it reads nothing either)."""
        return False

    def tree_of(self, path: Path) -> Tree | None:
        """Return None: no trees."""
        return None
