"""Cache: the byte-capped LRU of text and syntax trees of files that are not open.

Owns the memory bound: each entry costs an estimate of its source bytes, decoded
text and tree (:data:`TREE_FACTOR` x the source size); the least recently used
entries are evicted past ``capacity`` bytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import tree_sitter

from lsp_assist.config import Bounded

TREE_FACTOR = 24
"""Estimated tree memory per source byte (measured ~23x for Python with tree-sitter 0.26)."""


@dataclass(slots=True)
class CachedFile:
    """The cached state of one file."""

    src: bytes
    tree: tree_sitter.Tree | None
    text: str | None
    content_hash: str
    stamp: tuple[int, int] = (0, 0)
    """(size, mtime_ns) of the file when read: a different stat means a stale entry."""

    def cost(self) -> int:
        """Return the estimated memory of this entry in bytes."""
        size = len(self.src)
        return (
            size
            + (size * TREE_FACTOR if self.tree is not None else 0)
            + (len(self.text) if self.text is not None else 0)
        )


class FileCache:
    """A thread-safe LRU of :class:`CachedFile` bounded by estimated bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._items: OrderedDict[Path, CachedFile] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    @property
    def bytes_used(self) -> int:
        """Estimated bytes held now."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._items)

    def bounds(self) -> dict[str, Bounded]:
        """The estimated bytes held against the cap (``fileCacheMb``)."""
        with self._lock:
            return {"index.file_cache": Bounded(self._bytes, self.capacity, "bytes", "fileCacheMb")}

    def get(self, path: Path) -> CachedFile | None:
        """Return the cached file (marking it recently used) or None."""
        with self._lock:
            item = self._items.get(path)
            if item is not None:
                self._items.move_to_end(path)
            return item

    def put(self, path: Path, item: CachedFile) -> None:
        """Insert or replace an entry, evicting the least recently used past the cap."""
        cost = item.cost()
        with self._lock:
            old = self._items.pop(path, None)
            if old is not None:
                self._bytes -= old.cost()
            if cost > self.capacity:
                return
            self._items[path] = item
            self._bytes += cost
            while self._bytes > self.capacity and self._items:
                _, evicted = self._items.popitem(last=False)
                self._bytes -= evicted.cost()

    def update_text(self, path: Path, text: str) -> None:
        """Attach decoded text to an entry (its cost grows accordingly)."""
        with self._lock:
            item = self._items.get(path)
            if item is None or item.text is not None:
                return
            self._bytes -= item.cost()
            item.text = text
            self._bytes += item.cost()

    def discard(self, path: Path) -> None:
        """Drop one entry if present."""
        with self._lock:
            old = self._items.pop(path, None)
            if old is not None:
                self._bytes -= old.cost()

    def clear(self) -> None:
        """Drop everything."""
        with self._lock:
            self._items.clear()
            self._bytes = 0
