"""Edit history: per open document, its text at open and the user's recent edits.

Owns :class:`EditHistory` (one document: the text it was opened with and a bounded list
of :class:`TextChange`, each a burst of typing coalesced into one replacement) and
:class:`EditHistories` (the histories by URI: opened, recorded, dropped on close). A
burst is the run of changes that touch the previous one's inserted text within
``burst_gap_s`` of it: deleting a name and typing a new one is one change
``foo -> bar``. The list is bounded in count and in UTF-8 bytes (oldest dropped first);
nothing here is ever written to disk, and a document whose owner refuses it (a denied or
secret file) is never given a history at all.

Offsets are code points in the text *after* the change (the newest change's ``start``
and ``inserted`` locate it in the current text).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from lsp_assist.config import Bounded
from lsp_assist.documents.document import Position, TextView

__all__ = ["EditHistories", "EditHistory", "TextChange", "minimal_change"]

MAX_EDITS = 32
"""Changes kept per open document (oldest dropped first)."""
MAX_BYTES = 256 * 1024
"""UTF-8 bytes the kept changes of one open document may weigh (oldest dropped first)."""
BURST_GAP_S = 2.0


@dataclass(frozen=True, slots=True)
class TextChange:
    """One replacement: ``removed`` at ``start`` became ``inserted`` (code points)."""

    start: int
    removed: str
    inserted: str
    at: float
    """When the last keystroke of the burst happened (``time.monotonic``)."""

    @property
    def size(self) -> int:
        """The change's weight against the byte bound (UTF-8 bytes of both sides)."""
        return _utf8_len(self.removed) + _utf8_len(self.inserted)

    @property
    def end(self) -> int:
        """Where the inserted text ends in the text after the change."""
        return self.start + len(self.inserted)


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _merge(last: TextChange, start: int, removed: str, inserted: str, now: float) -> TextChange:
    """``last`` followed by a change that touches its inserted span, as one change."""
    lo = min(start, last.start)
    pre = removed[: last.start - start] if start < last.start else ""
    overhang = start + len(removed) - last.end
    post = removed[len(removed) - overhang :] if overhang > 0 else ""
    segment = pre + last.inserted + post
    cut = start - lo
    merged = segment[:cut] + inserted + segment[cut + len(removed) :]
    return TextChange(lo, pre + last.removed + post, merged, now)


def minimal_change(before: str, after: str) -> tuple[int, str, str]:
    """The smallest single replacement turning ``before`` into ``after`` (start, removed, new)."""
    limit = min(len(before), len(after))
    lo, hi = 0, limit
    while lo < hi:  # the longest common prefix, compared by slices (C speed)
        mid = (lo + hi + 1) // 2
        if before[:mid] == after[:mid]:
            lo = mid
        else:
            hi = mid - 1
    prefix = lo
    lo, hi = 0, limit - prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if before[len(before) - mid :] == after[len(after) - mid :]:
            lo = mid
        else:
            hi = mid - 1
    suffix = lo
    return prefix, before[prefix : len(before) - suffix], after[prefix : len(after) - suffix]


class EditHistory:
    """One open document's text at open and its recent changes, newest last."""

    def __init__(
        self,
        text: str,
        *,
        max_edits: int = MAX_EDITS,
        max_bytes: int = MAX_BYTES,
        burst_gap_s: float = BURST_GAP_S,
    ) -> None:
        self.opened_text = text
        """The document's text when it was opened."""
        self._max_edits = max_edits
        self._max_bytes = max_bytes
        self._gap = burst_gap_s
        self._changes: deque[TextChange] = deque()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._changes)

    def __iter__(self) -> Iterator[TextChange]:
        return iter(self._changes)

    @property
    def size(self) -> int:
        """The UTF-8 bytes the kept changes weigh (at most ``max_bytes``)."""
        return self._bytes

    def last(self) -> TextChange | None:
        """The newest change (the current burst), or None."""
        return self._changes[-1] if self._changes else None

    def changes(self) -> list[TextChange]:
        """The kept changes, oldest first."""
        return list(self._changes)

    def record(self, start: int, removed: str, inserted: str, now: float | None = None) -> None:
        """Record one replacement, coalesced into the current burst when it continues it."""
        if not removed and not inserted:
            return
        now = time.monotonic() if now is None else now
        last = self.last()
        if (
            last is not None
            and now - last.at <= self._gap
            and start <= last.end
            and start + len(removed) >= last.start
        ):
            self._pop()
            change = _merge(last, start, removed, inserted, now)
            if change.removed == change.inserted:
                return  # the burst undid itself
        else:
            change = TextChange(start, removed, inserted, now)
        if change.size > self._max_bytes:
            self._changes.clear()  # older offsets no longer line up with a dropped change
            self._bytes = 0
            return
        self._changes.append(change)
        self._bytes += change.size
        while len(self._changes) > self._max_edits or self._bytes > self._max_bytes:
            self._bytes -= self._changes.popleft().size

    def _pop(self) -> None:
        self._bytes -= self._changes.pop().size

    def break_burst(self) -> None:
        """End the current burst: the next change starts a new one (an accepted next edit)."""
        last = self.last()
        if last is not None:
            self._pop()
            self._changes.append(TextChange(last.start, last.removed, last.inserted, -1e18))
            self._bytes += last.size


class EditHistories:
    """The edit histories of the open documents, by URI (never on disk)."""

    def __init__(
        self,
        *,
        max_edits: int = MAX_EDITS,
        max_bytes: int = MAX_BYTES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._histories: dict[str, EditHistory] = {}
        self._max_edits = max_edits
        self._max_bytes = max_bytes
        self._clock = clock

    def __contains__(self, uri: object) -> bool:
        return uri in self._histories

    def __len__(self) -> int:
        return len(self._histories)

    def bounds(self) -> dict[str, Bounded]:
        """The kept changes and their bytes, against ``MAX_EDITS``/``MAX_BYTES`` per document."""
        histories = list(self._histories.values())
        where = "documents/history.py {} per open document"
        return {
            "edit_histories.changes": Bounded(
                sum(map(len, histories)),
                len(histories) * self._max_edits,
                "changes",
                where.format("MAX_EDITS"),
            ),
            "edit_histories.bytes": Bounded(
                sum(h.size for h in histories),
                len(histories) * self._max_bytes,
                "bytes",
                where.format("MAX_BYTES"),
            ),
        }

    def get(self, uri: str) -> EditHistory | None:
        """The history of an open document (None: not open, or refused)."""
        return self._histories.get(uri)

    def open(self, uri: str, text: str) -> None:
        """Start the history of a document just opened (a reopen starts afresh)."""
        self._histories[uri] = EditHistory(
            text, max_edits=self._max_edits, max_bytes=self._max_bytes
        )

    def drop(self, uri: str) -> None:
        """Forget a document's history (closed, or its file became one to refuse)."""
        self._histories.pop(uri, None)

    def record(
        self,
        uri: str,
        before: TextView,
        after: TextView,
        start: Position | None,
        end: Position | None,
    ) -> None:
        """Record one applied change of ``uri`` (``start``/``end`` None: the whole text)."""
        history = self._histories.get(uri)
        if history is None:
            return
        if start is None or end is None:
            offset, removed, inserted = minimal_change(before.text, after.text)
        else:
            lo = before.clamp(start.line, start.column)
            hi = before.clamp(end.line, end.column)
            offset = before.offset_at(lo)
            stop = before.offset_at(hi)
            removed = before.text[offset:stop]
            grown = len(after.text) - len(before.text)
            inserted = after.text[offset : stop + grown]
        history.record(offset, removed, inserted, self._clock())
