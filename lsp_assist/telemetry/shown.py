"""Shown suggestions: what became of each inline item an editor showed (docs/telemetry.md).

Owns the per-item outcome. The server offers items (:meth:`ShownSuggestions.offer`,
each with the request's place and the line's text before it, kept in memory only);
the editor says which one it showed (``textDocument/didShowCompletion``), how much of
it was taken by a partial accept (``textDocument/didPartiallyAcceptCompletion``: the
length in UTF-16 units from the start of the item's text to the end of what was
accepted, as Copilot's clients send it), that it took all of it (the item's
command) or that the user dismissed it (``lspAssist/didDismissCompletion``). The next
item shown in the same document says how the one before ended: continued (the user
typed through part of it, or an early answer grew in place, and the new item goes on
with its text: the two are one suggestion), typed over (the user typed something else
on its line, seen as the document changes, or all of it), or superseded (another
suggestion, another place). A suggestion whose
end nobody saw (the document closed, the session ended) is ``ignored``.

One :class:`ShownRecord` per shown suggestion is written when its outcome is known.
The LSP handlers call it on the event loop and the session's close on a thread of its
own: one lock around each call.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

SHOWN_EVENT = "shown"
"""The ``event`` of a shown suggestion's line in the metrics log."""

OUTCOMES = ("accepted", "typed_over", "dismissed", "superseded", "ignored")
"""How a shown suggestion ended, in the order ``lsp-assist stats`` lists them."""

ITEM_SEPARATOR = "."
"""Between a request id and an alternative's number in an item id (``3f2a.1``)."""

MAX_OFFERED = 256
"""Items offered but not (yet) shown that are remembered; older ones are forgotten."""


def item_id(request_id: str, index: int) -> str:
    """Return the id of item ``index`` of a request's answer (the first is the request id)."""
    return request_id if index == 0 else f"{request_id}{ITEM_SEPARATOR}{index}"


def request_of(item: str) -> str:
    """Return the request id an item id belongs to."""
    return item.split(ITEM_SEPARATOR, 1)[0]


def utf16_len(text: str) -> int:
    """Return the length of ``text`` in UTF-16 code units (LSP's default measure)."""
    return len(text.encode("utf-16-le")) // 2


def trigger_kind(trigger: str) -> str:
    """Return the stats' trigger for a query's trigger: ``invoked`` is ``explicit``."""
    return "explicit" if trigger == "invoked" else trigger


@dataclass(frozen=True, slots=True, kw_only=True)
class OfferedItem:
    """An item the server answered with, as the tracker needs it (nothing of it is written)."""

    item: str
    request_id: str
    uri: str
    line: int
    column: int
    """The cursor in code points."""
    before: str
    """The line's text before the cursor when the request was made (memory only)."""
    text: str
    after: str = ""
    """The line's text after the cursor then (memory only)."""
    trigger: str
    """``automatic`` or ``explicit`` (:func:`trigger_kind`)."""
    model: str
    language: str = ""


@dataclass(kw_only=True)
class ShownRecord:
    """One shown suggestion and how it ended (a line of the metrics log)."""

    ts: float = field(default_factory=time.time)
    """When its outcome was known (unix seconds)."""
    item: str = ""
    """The id of the first item shown."""
    request_id: str = ""
    trigger: str = ""
    model: str = ""
    language: str = ""
    outcome: str = "ignored"
    """One of :data:`OUTCOMES`."""
    items: int = 1
    """Items shown for it: more when typing through or an early answer's rest continued it."""
    shown_chars: int = 0
    """Its length in UTF-16 units (the longest it grew to, from its start)."""
    accepted_chars: int = 0
    """UTF-16 units from its start to the end of what was accepted (Copilot's
    ``acceptedLength``; characters typed through before an accept are inside it)."""
    shown_ms: float = 0.0
    """From the first show to the outcome."""

    @property
    def partial(self) -> bool:
        """Part of it was accepted, not all of it."""
        return self.accepted_chars > 0 and self.outcome != "accepted"

    def to_json(self) -> dict[str, Any]:
        """Return the log line's object."""
        return {
            "event": SHOWN_EVENT,
            "ts": round(self.ts, 6),
            "item": self.item,
            "request_id": self.request_id,
            "trigger": self.trigger,
            "model": self.model,
            "language": self.language,
            "outcome": self.outcome,
            "items": self.items,
            "shown_chars": self.shown_chars,
            "accepted_chars": self.accepted_chars,
            "shown_ms": round(self.shown_ms, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ShownRecord:
        """Return a record from a log object; bad values are defaulted."""
        record = cls()
        for name in ("item", "request_id", "trigger", "model", "language", "outcome"):
            if isinstance(data.get(name), str):
                setattr(record, name, data[name])
        for name in ("items", "shown_chars", "accepted_chars"):
            value = data.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(record, name, value)
        for name in ("ts", "shown_ms"):
            value = data.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(record, name, float(value))
        if record.outcome not in OUTCOMES:
            record.outcome = "ignored"
        return record


@dataclass(eq=False)
class _Suggestion:
    """A shown suggestion still open: its first item, the latest, and how far it got."""

    root: OfferedItem
    current: OfferedItem
    items: dict[str, OfferedItem]
    offsets: dict[str, int]
    """Each item's start in UTF-16 units from the first item's start."""
    shown_at: float
    shown_chars: int
    accepted_chars: int = 0


class ShownSuggestions:
    """The per-item outcome of the items an editor showed; one record per suggestion."""

    def __init__(
        self,
        write: Callable[[ShownRecord], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        max_offered: int = MAX_OFFERED,
    ) -> None:
        self._write = write
        self._clock = clock
        self._max_offered = max_offered
        self._offered: OrderedDict[str, OfferedItem] = OrderedDict()
        self._open: dict[str, _Suggestion] = {}
        """The open suggestion of each document, by URI."""
        self._by_item: dict[str, _Suggestion] = {}
        self._lock = threading.RLock()

    def offer(self, item: OfferedItem) -> None:
        """Remember an item the server answered with, so a show or an accept can name it."""
        with self._lock:
            self._offered[item.item] = item
            self._offered.move_to_end(item.item)
            while len(self._offered) > self._max_offered:
                self._offered.popitem(last=False)

    def shown(self, item: str) -> bool:
        """The editor showed ``item``; False when it is unknown (or shows already)."""
        with self._lock:
            if item in self._by_item:
                return False
            offered = self._offered.pop(item, None)
            if offered is None:
                return False
            now = self._clock()
            previous = self._open.get(offered.uri)
            if previous is not None:
                hop = _continues(previous.current, offered)
                if hop is not None:
                    start = previous.offsets[previous.current.item] + hop
                    previous.offsets[offered.item] = start
                    previous.items[offered.item] = offered
                    previous.current = offered
                    previous.shown_chars = max(
                        previous.shown_chars, start + utf16_len(offered.text)
                    )
                    self._by_item[offered.item] = previous
                    return True
                self._end(previous, _ending(previous.current, offered), now)
            suggestion = _Suggestion(
                root=offered,
                current=offered,
                items={offered.item: offered},
                offsets={offered.item: 0},
                shown_at=now,
                shown_chars=utf16_len(offered.text),
            )
            self._open[offered.uri] = suggestion
            self._by_item[offered.item] = suggestion
            return True

    def partially_accepted(self, item: str, accepted_length: int) -> bool:
        """The editor inserted ``item``'s first ``accepted_length`` UTF-16 units (so far)."""
        with self._lock:
            suggestion = self._showing(item)
            if suggestion is None or accepted_length <= 0:
                return False
            end = suggestion.offsets[item] + accepted_length
            suggestion.accepted_chars = max(suggestion.accepted_chars, end)
            return True

    def accepted(self, item: str) -> bool:
        """The editor inserted all of ``item`` (its command ran)."""
        with self._lock:
            suggestion = self._showing(item)
            if suggestion is None:
                return False
            end = suggestion.offsets[item] + utf16_len(suggestion.items[item].text)
            suggestion.accepted_chars = max(suggestion.accepted_chars, end)
            self._end(suggestion, "accepted", self._clock())
            return True

    def dismissed(self, item: str) -> bool:
        """The user dismissed ``item`` (lsp-assist's clients say so; Copilot's do not)."""
        with self._lock:
            suggestion = self._by_item.get(item)
            if suggestion is None:
                return False
            self._end(suggestion, "dismissed", self._clock())
            return True

    def edited(self, uri: str, line_text: Callable[[int], str]) -> None:
        """The document changed: when its shown suggestion's line now holds, between
        the text that was before and after the cursor, something that does not start the
        suggestion, the user typed over it. ``line_text(n)`` is line ``n`` as it is now."""
        with self._lock:
            suggestion = self._open.get(uri)
            if suggestion is None:
                return
            current = suggestion.current
            line = line_text(current.line)
            inner = len(line) - len(current.after)
            if inner < len(current.before) or not line.startswith(current.before):
                return  # changed elsewhere on the line (or the line moved): no conclusion
            if not line.endswith(current.after):
                return
            typed = line[len(current.before) : inner]
            if typed and not current.text.startswith(typed):
                self._end(suggestion, "typed_over", self._clock())

    def closed(self, uri: str) -> None:
        """The document closed: its open suggestion ends unseen."""
        with self._lock:
            suggestion = self._open.get(uri)
            if suggestion is not None:
                self._end(suggestion, "ignored", self._clock())

    def close(self) -> None:
        """The session ends: every open suggestion is written as ``ignored``."""
        with self._lock:
            now = self._clock()
            for suggestion in list(self._open.values()):
                self._end(suggestion, "ignored", now)
            self._offered.clear()

    def _showing(self, item: str) -> _Suggestion | None:
        """The open suggestion ``item`` belongs to; an accept of an item never shown shows it."""
        if item not in self._by_item and item in self._offered:
            self.shown(item)  # a client that does not send didShowCompletion
        return self._by_item.get(item)

    def _end(self, suggestion: _Suggestion, outcome: str, now: float) -> None:
        root = suggestion.root
        if self._open.get(root.uri) is suggestion:
            del self._open[root.uri]
        for name in suggestion.offsets:
            self._by_item.pop(name, None)
        self._write(
            ShownRecord(
                item=root.item,
                request_id=root.request_id,
                trigger=root.trigger,
                model=root.model,
                language=root.language,
                outcome=outcome,
                items=len(suggestion.offsets),
                shown_chars=suggestion.shown_chars,
                accepted_chars=min(suggestion.accepted_chars, suggestion.shown_chars),
                shown_ms=max(0.0, (now - suggestion.shown_at) * 1000.0),
            )
        )


def _typed_since(old: OfferedItem, new: OfferedItem) -> str | None:
    """What was typed on ``old``'s line between its place and ``new``'s; None: elsewhere."""
    if new.line != old.line or new.column < old.column or not new.before.startswith(old.before):
        return None
    return new.before[old.column :]


def _continues(old: OfferedItem, new: OfferedItem) -> int | None:
    """UTF-16 units from ``old``'s start to ``new``'s when ``new`` goes on with ``old``'s text.

    That is: the text typed since is the start of ``old``'s, and ``new``'s text and the
    rest of ``old``'s agree (one starts the other: typed through, or grown in place).
    """
    typed = _typed_since(old, new)
    if typed is None or not old.text.startswith(typed):
        return None
    rest = old.text[len(typed) :]
    if not rest or not (rest.startswith(new.text) or new.text.startswith(rest)):
        return None
    return utf16_len(typed)


def _ending(old: OfferedItem, new: OfferedItem) -> str:
    """How ``old`` ended when ``new`` showed and does not continue it."""
    typed = _typed_since(old, new)
    if typed is not None and typed and not old.text.startswith(typed):
        return "typed_over"
    if typed is not None and typed and typed == old.text:
        return "typed_over"  # typed all of it
    return "superseded"
