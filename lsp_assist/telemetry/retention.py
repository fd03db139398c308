"""What users keep: accepted characters still present later, and keys with nothing shown.

Retention (docs/telemetry.md, "What users keep"), as Copilot measures it: every accept
(whole, through the item's command, or partial, ``didPartiallyAcceptCompletion``)
starts or extends a :class:`Probe`: the accepted text and the span of the document
that holds it, found where the suggestion was shown (:func:`locate`). Every later edit
of the document moves the span (:func:`track`): an edit before it shifts it, an edit
after it leaves it, an edit that overlaps it becomes part of it. :data:`RETAIN_AFTER_S`
after the last accept the span's text is compared with the accepted text (:func:`retained`:
difflib's matching blocks, characters in order), and one :class:`RetainedRecord` is
written. Tracking the span keeps the comparison local (text typed around it never
counts); the diff forgives edits inside it (a word renamed keeps the rest).

Quiet keys: :class:`KeysRecord` counts the document changes of documents the client
asked inline completions for, and those after which nothing was shown before the next
change (:class:`~lsp_assist.telemetry.shown.ShownSuggestions` decides it).

Nothing here holds a lock or a clock of its own: ``ShownSuggestions`` calls it under
its lock.
"""

from __future__ import annotations

import difflib
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

RETAINED_EVENT = "retained"
"""The ``event`` of a retention measurement's line in the metrics log."""
KEYS_EVENT = "keys"
"""The ``event`` of a count of document changes and quiet ones."""

RETAIN_AFTER_S = 30.0
"""Seconds after the last accept of a suggestion that its characters are looked for."""
RETAIN_AFTER_ENV = "LSP_ASSIST_RETAIN_AFTER_S"
"""Environment variable that replaces :data:`RETAIN_AFTER_S` (tests make it small)."""

MEASURED = ("on_time", "early", "none")
"""How a retention was measured: at :data:`RETAIN_AFTER_S`; earlier, because the document
closed or the session ended first; not at all (the accepted text was not found in the
document where it was shown, or the document was gone)."""

LOCATE_WINDOW = 2000
"""Code points either side of the expected place searched for the accepted text."""
LOCATE_TRIES = 3
"""Changes after an accept whose text was not there yet that look for it again (a client
that sends the accept before the change that put its text in)."""

KEYS_FLUSH = 200
"""A :class:`KeysRecord` is written every this many keys (and at the session's end)."""


def retain_after_s() -> float:
    """:data:`RETAIN_AFTER_S`, or the environment's :data:`RETAIN_AFTER_ENV` (> 0) if given."""
    value = os.environ.get(RETAIN_AFTER_ENV, "")
    if value:
        try:
            seconds = float(value)
        except ValueError:
            seconds = 0.0
        if seconds > 0:
            return seconds
        log.warning("%s=%r is not a positive number: %s s", RETAIN_AFTER_ENV, value, RETAIN_AFTER_S)
    return RETAIN_AFTER_S


def utf16_len(text: str) -> int:
    """The length of ``text`` in UTF-16 code units."""
    return len(text.encode("utf-16-le")) // 2


def utf16_prefix(text: str, units: int) -> str:
    """The longest start of ``text`` that is at most ``units`` UTF-16 code units long."""
    count = 0
    for index, char in enumerate(text):
        count += 2 if ord(char) > 0xFFFF else 1
        if count > units:
            return text[:index]
    return text


def track(start: int, end: int, edit_start: int, edit_end: int, inserted: int) -> tuple[int, int]:
    """The span ``[start, end)`` after ``[edit_start, edit_end)`` became ``inserted`` code points.

    An edit that ends at or before the span's start shifts it (an insertion at its
    start too); one that starts at or after its end leaves it; one that overlaps it
    becomes part of it (the span grows to cover the edit's new text).
    """
    delta = inserted - (edit_end - edit_start)
    if edit_end <= start:
        return start + delta, end + delta
    if edit_start >= end:
        return start, end
    return min(start, edit_start), max(end, edit_end) + delta


def trim_edit(old: str, start: int, end: int, new: str) -> tuple[int, int, str]:
    """The edit ``old[start:end] -> new`` without the text it leaves as it was at either end.

    A client that sends whole ranges (a formatter, full synchronisation) then touches
    only what changed, and a span that did not change is not swallowed by the edit.
    """
    replaced = old[start:end]
    head = _common_prefix(replaced, new)
    limit = min(len(replaced), len(new)) - head
    tail = _common_prefix(replaced[::-1][:limit], new[::-1][:limit])
    return start + head, end - tail, new[head : len(new) - tail]


def _common_prefix(a: str, b: str) -> int:
    """The length of the longest common start of ``a`` and ``b`` (slices compared in C)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def locate(text: str, expected: str, hint: int, window: int = LOCATE_WINDOW) -> int | None:
    """Where ``expected`` is in ``text``: at ``hint``, else its nearest place within
    ``window`` code points of it; None when it is not there."""
    if not expected:
        return None
    hint = max(0, min(hint, len(text)))
    if text.startswith(expected, hint):
        return hint
    low = max(0, hint - window)
    high = min(len(text), hint + window + len(expected))
    best: int | None = None
    found = text.find(expected, low, high)
    while found != -1:
        if best is None or abs(found - hint) < abs(best - hint):
            best = found
        found = text.find(expected, found + 1, high)
    return best


def retained(accepted: str, now: str) -> int:
    """UTF-16 units of ``accepted`` still in ``now``: the characters of difflib's matching
    blocks between the two (in order, no junk heuristic)."""
    if not accepted or not now:
        return 0
    matcher = difflib.SequenceMatcher(None, accepted, now, autojunk=False)
    return sum(
        utf16_len(accepted[block.a : block.a + block.size])
        for block in matcher.get_matching_blocks()
    )


@dataclass(eq=False, kw_only=True)
class Probe:
    """An accepted suggestion's text and the span of the document that held it."""

    item: str
    """The suggestion's first item (its record's ``item``)."""
    request_id: str
    trigger: str
    model: str
    language: str
    uri: str
    text: str = ""
    """What was accepted, from the suggestion's start (characters typed through included)."""
    start: int | None = None
    """The span's start in code points (None: the accepted text was not found)."""
    end: int = 0
    hint: int = 0
    """Where the accepted text is looked for: the suggestion's place, or the span's start."""
    tries: int = 0
    """Changes since the last accept that looked again for text not found."""
    accepted_at: float = 0.0
    deadline: float = 0.0

    def edit(self, start: int, end: int, inserted: int) -> None:
        """Follow one edit of the document (code point offsets before it)."""
        if self.start is not None:
            self.start, self.end = track(self.start, self.end, start, end, inserted)

    def measure(self, document: str | None, measured: str, now: float) -> RetainedRecord:
        """The record of this probe against the document's text now (None: it is gone)."""
        record = RetainedRecord(
            item=self.item,
            request_id=self.request_id,
            trigger=self.trigger,
            model=self.model,
            language=self.language,
            accepted_chars=utf16_len(self.text),
            after_s=max(0.0, now - self.accepted_at),
        )
        if self.start is None or document is None:
            record.measured = "none"
            return record
        record.measured = measured
        record.retained_chars = retained(self.text, document[self.start : self.end])
        return record


def read_fields(
    record: object,
    data: Mapping[str, Any],
    *,
    strings: tuple[str, ...] = (),
    counts: tuple[str, ...] = (),
    floats: tuple[str, ...] = (),
) -> None:
    """Set the record's fields from a log object, each where its value has the field's
    type: ``strings`` str, ``counts`` a whole number >= 0, ``floats`` any number (as a
    float); a bool is no number. Others keep their defaults."""
    for name in strings:
        if isinstance(data.get(name), str):
            setattr(record, name, data[name])
    for name in counts:
        value = data.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            setattr(record, name, value)
    for name in floats:
        value = data.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            setattr(record, name, float(value))


ITEM_FIELDS = ("item", "request_id", "trigger", "model", "language")
"""The :class:`ItemLine` fields that name the item (all strings)."""


@dataclass(kw_only=True)
class ItemLine:
    """What a log line about one suggestion starts with: its time, and which item of
    which request (trigger, model, language) it is about."""

    ts: float = field(default_factory=time.time)
    item: str = ""
    request_id: str = ""
    trigger: str = ""
    model: str = ""
    language: str = ""

    def item_json(self, event: str) -> dict[str, Any]:
        """Return the log object's start: ``event``, the time and the item's fields."""
        return {
            "event": event,
            "ts": round(self.ts, 6),
            "item": self.item,
            "request_id": self.request_id,
            "trigger": self.trigger,
            "model": self.model,
            "language": self.language,
        }


@dataclass(kw_only=True)
class RetainedRecord(ItemLine):
    """One accepted suggestion's characters and how many were still there later."""

    accepted_chars: int = 0
    """UTF-16 units accepted, from the suggestion's start (as the shown record's)."""
    retained_chars: int | None = None
    """UTF-16 units of them still present; None when not measured."""
    measured: str = "on_time"
    """One of :data:`MEASURED`."""
    after_s: float = 0.0
    """Seconds from the last accept to the measurement."""

    def to_json(self) -> dict[str, Any]:
        """Return the log line's object (no text of the suggestion or the document)."""
        return {
            **self.item_json(RETAINED_EVENT),
            "accepted_chars": self.accepted_chars,
            "retained_chars": self.retained_chars,
            "measured": self.measured,
            "after_s": round(self.after_s, 3),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RetainedRecord:
        """Return a record from a log object; bad values are defaulted."""
        record = cls()
        read_fields(
            record,
            data,
            strings=(*ITEM_FIELDS, "measured"),
            counts=("accepted_chars", "retained_chars"),
            floats=("ts", "after_s"),
        )
        if record.measured not in MEASURED:
            record.measured = "none"
        if record.measured == "none":
            record.retained_chars = None
        elif record.retained_chars is None:
            record.measured = "none"
        else:
            record.retained_chars = min(record.retained_chars, record.accepted_chars)
        return record


@dataclass(kw_only=True)
class KeysRecord:
    """Document changes (keys) while the client had inline completion, and the quiet ones."""

    ts: float = field(default_factory=time.time)
    keys: int = 0
    quiet: int = 0
    """Keys after which no suggestion was shown before the next key."""

    def to_json(self) -> dict[str, Any]:
        """Return the log line's object."""
        return {
            "event": KEYS_EVENT,
            "ts": round(self.ts, 6),
            "keys": self.keys,
            "quiet": self.quiet,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> KeysRecord:
        """Return a record from a log object; bad values are defaulted."""
        record = cls()
        read_fields(record, data, counts=("keys", "quiet"), floats=("ts",))
        record.quiet = min(record.quiet, record.keys)
        return record
