"""Packed entries: the compact in-memory (and on-disk) form of an indexed file.

Owns :class:`PackedEntry` and the name table. A workspace of 50,000 files holds close to
a million symbols; as objects (a ``Symbol`` with its name, signature and docstring
strings) they cost ~400 bytes each. A packed entry keeps a file's symbols as one
zlib-compressed ``marshal`` blob and its imports as a small uncompressed one (the import
graph reads every file's imports); ``unpack`` rebuilds the :class:`FileEntry` a lookup
needs. The same blobs are the rows of the SQLite cache, so a warm start installs rows
as they are. :class:`FileSets` maps a key (a symbol name; an imported file) to the files
defining or importing it without a container per key for the common single-file case.
"""

from __future__ import annotations

import marshal
import zlib
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from lsp_assist.index.extract import SYMBOL_SETTERS
from lsp_assist.index.model import FileEntry, Import, Symbol

SMALL_GROUP = 8
"""A key with up to this many files keeps them in a tuple, beyond it in a set."""

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class PackedEntry:
    """One indexed file, compact: what :class:`FileEntry` holds, symbols compressed."""

    language: str
    summary: str
    size: int
    mtime_ns: int
    content_hash: str
    symbols_blob: bytes
    """zlib(marshal([(name, kind, start, end, parent, signature, doc), ...]))."""
    imports_blob: bytes
    """marshal([(module, names, line, level), ...]); empty when the file imports nothing."""
    symbol_count: int

    @property
    def mtime(self) -> float:
        """Modification time in seconds (as in :class:`FileEntry`)."""
        return self.mtime_ns / 1e9

    def with_stamp(self, size: int, mtime_ns: int) -> PackedEntry:
        """Return a copy with another size and mtime (same content)."""
        return PackedEntry(
            self.language,
            self.summary,
            size,
            mtime_ns,
            self.content_hash,
            self.symbols_blob,
            self.imports_blob,
            self.symbol_count,
        )


def pack(entry: FileEntry, mtime_ns: int) -> PackedEntry:
    """Return the packed form of ``entry``."""
    raw = [
        (s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature, s.doc)
        for s in entry.symbols
    ]
    imports = [(i.module, i.names, i.line, i.level) for i in entry.imports]
    return PackedEntry(
        entry.language,
        entry.summary,
        entry.size,
        mtime_ns,
        entry.content_hash,
        zlib.compress(marshal.dumps(raw), 1),
        marshal.dumps(imports) if imports else b"",
        len(raw),
    )


def raw_symbols(packed: PackedEntry) -> list[tuple[Any, ...]]:
    """Return the symbol tuples of a packed entry."""
    result: list[tuple[Any, ...]] = marshal.loads(zlib.decompress(packed.symbols_blob))
    return result


def make_symbol(raw: tuple[Any, ...], path: Path) -> Symbol:
    """Return the Symbol of one packed tuple (without the dataclass __init__: hot path)."""
    set_name, set_kind, set_path, set_start, set_end, set_parent, set_sig, set_doc = SYMBOL_SETTERS
    name, kind, start, end, parent, signature, doc = raw
    sym = Symbol.__new__(Symbol)
    set_name(sym, name)
    set_kind(sym, kind)
    set_path(sym, path)
    set_start(sym, start)
    set_end(sym, end)
    set_parent(sym, parent)
    set_sig(sym, signature)
    set_doc(sym, doc)
    return sym


def imports_of(stored: PackedEntry | FileEntry) -> list[Import]:
    """Return the imports of a packed or plain entry."""
    if isinstance(stored, FileEntry):
        return stored.imports
    if not stored.imports_blob:
        return []
    return [
        Import(module=m, names=tuple(n), line=ln, level=lv)
        for m, n, ln, lv in marshal.loads(stored.imports_blob)
    ]


def names_of(stored: PackedEntry | FileEntry) -> set[str]:
    """Return the distinct symbol names of a packed or plain entry."""
    if isinstance(stored, FileEntry):
        return {s.name for s in stored.symbols}
    if not stored.symbol_count:
        return set()
    return {raw[0] for raw in raw_symbols(stored)}


def unpack(packed: PackedEntry, path: Path) -> FileEntry:
    """Return the :class:`FileEntry` of a packed entry (symbols point at ``path``)."""
    symbols = [make_symbol(raw, path) for raw in raw_symbols(packed)] if packed.symbol_count else []
    return FileEntry(
        path=path,
        language=packed.language,
        symbols=symbols,
        imports=imports_of(packed),
        summary=packed.summary,
        size=packed.size,
        mtime=packed.mtime,
        content_hash=packed.content_hash,
    )


class FileSets(Generic[K]):
    """Key -> a set of files, held as a Path, a tuple of a few, or a set of many."""

    def __init__(self) -> None:
        self._table: dict[K, Path | tuple[Path, ...] | set[Path]] = {}

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, key: K) -> bool:
        return key in self._table

    def __iter__(self) -> Iterator[K]:
        return iter(self._table)

    def keys(self) -> list[K]:
        """Return every key (unsorted)."""
        return list(self._table)

    def files(self, key: K) -> tuple[Path, ...]:
        """Return the files of ``key`` (insertion order; by path past ``SMALL_GROUP``)."""
        found = self._table.get(key)
        if found is None:
            return ()
        if isinstance(found, Path):
            return (found,)
        if isinstance(found, tuple):
            return found
        return tuple(sorted(found, key=str))

    def add(self, key: K, path: Path) -> bool:
        """Add ``path`` to the files of ``key``; True when the key is new."""
        table = self._table
        found = table.get(key)
        if found is None:
            table[key] = path
            return True
        if isinstance(found, Path):
            if found != path:
                table[key] = (found, path)
        elif isinstance(found, tuple):
            if path not in found:
                table[key] = {*found, path} if len(found) >= SMALL_GROUP else (*found, path)
        else:
            found.add(path)
        return False

    def discard(self, key: K, path: Path) -> bool:
        """Remove ``path`` from the files of ``key``; True when the key has no file left."""
        table = self._table
        found = table.get(key)
        if found is None:
            return False
        if isinstance(found, Path):
            if found != path:
                return False
            del table[key]
            return True
        if isinstance(found, tuple):
            rest = tuple(p for p in found if p != path)
            table[key] = rest[0] if len(rest) == 1 else rest
            return False
        found.discard(path)
        if len(found) <= SMALL_GROUP:
            table[key] = tuple(sorted(found, key=str))
        return False
