"""The index's value types: symbols, imports, per-file entries, and the lookup contract.

These are the types the context engine consumes. The concrete index lives in
``lsp_assist.index.workspace.WorkspaceIndex`` and satisfies :class:`IndexLookup`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

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
    """The lookups the context engine needs from the index."""

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
