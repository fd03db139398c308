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
With the session's documents (``document_of``) it also measures what users keep
(telemetry/retention.py): each accept's text is followed through the document's edits
(:meth:`ShownSuggestions.changed`) and :data:`~lsp_assist.telemetry.retention.RETAIN_AFTER_S`
later (:meth:`ShownSuggestions.measure_due`, on a timer the server sets) a
:class:`~lsp_assist.telemetry.retention.RetainedRecord` says how much of it is still
there; and it counts the keys (document changes) of the documents the client asked
inline completions for (:meth:`ShownSuggestions.asked`) after which nothing showed
(:class:`~lsp_assist.telemetry.retention.KeysRecord`).
The LSP handlers call it on the event loop and the session's close on a thread of its
own: one lock around each call.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lsp_assist.config import Bounded
from lsp_assist.documents import Position, TextView
from lsp_assist.telemetry.retention import (
    ITEM_FIELDS,
    KEYS_FLUSH,
    LOCATE_TRIES,
    ItemLine,
    KeysRecord,
    Probe,
    RetainedRecord,
    locate,
    read_fields,
    retain_after_s,
    utf16_len,
    utf16_prefix,
)

SHOWN_EVENT = "shown"
"""The ``event`` of a shown suggestion's line in the metrics log."""

OUTCOMES = ("accepted", "typed_over", "dismissed", "superseded", "ignored")
"""How a shown suggestion ended, in the order ``lsp-assist stats`` lists them."""

ITEM_SEPARATOR = "."
"""Between a request id and an alternative's number in an item id (``3f2a.1``)."""

MAX_OFFERED = 256
"""Items offered but not (yet) shown that are remembered; older ones are forgotten."""
MAX_PROBES = 256
"""Accepted suggestions waiting for their retention measurement at most: past it the
oldest is measured at once (``early``), as when its document closes."""
SUGGESTION_ITEMS = 64
"""Items one shown suggestion remembers by id (typing through it shows one per key):
past it the oldest between its first and its latest are forgotten (still counted)."""


def item_id(request_id: str, index: int) -> str:
    """Return the id of item ``index`` of a request's answer (the first is the request id)."""
    return request_id if index == 0 else f"{request_id}{ITEM_SEPARATOR}{index}"


def request_of(item: str) -> str:
    """Return the request id an item id belongs to."""
    return item.split(ITEM_SEPARATOR, 1)[0]


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
class ShownRecord(ItemLine):
    """One shown suggestion and how it ended (a line of the metrics log): ``ts`` when its
    outcome was known (unix seconds), ``item`` the id of the first item shown."""

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
            **self.item_json(SHOWN_EVENT),
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
        read_fields(
            record,
            data,
            strings=(*ITEM_FIELDS, "outcome"),
            counts=("items", "shown_chars", "accepted_chars"),
            floats=("ts", "shown_ms"),
        )
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
    count: int = 1
    """Items shown for it (``items`` and ``offsets`` keep the last :data:`SUGGESTION_ITEMS`)."""

    def forget_oldest(self) -> str | None:
        """Forget the oldest item between the first and the latest; return its id."""
        for name in self.offsets:
            if name not in (self.root.item, self.current.item):
                del self.offsets[name]
                del self.items[name]
                return name
        return None


TelemetryEvent = ShownRecord | RetainedRecord | KeysRecord
"""A line ``ShownSuggestions`` writes to the metrics log."""


class ShownSuggestions:
    """The per-item outcome of the items an editor showed; one record per suggestion;
    with ``document_of``, the accepted characters retained and the quiet keys."""

    def __init__(
        self,
        write: Callable[[TelemetryEvent], None],
        *,
        document_of: Callable[[str], TextView | None] | None = None,
        retain_after: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_offered: int | None = None,
    ) -> None:
        self._write = write
        self._document_of = document_of
        self.retain_after = retain_after_s() if retain_after is None else retain_after
        """Seconds from an accept to its retention measurement (``RETAIN_AFTER_S``)."""
        self._clock = clock
        self._max_offered = MAX_OFFERED if max_offered is None else max_offered
        self._probes: dict[str, Probe] = {}
        """The accepted suggestions whose retention is not measured yet, by first item."""
        self._inline: set[str] = set()
        """Documents the client asked inline completions for: their changes are keys."""
        self._pending: dict[str, bool] = {}
        """Each such document's last change, not counted yet: whether something showed since."""
        self._keys = KeysRecord()
        """Keys counted and not yet written."""
        self._offered: OrderedDict[str, OfferedItem] = OrderedDict()
        self._open: dict[str, _Suggestion] = {}
        """The open suggestion of each document, by URI."""
        self._by_item: dict[str, _Suggestion] = {}
        self._lock = threading.RLock()

    def bounds(self, *, documents: int) -> dict[str, Bounded]:
        """What the tracker keeps, against its constants and the ``documents`` open."""
        where = "telemetry/shown.py {}"
        with self._lock:
            return {
                "shown.offered": Bounded(
                    len(self._offered), self._max_offered, "items", where.format("MAX_OFFERED")
                ),
                "shown.probes": Bounded(
                    len(self._probes), MAX_PROBES, "accepts", where.format("MAX_PROBES")
                ),
                "shown.open": Bounded(len(self._open), documents, "suggestions", "open documents"),
                "shown.items": Bounded(
                    len(self._by_item),
                    documents * SUGGESTION_ITEMS,
                    "items",
                    where.format("SUGGESTION_ITEMS per open document"),
                ),
                "shown.inline": Bounded(
                    len(self._inline), documents, "documents", "open documents"
                ),
                "shown.pending": Bounded(
                    len(self._pending), documents, "documents", "open documents"
                ),
            }

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
            if offered.uri in self._pending:
                self._pending[offered.uri] = True
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
                    previous.count += 1
                    self._by_item[offered.item] = previous
                    while len(previous.offsets) > SUGGESTION_ITEMS:
                        forgotten = previous.forget_oldest()
                        if forgotten is None:
                            break
                        self._by_item.pop(forgotten, None)
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
            self._accepted_text(suggestion, item, accepted_length)
            return True

    def accepted(self, item: str) -> bool:
        """The editor inserted all of ``item`` (its command ran)."""
        with self._lock:
            suggestion = self._showing(item)
            if suggestion is None:
                return False
            end = suggestion.offsets[item] + utf16_len(suggestion.items[item].text)
            suggestion.accepted_chars = max(suggestion.accepted_chars, end)
            self._accepted_text(suggestion, item, None)
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
        suggestion, the user typed over it. ``line_text(n)`` is line ``n`` as it is now.

        In a document the client asked inline completions for, the change is a key: the
        one before it is counted (quiet when nothing showed since), and this one waits
        for a show (typing the suggestion's next characters shows its rest: not quiet).
        """
        with self._lock:
            if uri in self._inline:
                self._count_key(uri)
                self._pending[uri] = False
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
            elif typed and typed != current.text and uri in self._pending:
                self._pending[uri] = True  # typed through: the client shows the rest

    def changed(self, uri: str, start: int, end: int, new_text: str) -> None:
        """One edit of ``uri``: code points ``[start, end)`` of the text before it became
        ``new_text``; the accepted spans in it follow."""
        with self._lock:
            for probe in self._probes.values():
                if probe.uri != uri:
                    continue
                if probe.start is None and probe.tries < LOCATE_TRIES:
                    probe.tries += 1  # its text may come after the accept: look again
                    self._locate(probe)
                else:
                    probe.edit(start, end, len(new_text))

    def follows(self, uri: str) -> bool:
        """True when an accepted text in ``uri`` waits for its measurement (edits matter)."""
        with self._lock:
            return any(probe.uri == uri for probe in self._probes.values())

    def asked(self, uri: str) -> None:
        """The client asked an inline completion for ``uri``: its changes are keys."""
        with self._lock:
            self._inline.add(uri)

    def next_due(self) -> float | None:
        """Seconds until the next retention measurement is due (0: now); None: none waits."""
        with self._lock:
            if not self._probes:
                return None
            deadline = min(probe.deadline for probe in self._probes.values())
            return max(0.0, deadline - self._clock())

    def measure_due(self) -> int:
        """Measure the retention of the accepts :attr:`retain_after` old; return how many."""
        with self._lock:
            now = self._clock()
            due = [key for key, probe in self._probes.items() if probe.deadline <= now]
            for key in due:
                self._measure(self._probes.pop(key), "on_time", now)
            return len(due)

    def closed(self, uri: str) -> None:
        """The document closed (call it while its text can still be read): its open
        suggestion ends unseen, its accepts are measured early, its last key is counted."""
        with self._lock:
            now = self._clock()
            suggestion = self._open.get(uri)
            if suggestion is not None:
                self._end(suggestion, "ignored", now)
            for key in [key for key, probe in self._probes.items() if probe.uri == uri]:
                self._measure(self._probes.pop(key), "early", now)
            if uri in self._inline:
                self._count_key(uri)
                self._inline.discard(uri)
            for name in [name for name, item in self._offered.items() if item.uri == uri]:
                del self._offered[name]  # a show heard after the close finds nothing

    def close(self) -> None:
        """The session ends: every open suggestion is written as ``ignored``."""
        with self._lock:
            now = self._clock()
            for suggestion in list(self._open.values()):
                self._end(suggestion, "ignored", now)
            self._offered.clear()
            for probe in list(self._probes.values()):
                self._measure(probe, "early", now)
            self._probes.clear()
            for uri in list(self._pending):
                self._count_key(uri)
            self._inline.clear()
            self._flush_keys()

    def _count_key(self, uri: str) -> None:
        """Count ``uri``'s last change, if one waits: quiet when nothing showed after it."""
        showed = self._pending.pop(uri, None)
        if showed is None:
            return
        self._keys.keys += 1
        self._keys.quiet += not showed
        if self._keys.keys >= KEYS_FLUSH:
            self._flush_keys()

    def _flush_keys(self) -> None:
        if self._keys.keys:
            self._keys.ts = time.time()
            self._write(self._keys)
        self._keys = KeysRecord()

    def _accepted_text(self, suggestion: _Suggestion, item: str, units: int | None) -> None:
        """Follow what an accept of ``item`` (``units`` of its text; None: all) put in.

        The span starts at the suggestion's start: the characters typed through before
        ``item`` showed are in it, as they are in ``accepted_chars``. The document gets
        the accepted text before the accept is heard: it is looked for where the
        suggestion was shown (or where an earlier accept of it is now) and near there.
        """
        # an accept is not a key: the change that put its text in is not counted
        self._pending.pop(suggestion.root.uri, None)
        if self._document_of is None:
            return
        root, current = suggestion.root, suggestion.items[item]
        typed = current.before[root.column :] if current.line == root.line else ""
        text = typed + (current.text if units is None else utf16_prefix(current.text, units))
        probe = self._probes.get(root.item)
        if probe is None:
            probe = Probe(
                item=root.item,
                request_id=root.request_id,
                trigger=root.trigger,
                model=root.model,
                language=root.language,
                uri=root.uri,
            )
            self._probes[root.item] = probe
            while len(self._probes) > MAX_PROBES:
                oldest = next(iter(self._probes))
                self._measure(self._probes.pop(oldest), "early", self._clock())
        if len(text) < len(probe.text):
            text = probe.text  # an accept of less than before (a late partial) keeps the span
        now = self._clock()
        probe.accepted_at, probe.deadline = now, now + self.retain_after
        probe.text, probe.tries = text, 0
        document = self._document_of(root.uri)
        if document is not None and probe.start is None:
            probe.hint = document.offset_at(Position(root.line, root.column))
        elif probe.start is not None:
            probe.hint = probe.start
        self._locate(probe)

    def _locate(self, probe: Probe) -> None:
        """Find the probe's text in its document, at or near its hint (None: not there)."""
        document = self._document_of(probe.uri) if self._document_of is not None else None
        start = locate(document.text, probe.text, probe.hint) if document is not None else None
        probe.start, probe.end = start, (start or 0) + len(probe.text)

    def _measure(self, probe: Probe, measured: str, now: float) -> None:
        document = self._document_of(probe.uri) if self._document_of is not None else None
        text = document.text if document is not None else None
        self._write(probe.measure(text, measured, now))

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
                items=suggestion.count,
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
