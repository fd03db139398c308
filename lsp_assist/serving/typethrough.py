"""The type-through cache: serve the rest of a suggestion while the user types into it.

When a suggestion is shown and the user types characters that match its start, the
editor asks again; the remainder is already known, so it is answered from here without
the model. Entries are keyed by the document URI and the context the suggestion was made
for: the text before its start position (length and hash) and the text after the cursor
(hash). A lookup matches an entry when the new text before the cursor is the entry's
prefix plus typed characters that are a strict prefix of the suggestion, and the text
after the cursor is unchanged, or changed only by one or two closers the editor
auto-inserted (the remainder then leaves out its own copy of them). Only hashes are
stored, never the document text.

:class:`TypeThrough` is the feature's one owner: the cache, the suggestions still being
written by an early-answered generation (``begin``/``grow``/``end``) and the wait of a
keystroke that typed all of one (``wait_for_more``, on a condition, not a poll).

Kept lines: a single-line generation may write on past the shown line (serving/kept.py);
those lines are kept in the same entry after the suggestion (``kept``, starting with its
line break). Typed into, the kept part is answered one line at a time: at the end of a
line the line break and the next kept line (a ghost line below: Tab takes both), after
Enter (and the editor's auto-indent) the rest of that line.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Container, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from lsp_assist.config import Bounded
from lsp_assist.documents import DocumentSnapshot, Position

log = logging.getLogger(__name__)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryKey:
    """What a suggestion was made for: the URI, the text before the cursor (length, hash), after."""

    uri: str
    prefix_len: int
    prefix_hash: bytes
    suffix_hash: bytes


_AUTO_CLOSERS = frozenset(")]}\"'`")


@dataclass(frozen=True, slots=True)
class _Entry:
    """A suggestion and the lines kept after it ('' none; else starting with a line break)."""

    text: str
    kept: str = ""

    @property
    def full(self) -> str:
        """The suggestion and its kept lines: everything a user may type through."""
        return self.text + self.kept


def _suffix_variants(suffix_text: str) -> list[tuple[str, bytes]]:
    """Return (auto-inserted closers, hash of the rest) for the suffix as it may have been."""
    variants = [("", _digest(suffix_text))]
    for k in (1, 2):
        head = suffix_text[:k]
        if len(head) == k and set(head) <= _AUTO_CLOSERS:
            variants.append((head, _digest(suffix_text[k:])))
    return variants


def _next_line(rest: str) -> str:
    """What kept lines show from ``rest``: the rest of the line, or at a line's end the
    line break and the next line (a ghost line below the cursor), one line at a time."""
    if rest.startswith("\n"):
        return "\n" + rest[1:].split("\n", 1)[0]
    return rest.split("\n", 1)[0]


class TypeThroughCache:
    """An LRU of recent suggestions by context; counts hits and misses. Thread-safe."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(1, max_entries)
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[EntryKey, _Entry] = OrderedDict()
        self._by_uri: dict[str, set[EntryKey]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    @staticmethod
    def key(uri: str, prefix_text: str, suffix_text: str) -> EntryKey:
        """Return the entry key of a suggestion made with this text before and after the cursor."""
        return EntryKey(
            uri=uri,
            prefix_len=len(prefix_text),
            prefix_hash=_digest(prefix_text),
            suffix_hash=_digest(suffix_text),
        )

    def put(self, uri: str, prefix_text: str, suffix_text: str, suggestion: str) -> None:
        """Remember ``suggestion`` made with ``prefix_text`` before and ``suffix_text`` after."""
        self.put_at(self.key(uri, prefix_text, suffix_text), suggestion)

    def put_at(self, key: EntryKey, suggestion: str, kept: str = "") -> None:
        """Remember ``suggestion`` (and the ``kept`` lines after it, starting with a line
        break) under a key from :meth:`key` (a growing one: no rehashing)."""
        if not suggestion:
            return
        uri = key.uri
        with self._lock:
            self._entries[key] = _Entry(suggestion, kept if kept.startswith("\n") else "")
            self._entries.move_to_end(key)
            self._by_uri.setdefault(uri, set()).add(key)
            while len(self._entries) > self.max_entries:
                old, _ = self._entries.popitem(last=False)
                self._forget(old)

    def drop(self, key: EntryKey) -> None:
        """Forget the suggestion under ``key``, if any."""
        with self._lock:
            if self._entries.pop(key, None) is not None:
                self._forget(key)

    def get(self, uri: str, prefix_text: str, suffix_text: str) -> str | None:
        """Return the rest of a cached suggestion the user is typing through, or None.

        With kept lines, the answer at a line's end starts with the line break.
        """
        with self._lock:
            found = self._lookup(uri, prefix_text, suffix_text)
            if found is None:
                self.misses += 1
                return None
            key, remainder = found
            self._entries.move_to_end(key)
            self.hits += 1
            return remainder

    def typed_through(
        self,
        uri: str,
        prefix_text: str,
        suffix_text: str,
        among: Container[EntryKey] | None = None,
    ) -> EntryKey | None:
        """The entry (of ``among``, if given) the user has typed exactly all of (no counters).

        A suggestion still being written (an early answer) may then grow: the scheduler
        waits for that instead of sending the keystroke to the model (``TypeThrough``).
        """
        n = len(prefix_text)
        suffix_hash = _digest(suffix_text)
        with self._lock:
            for key in self._by_uri.get(uri, ()):
                if among is not None and key not in among:
                    continue
                suggestion = self._entries[key].full
                if n - key.prefix_len != len(suggestion) or key.suffix_hash != suffix_hash:
                    continue
                if prefix_text[key.prefix_len :] != suggestion:
                    continue
                if _digest(prefix_text[: key.prefix_len]) == key.prefix_hash:
                    return key
        return None

    def peek(self, key: EntryKey) -> str:
        """The suggestion under ``key`` and its kept lines ("" if none), leaving the order
        and counters alone."""
        with self._lock:
            entry = self._entries.get(key)
            return "" if entry is None else entry.full

    def _lookup(self, uri: str, prefix_text: str, suffix_text: str) -> tuple[EntryKey, str] | None:
        keys = self._by_uri.get(uri)
        if not keys:
            return None
        n = len(prefix_text)
        suffixes: list[tuple[str, bytes]] | None = None
        prefix_hashes: dict[int, bytes] = {}
        # The most recent context first: the longest prefix the user has not typed past.
        for key in sorted(keys, key=lambda k: k.prefix_len, reverse=True):
            entry = self._entries[key]
            suggestion = entry.full
            typed_len = n - key.prefix_len
            if typed_len < 0 or typed_len >= len(suggestion):
                continue
            if not suggestion.startswith(prefix_text[key.prefix_len :]):
                continue
            if suffixes is None:
                suffixes = _suffix_variants(suffix_text)
            inserted = next((ins for ins, h in suffixes if h == key.suffix_hash), None)
            if inserted is None:
                continue
            if key.prefix_len not in prefix_hashes:
                prefix_hashes[key.prefix_len] = _digest(prefix_text[: key.prefix_len])
            if prefix_hashes[key.prefix_len] != key.prefix_hash:
                continue
            if typed_len >= len(entry.text):
                if inserted:
                    continue  # the kept lines were written for the text after as it was
                return key, _next_line(suggestion[typed_len:])
            remainder = entry.text[typed_len:]
            if inserted:
                # The editor auto-closed what the user typed: the suggestion's own closer
                # is now right of the cursor, so leave it out of the remainder.
                if not remainder.endswith(inserted) or remainder == inserted:
                    continue
                remainder = remainder[: -len(inserted)]
            return key, remainder
        return None

    def _forget(self, key: EntryKey) -> None:
        keys = self._by_uri.get(key.uri)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_uri[key.uri]

    def invalidate(self, uri: str) -> None:
        """Drop every entry of ``uri`` (closed or replaced document)."""
        with self._lock:
            for key in self._by_uri.pop(uri, set()):
                self._entries.pop(key, None)

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._entries.clear()
            self._by_uri.clear()
            self.hits = self.misses = 0

    def stats(self) -> dict[str, int]:
        """Return entries, hits and misses."""
        return {"entries": len(self._entries), "hits": self.hits, "misses": self.misses}


class TypeThrough:
    """Type-through in one place: the cache, and the suggestions still being written.

    The engine looks a request up here (``lookup``) and, for a generation that may
    answer early, marks its entry as being written (``begin``) until it ends (``end``);
    the early answer only ``grow``s the entry. A keystroke that typed all of what an
    entry holds while it is still being written waits for more (``wait_for_more``, on a
    condition the writer notifies: no polling). Thread-safe: the event loop looks up,
    the model thread writes.
    """

    def __init__(self, max_entries: int) -> None:
        self.cache = TypeThroughCache(max_entries)
        self._changed = threading.Condition()
        """Notified when an entry being written grows or ends (guards ``_writing``)."""
        self._writing: dict[EntryKey, int] = {}
        """Entries being written, with how many generations write each."""
        self._nothing: OrderedDict[EntryKey, None] = OrderedDict()
        """Places whose last whole suggestion post-processing found nothing in (bounded
        like the cache): an early answer there would show a start that is dropped again."""

    def __len__(self) -> int:
        return len(self.cache)

    @property
    def hits(self) -> int:
        """Requests served from the cache."""
        return self.cache.hits

    @property
    def misses(self) -> int:
        """Lookups the cache could not answer."""
        return self.cache.misses

    def stats(self) -> dict[str, int]:
        """Return entries, hits and misses."""
        return self.cache.stats()

    def bounds(self) -> dict[str, Bounded]:
        """The entries, and the places that found nothing, against ``cacheEntries``."""
        bound = self.cache.max_entries
        with self._changed:
            nothing = len(self._nothing)
        return {
            "typethrough.entries": Bounded(len(self.cache), bound, "suggestions", "cacheEntries"),
            "typethrough.nothing": Bounded(nothing, bound, "places", "cacheEntries"),
        }

    @staticmethod
    def key(snapshot: DocumentSnapshot, pos: Position) -> EntryKey:
        """The entry of a suggestion made at ``pos`` of ``snapshot`` (its text split there)."""
        offset = snapshot.offset_at(pos)
        text = snapshot.text
        return TypeThroughCache.key(snapshot.uri, text[:offset], text[offset:])

    def lookup(self, snapshot: DocumentSnapshot, pos: Position) -> str | None:
        """The rest of a suggestion the user is typing through at ``pos``, or None (counted)."""
        offset = snapshot.offset_at(pos)
        text = snapshot.text
        return self.cache.get(snapshot.uri, text[:offset], text[offset:])

    def begin(self, key: EntryKey) -> None:
        """A suggestion starts being written under ``key`` (its text comes by ``grow``)."""
        with self._changed:
            self._writing[key] = self._writing.get(key, 0) + 1

    def grow(self, key: EntryKey, text: str, kept: str = "") -> None:
        """The suggestion under ``key`` is now ``text`` (longer as it is written), with the
        lines ``kept`` after it so far: waiters wake."""
        with self._changed:
            self.cache.put_at(key, text, kept)
            self._changed.notify_all()

    def put(self, key: EntryKey, text: str, kept: str = "") -> None:
        """Remember a finished suggestion under ``key`` (and the lines ``kept`` after it):
        the whole text replaces what grew there; an empty one (post-processing found
        nothing that fits) drops the entry."""
        with self._changed:
            if text:
                self.cache.put_at(key, text, kept)
                self._nothing.pop(key, None)
            else:
                self.cache.drop(key)
                self._nothing[key] = None
                self._nothing.move_to_end(key)
                while len(self._nothing) > self.cache.max_entries:
                    self._nothing.popitem(last=False)
            self._changed.notify_all()

    def found_nothing(self, key: EntryKey) -> bool:
        """True when the last whole suggestion put under ``key`` was empty (nothing fits)."""
        with self._changed:
            return key in self._nothing

    @contextmanager
    def writing(self, key: EntryKey) -> Iterator[None]:
        """``begin`` now, ``end`` on leaving: a generation writing the suggestion under ``key``."""
        self.begin(key)
        try:
            yield
        finally:
            self.end(key)

    def end(self, key: EntryKey) -> None:
        """The suggestion under ``key`` is written (or was cancelled): waiters wake."""
        with self._changed:
            left = self._writing.get(key, 0) - 1
            if left > 0:
                self._writing[key] = left
            else:
                self._writing.pop(key, None)
            self._changed.notify_all()

    def typed_through(
        self, snapshot: DocumentSnapshot, pos: Position
    ) -> tuple[EntryKey, int] | None:
        """The entry still being written of which the user typed exactly all, and its length.

        Its suggestion may grow: the scheduler waits for that (``wait_for_more``)
        instead of sending the keystroke to the model. No counters change.
        """
        offset = snapshot.offset_at(pos)
        text = snapshot.text
        with self._changed:
            if not self._writing:
                return None
            found = self.cache.typed_through(
                snapshot.uri, text[:offset], text[offset:], among=self._writing
            )
            return None if found is None else (found, offset - found.prefix_len)

    def wait_for_more(self, key: EntryKey, timeout: float, *, than: int | None = None) -> bool:
        """Block until the suggestion under ``key`` holds more than ``than`` characters.

        ``than`` defaults to what it holds now. Returns True when it does, False when
        ``timeout`` seconds passed or its writing ended without it (woken by ``grow``
        and ``end``, never by a poll).
        """
        with self._changed:
            shown = len(self.cache.peek(key)) if than is None else than

            def more_or_done() -> bool:
                return len(self.cache.peek(key)) > shown or key not in self._writing

            self._changed.wait_for(more_or_done, timeout)
            return len(self.cache.peek(key)) > shown

    def invalidate(self, uri: str) -> None:
        """Drop every entry of ``uri`` (closed or replaced document)."""
        self.cache.invalidate(uri)
        with self._changed:
            for key in [k for k in self._nothing if k.uri == uri]:
                del self._nothing[key]

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        self.cache.clear()
        with self._changed:
            self._nothing.clear()
