"""Syntax trees for the context engine: parsers per language and an incremental tree cache.

Parsers come from ``lsp_assist.index.languages`` (one per thread). The cache keeps the
last tree of each file and reparses a changed text incrementally (one edit spanning the
changed bytes), so a keystroke in a 3,000-line file costs a few milliseconds, not a full parse.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Parser, Tree

from lsp_assist.config import Bounded
from lsp_assist.documents import canonical_language
from lsp_assist.errors import IndexError_
from lsp_assist.index import languages
from lsp_assist.index.cache import TREE_FACTOR

log = logging.getLogger(__name__)


def get_parser(language: str) -> Parser | None:
    """Return this thread's tree-sitter parser for ``language``, or None without a grammar.

    Parsers are not thread-safe; ``lsp_assist.index.languages`` keeps one per thread.
    """
    try:
        return languages.get_parser(canonical_language(language))
    except IndexError_:
        return None


def _point(data: bytes, offset: int) -> tuple[int, int]:
    row = data.count(b"\n", 0, offset)
    start = data.rfind(b"\n", 0, offset) + 1
    return row, offset - start


def _diff(old: bytes, new: bytes) -> tuple[int, int, int]:
    """Return (start, old_end, new_end) of the single edit turning ``old`` into ``new``."""
    limit = min(len(old), len(new))
    start = 0
    step = 4096
    while start + step <= limit and old[start : start + step] == new[start : start + step]:
        start += step
    while start < limit and old[start] == new[start]:
        start += 1
    end_old, end_new = len(old), len(new)
    while (
        end_old - step >= start
        and end_new - step >= start
        and old[end_old - step : end_old] == new[end_new - step : end_new]
    ):
        end_old -= step
        end_new -= step
    while end_old > start and end_new > start and old[end_old - 1] == new[end_new - 1]:
        end_old -= 1
        end_new -= 1
    return start, end_old, end_new


@dataclass(slots=True)
class _Entry:
    data: bytes
    tree: Tree


CONTEXT_TREES = 64
"""Files whose last syntax tree the context engine keeps (least recently used dropped)."""
CONTEXT_TREE_BYTES = 64 * 1024 * 1024
"""Estimated bytes those trees may hold in all (source x (1 + ``TREE_FACTOR``))."""


def _cost(entry: _Entry) -> int:
    return len(entry.data) * (1 + TREE_FACTOR)


class TreeCache:
    """The last syntax tree of each file, reparsed incrementally when its text changes."""

    def __init__(self, max_files: int | None = None, max_bytes: int | None = None) -> None:
        self.max_files = CONTEXT_TREES if max_files is None else max_files
        self.max_bytes = CONTEXT_TREE_BYTES if max_bytes is None else max_bytes
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def _store(self, key: tuple[str, str], entry: _Entry) -> None:
        """Keep ``entry`` under ``key`` (newest), dropping the oldest past either bound (a
        tree larger than the byte bound on its own is not kept)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= _cost(old)
        self._entries[key] = entry
        self._bytes += _cost(entry)
        while self._entries and (
            len(self._entries) > self.max_files or self._bytes > self.max_bytes
        ):
            _, dropped = self._entries.popitem(last=False)
            self._bytes -= _cost(dropped)

    def bounds(self) -> dict[str, Bounded]:
        """The trees kept against ``CONTEXT_TREES`` and ``CONTEXT_TREE_BYTES``."""
        with self._lock:
            files, size = len(self._entries), self._bytes
        where = "context/syntax.py {}"
        return {
            "trees.files": Bounded(files, self.max_files, "files", where.format("CONTEXT_TREES")),
            "trees.bytes": Bounded(
                size, self.max_bytes, "bytes", where.format("CONTEXT_TREE_BYTES")
            ),
        }

    def has(self, path: Path, language: str) -> bool:
        """True when a tree of ``path`` is cached (whatever its text)."""
        with self._lock:
            return (str(path), language) in self._entries

    def put(self, path: Path, language: str, text: str, tree: Tree) -> None:
        """Cache ``tree`` as the tree of ``text`` (a copy the cache may edit in place)."""
        with self._lock:
            self._store((str(path), language), _Entry(data=text.encode("utf-8"), tree=tree))

    def tree(self, path: Path, language: str, text: str) -> Tree | None:
        """Return the tree of ``text`` (None when the language has no grammar)."""
        parser = get_parser(language)
        if parser is None:
            return None
        data = text.encode("utf-8")
        key = (str(path), language)
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                if entry.data == data:
                    return entry.tree
            old_tree = None
            if entry is not None:
                old = entry.data
                start, end_old, end_new = _diff(old, data)
                old_tree = entry.tree
                old_tree.edit(
                    start_byte=start,
                    old_end_byte=end_old,
                    new_end_byte=end_new,
                    start_point=_point(old, start),
                    old_end_point=_point(old, end_old),
                    new_end_point=_point(data, end_new),
                )
            tree = parser.parse(data, old_tree) if old_tree is not None else parser.parse(data)
            self._store(key, _Entry(data=data, tree=tree))
            return tree
