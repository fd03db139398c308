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

from lsp_assist.documents import canonical_language
from lsp_assist.errors import IndexError_
from lsp_assist.index import languages

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


class TreeCache:
    """The last syntax tree of each file, reparsed incrementally when its text changes."""

    def __init__(self, max_files: int = 64) -> None:
        self.max_files = max_files
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()
        self._lock = threading.Lock()

    def has(self, path: Path, language: str) -> bool:
        """True when a tree of ``path`` is cached (whatever its text)."""
        with self._lock:
            return (str(path), language) in self._entries

    def put(self, path: Path, language: str, text: str, tree: Tree) -> None:
        """Cache ``tree`` as the tree of ``text`` (a copy the cache may edit in place)."""
        with self._lock:
            self._entries[(str(path), language)] = _Entry(data=text.encode("utf-8"), tree=tree)
            if len(self._entries) > self.max_files:
                self._entries.popitem(last=False)

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
            self._entries[key] = _Entry(data=data, tree=tree)
            if len(self._entries) > self.max_files:
                self._entries.popitem(last=False)
            return tree
