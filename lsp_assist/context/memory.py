"""The prompt memory: what a completion keeps for the next prompt of its file.

Owns :class:`PromptMemory` (one bounded LRU of :class:`BuildNote`, keyed as the backend
keys its KV state: the document's URI in serving), the note one layered build leaves
for the next (its line state, the zone it chose as the next selection's hint, the
zone's token scale) and the rules that read a note: typing within one line keeps the
line's first build (:func:`kept_line`), and a build on the next lines keeps the zone's
first line and the layers before it (:func:`anchored`). They return kept parts and a
zone; the context engine renders and assembles them. Only the owner of a memory (the
session: a completion and a prefill) stores a note in it, with :meth:`PromptMemory.remember`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from lsp_assist.config import Bounded, ContextSettings
from lsp_assist.context.budget import BudgetPlan
from lsp_assist.context.layout import Parts
from lsp_assist.context.model import Cursor
from lsp_assist.context.zone import Zone, zone_from_span

__all__ = [
    "ANCHOR_STEP_LINES",
    "BuildNote",
    "KeptLine",
    "PromptMemory",
    "ZoneMemo",
    "anchored",
    "block_key",
    "build_inputs",
    "kept_line",
    "line_key",
    "zone_growth",
]

MEMORY_SLOTS = 64
"""How many files' notes a memory keeps (least recently remembered dropped first)."""

ZONE_GROWTH_SHARE = 10
"""A fresh build spends the budget but 1/10 of it: the room the zone then grows into, line
by line, keeping its first line (:func:`anchored`) before the next fresh build."""


def zone_growth(total: int) -> int:
    """Return the tokens a fresh build of a ``total``-token prompt leaves for the zone to grow."""
    return total // ZONE_GROWTH_SHARE


ANCHOR_STEP_LINES = 3
"""How far below the last build a build may be to keep its zone start: the next line or
two being typed, not a jump (a prefill at the top of a file, a click further down)."""

_HEAD_PARTS = ("head", "project", "related", "similar", "file_header")
"""The layers before the zone that a new line's fresh build must repeat to be anchored."""
_KEPT_WHILE_TYPING = ("related", "similar")
"""Head parts a build on the next lines keeps from the last one even when a fresh build
would choose others (they follow the cursor): see :func:`anchored`."""


@dataclass(slots=True)
class KeptLine:
    """A file's last layered build, reused while the user types within its cursor line
    and, from a line below it, for the layers before the zone (see :func:`anchored`)."""

    key: tuple[object, ...]
    span: tuple[int, int]
    parts: Parts
    plan: BudgetPlan
    line: int = 0
    block_key: tuple[object, ...] = ()
    """What must not change for a build on a later line to keep this build's head."""
    middle_from: int | None = None
    """FIM: the first line written after the middle token (lines typed since the build
    that laid out the prefix), None when only the cursor line is."""
    before: str = ""
    after: str = ""
    """The zone's prefix and suffix text of this build."""
    n_lines: int = 0
    asked: frozenset[tuple[str, int]] = frozenset()
    """The keys (source, line) of what the line asked of the related layer at this build
    (retrieval/demand.py): a definition asked for later makes the next build fresh."""


@dataclass(frozen=True, slots=True)
class ZoneMemo:
    """The zone a build chose, the next selection's hint while the file keeps its shape."""

    n_lines: int
    budget: int
    max_lines: int
    start: int
    end: int

    def hint(self, n_lines: int, budget: int, max_lines: int) -> tuple[int, int] | None:
        """Return the span to keep for a selection of the same file shape, budget and cap."""
        if (self.n_lines, self.budget, self.max_lines) != (n_lines, budget, max_lines):
            return None
        return self.start, self.end


@dataclass(slots=True)
class BuildNote:
    """What one layered build keeps for the next build of its file (the build's note)."""

    slot: str
    """The memory's key: the backend's KV state key (the document's URI in serving)."""
    line: KeptLine
    zone: ZoneMemo
    scale: float
    """Exact / estimated tokens of the build's zone (the next selection's scale)."""


class PromptMemory:
    """The notes of the last builds, one per slot, in one bounded LRU.

    Reading (:meth:`recall`) never changes it; :meth:`remember` is its only writer.
    """

    def __init__(self, slots: int | None = None) -> None:
        self._slots = max(1, MEMORY_SLOTS if slots is None else slots)
        self._notes: OrderedDict[str, BuildNote] = OrderedDict()
        self._lock = threading.Lock()

    def recall(self, slot: str) -> BuildNote | None:
        """Return the note kept for ``slot`` (None: no build remembered there)."""
        with self._lock:
            return self._notes.get(slot)

    def remember(self, note: BuildNote | None) -> None:
        """Keep ``note`` for the next build of its slot (None: nothing to keep)."""
        if note is None:
            return
        with self._lock:
            self._notes[note.slot] = note
            self._notes.move_to_end(note.slot)
            while len(self._notes) > self._slots:
                self._notes.popitem(last=False)

    def forget(self, slot: str) -> None:
        """Drop what is kept for ``slot``."""
        with self._lock:
            self._notes.pop(slot, None)

    def __len__(self) -> int:
        """Return the number of slots with a note."""
        with self._lock:
            return len(self._notes)

    def bounds(self) -> dict[str, Bounded]:
        """The notes kept against ``MEMORY_SLOTS``."""
        return {
            "prompt_memory.slots": Bounded(
                len(self), self._slots, "files", "context/memory.py MEMORY_SLOTS"
            )
        }


def build_inputs(
    cursor: Cursor, settings: ContextSettings, total: int, recent: Sequence[Path]
) -> tuple[object, ...]:
    """Return what besides the text a build depends on (part of both reuse keys)."""
    return (total, settings, cursor.language, cursor.open_files, tuple(reversed(recent)))


def line_key(cursor: Cursor, lines: list[str], inputs: tuple[object, ...]) -> tuple[object, ...]:
    """Return what must not change for a build to reuse the line's first build."""
    line = cursor.line
    begin = sum(map(len, lines[:line])) + line
    finish = begin + len(lines[line])
    return (line, len(lines), hash(cursor.text[:begin]), hash(cursor.text[finish:]), *inputs)


def block_key(
    cursor: Cursor, lines: list[str], start_line: int, inputs: tuple[object, ...]
) -> tuple[object, ...]:
    """Return what must not change for a later line to keep a build's zone start."""
    begin = sum(map(len, lines[:start_line])) + start_line
    return (start_line, hash(cursor.text[:begin]), *inputs)


def kept_line(
    note: BuildNote, cursor: Cursor, lines: list[str], key: tuple[object, ...], *, fim: bool
) -> tuple[Parts, BudgetPlan, Zone] | None:
    """Return the line's first build's parts, plan and zone lines, when ``key`` is its key.

    The parts are a copy to render the zone into; the caller checks that they still fit.
    """
    state = note.line
    if state.key != key:
        return None
    zone = zone_from_span(
        lines, *state.span, cursor.line, cursor.column, fim=fim, middle_from=state.middle_from
    )
    return replace(state.parts, items=dict(state.parts.items)), state.plan, zone


def anchored(
    note: BuildNote,
    cursor: Cursor,
    lines: list[str],
    fresh: Parts,
    inputs: tuple[object, ...],
    *,
    max_lines: int,
    fim: bool,
) -> tuple[Parts, Zone, int | None] | None:
    """At the last build's line after an edit there, or a line below it, keep that
    build's layers and zone start: the parts (the zone still to render) and the zone.

    A fresh build that chose the same instructions and project summary keeps the last
    build's related, similar and file summary layers (they follow the cursor: taking the
    fresh ones would evaluate the whole prompt again at the first keystroke of a line),
    and its zone grows down from its first line to the cursor (docs/context.md, "A new
    line below keeps the zone's first line"). In FIM the lines typed since are written
    after the middle token (``middle_from``), so prefix, suffix and middle token stay as
    they were. At the last build's own line with the text after the cursor changed (the
    statement there deleted after a prefill) the same is kept but the zone's end.
    Returns the parts, the zone and the first line of the middle.
    """
    state = note.line
    if not state.block_key:
        return None
    if not 0 <= cursor.line - state.line <= ANCHOR_STEP_LINES:
        return None  # not this line or the next two of the same typing: a fresh build
    start, end = state.span
    if cursor.line - start + 1 > max_lines:
        return None
    if state.block_key != block_key(cursor, lines, start, inputs):
        return None
    for name in _HEAD_PARTS:
        if name in _KEPT_WHILE_TYPING:
            continue
        old, new = getattr(state.parts, name), getattr(fresh, name)
        if [piece.ids for piece in old] != [piece.ids for piece in new]:
            return None
    # the fresh build's pieces before the zone (the same pieces), the kept related,
    # similar and file summary layers with their explain items
    items = dict(fresh.items)
    for name in ("related", "similar", "file_summary"):
        if name in state.parts.items:
            items[name] = state.parts.items[name]
    parts = replace(
        fresh,
        related=state.parts.related,
        similar=state.parts.similar,
        file_summary=state.parts.file_summary,
        items=items,
    )
    if fim:
        first = state.middle_from if state.middle_from is not None else state.line
        shifted = end + len(lines) - state.n_lines
        grown = zone_from_span(
            lines,
            start,
            max(shifted, cursor.line),
            cursor.line,
            cursor.column,
            fim=True,
            middle_from=first,
        )
        if grown.before == state.before and grown.after == state.after:
            return parts, grown, first
    # lines the user removed or added below the cursor move the zone's end with them
    last = min(max(end + len(lines) - state.n_lines, cursor.line), len(lines) - 1)
    return parts, zone_from_span(lines, start, last, cursor.line, cursor.column, fim=fim), None
