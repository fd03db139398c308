"""The symbol table: every indexed file's entry by path, and the name table over them.

Owns :class:`SymbolTable`: the entries (packed for disk files, whole for open buffers),
the small LRU of unpacked entries behind ``file()``, the name -> files table, the sorted
names behind prefix lookups, and the per-name ``lookup`` cache (dropped per name when a
file defining it changes). The table guards itself with a lock of its own, never held
while anything else is taken (only :class:`~lsp_assist.index.workspace.WorkspaceIndex`
and its import graph call it, and may hold their own locks when they do).
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from pathlib import Path

from lsp_assist.config import Bounded
from lsp_assist.index.model import FileEntry, Symbol
from lsp_assist.index.packed import (
    FileSets,
    PackedEntry,
    make_symbol,
    names_of,
    raw_symbols,
    unpack,
)

UNPACKED_ENTRIES = 1024
"""Unpacked :class:`FileEntry` objects kept for ``file()`` (least recently used dropped)."""
LOOKUP_CACHE_SYMBOLS = 20_000
"""Symbols kept in the per-name ``lookup`` cache, in all; an answer with none counts one
(names the workspace does not define were cached for nothing and never dropped)."""

Stored = PackedEntry | FileEntry
"""An entry as the index holds it: packed (disk files) or whole (open buffers)."""


class SymbolTable:
    """Entries by path and the symbols by name; thread-safe under a private lock."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Path, Stored] = {}
        self._unpacked: OrderedDict[Path, FileEntry] = OrderedDict()
        self._names: FileSets[str] = FileSets()
        self._sorted_names: list[str] = []
        self._sorted_stale = False
        self._lookups: OrderedDict[str, list[Symbol]] = OrderedDict()
        self._lookup_symbols = 0
        self._installs = 0
        """Counts entry replacements: a lookup decoded outside the lock is cached only if
        none happened meanwhile."""

    def get(self, path: Path) -> Stored | None:
        """Return the entry of ``path`` as stored (packed or whole), or None."""
        with self._lock:
            return self._entries.get(path)

    def __contains__(self, path: Path) -> bool:
        with self._lock:
            return path in self._entries

    def items(self) -> list[tuple[Path, Stored]]:
        """Return every (path, stored entry), as a list taken under the lock."""
        with self._lock:
            return list(self._entries.items())

    def entry(self, path: Path) -> FileEntry | None:
        """Return the whole entry of ``path`` (unpacked through a small LRU)."""
        with self._lock:
            stored = self._entries.get(path)
            if stored is None or isinstance(stored, FileEntry):
                return stored
            entry = self._unpacked.get(path)
            if entry is not None:
                self._unpacked.move_to_end(path)
                return entry
            entry = unpack(stored, path)
            self._unpacked[path] = entry
            if len(self._unpacked) > UNPACKED_ENTRIES:
                self._unpacked.popitem(last=False)
            return entry

    def install(self, path: Path, stored: Stored | None, names: set[str] | None) -> Stored | None:
        """Replace the entry of ``path`` (None removes it) and return the old one.

        ``names``: the distinct symbol names of ``stored`` when the caller has them."""
        with self._lock:
            return self._install(path, stored, names)

    def _install(self, path: Path, stored: Stored | None, names: set[str] | None) -> Stored | None:
        old = self._entries.pop(path, None)
        self._unpacked.pop(path, None)
        self._installs += 1
        if stored is not None:
            self._entries[path] = stored
            if names is None:
                names = names_of(stored)
        else:
            names = set()
        table = self._names
        if old is not None:
            for name in names_of(old) - names:
                if table.discard(name, path):
                    self._sorted_stale = True
                if self._lookups:
                    self._forget_lookup(name)
        for name in names:
            if table.add(name, path):
                self._sorted_stale = True
            if self._lookups:
                self._forget_lookup(name)
        return old

    def lookup(self, name: str) -> list[Symbol]:
        """Return every symbol named exactly ``name`` (packed files decoded off the lock)."""
        out: list[Symbol] = []
        packed: list[tuple[Path, PackedEntry]] = []
        with self._lock:
            cached = self._lookups.get(name)
            if cached is not None:
                self._lookups.move_to_end(name)
                return list(cached)
            installs = self._installs
            for path in self._names.files(name):
                stored = self._entries.get(path)
                if isinstance(stored, PackedEntry):
                    entry = self._unpacked.get(path)
                    if entry is None:
                        packed.append((path, stored))
                        continue
                    stored = entry
                if stored is not None:
                    out.extend(s for s in stored.symbols if s.name == name)
        for path, item in packed:  # decoded outside the lock
            out.extend(make_symbol(raw, path) for raw in raw_symbols(item) if raw[0] == name)
        with self._lock:
            if installs == self._installs and len(out) <= LOOKUP_CACHE_SYMBOLS // 4:
                self._forget_lookup(name)  # another thread may have cached it meanwhile
                self._lookups[name] = out
                self._lookup_symbols += _weight(out)
                while self._lookup_symbols > LOOKUP_CACHE_SYMBOLS:
                    _, dropped = self._lookups.popitem(last=False)
                    self._lookup_symbols -= _weight(dropped)
        return list(out)

    def bounds(self) -> dict[str, Bounded]:
        """The unpacked entries and the lookup cache against their constants."""
        with self._lock:
            return {
                "symbols.unpacked": Bounded(
                    len(self._unpacked),
                    UNPACKED_ENTRIES,
                    "files",
                    "index/symbols.py UNPACKED_ENTRIES",
                ),
                "symbols.lookups": Bounded(
                    self._lookup_symbols,
                    LOOKUP_CACHE_SYMBOLS,
                    "symbols",
                    "index/symbols.py LOOKUP_CACHE_SYMBOLS",
                ),
                "symbols.lookup_names": Bounded(
                    len(self._lookups),
                    LOOKUP_CACHE_SYMBOLS,
                    "names",
                    "index/symbols.py LOOKUP_CACHE_SYMBOLS (one each at least)",
                ),
            }

    def lookup_prefix(self, prefix: str, limit: int) -> list[Symbol]:
        """Return symbols whose name starts with ``prefix`` (at most ``limit``)."""
        out: list[Symbol] = []
        names = self._sorted()
        index = bisect.bisect_left(names, prefix)
        while index < len(names) and len(out) < limit:
            name = names[index]
            if not name.startswith(prefix):
                break
            out.extend(self.lookup(name))
            index += 1
        return out[:limit]

    def _forget_lookup(self, name: str) -> None:
        dropped = self._lookups.pop(name, None)
        if dropped is not None:
            self._lookup_symbols -= _weight(dropped)

    def _sorted(self) -> list[str]:
        """Return the sorted symbol names (sorted outside the lock when they changed)."""
        with self._lock:
            if not self._sorted_stale:
                return self._sorted_names
            names = self._names.keys()
            self._sorted_stale = False
        names.sort()
        with self._lock:
            self._sorted_names = names
        return names


def _weight(symbols: list[Symbol]) -> int:
    """What a cached lookup counts against ``LOOKUP_CACHE_SYMBOLS``: its symbols, at least one."""
    return max(1, len(symbols))
