"""From the model's rewrite of a window back to edits: the early stop and the smallest diff.

Owns :class:`Rejoin`, the stop rule that ends a rewrite once it has changed something and
then copied ``lines`` of the window in a row after it (the rest is taken from the window
as it is: the model would only copy it), and :func:`smallest_edits`, the rewrite diffed
against the window as the fewest, smallest replacements: whole lines for inserted or
deleted lines, and word by word inside a line replaced by one line (a renamed use is an
edit of the name, not of its line). Positions are document lines and code point columns.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

from lsp_assist.context.rewrite import EditWindow

__all__ = ["LineEdit", "Rejoin", "smallest_edits"]

REJOIN_LINES = 2
"""Lines copied unchanged after a change before the rewrite is stopped."""
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


@dataclass(frozen=True, slots=True)
class LineEdit:
    """Replace (``start_line``, ``start_column``)-(``end_line``, ``end_column``) with ``text``."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int
    text: str


class Rejoin:
    """A stop rule: done once the rewrite changed a line and then copied ``lines`` more,
    or copied the window's last ``lines`` (a model that goes on past the window's end
    writes code that is not in the window)."""

    def __init__(self, window: Sequence[str], lines: int = REJOIN_LINES) -> None:
        self._window = list(window)
        self._lines = lines
        self.rest: tuple[str, ...] = ()
        """The window's lines after the rejoined ones (set when the rule stopped it)."""

    def __call__(self, text: str) -> int | None:
        """The index to cut ``text`` at (all of it) once rejoined, else None."""
        if not text.endswith("\n"):
            return None
        done = text.split("\n")[:-1]
        if len(done) <= self._lines:
            return None
        ops = SequenceMatcher(None, self._window, done, autojunk=False).get_opcodes()
        while ops and ops[-1][0] == "delete" and ops[-1][3] == len(done):
            ops.pop()  # the window's lines the rewrite has not reached yet
        if not ops or ops[-1][0] != "equal":
            return None
        _, i1, i2, _, j2 = ops[-1]
        if j2 != len(done):
            return None
        at_end = i2 == len(self._window) and i2 - i1 >= min(self._lines, len(self._window))
        if not at_end and (len(ops) < 2 or i2 - i1 < self._lines):
            return None
        self.rest = tuple(self._window[i2:])
        return len(text)


def _line_edits(line: int, old: str, new: str) -> list[LineEdit]:
    """``old`` -> ``new`` on one line as word-level replacements."""
    a, b = _WORDS.findall(old), _WORDS.findall(new)
    starts_a = [0]
    for word in a:
        starts_a.append(starts_a[-1] + len(word))
    edits = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag != "equal":
            edits.append(LineEdit(line, starts_a[i1], line, starts_a[i2], "".join(b[j1:j2])))
    return edits


PAIR_SIMILARITY = 0.5
"""Inside a block of changed lines, an old and a new line at least this similar
(difflib's ratio) are one line edited; the others are lines deleted or inserted."""


def _pairs(old: Sequence[str], new: Sequence[str]) -> list[tuple[int | None, int | None]]:
    """``old`` and ``new`` aligned in order: (i, j) edited, (i, None) deleted, (None, j)
    inserted, the alignment that keeps the most similarity (a small dynamic program)."""
    n, m = len(old), len(new)
    ratios = [[SequenceMatcher(None, a, b, autojunk=False).ratio() for b in new] for a in old]
    score = [[0.0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            ratio = ratios[i][j]
            pair = score[i + 1][j + 1] + ratio if ratio >= PAIR_SIMILARITY else -1.0
            score[i][j] = max(pair, score[i + 1][j], score[i][j + 1])
    out: list[tuple[int | None, int | None]] = []
    i = j = 0
    while i < n and j < m:
        ratio = ratios[i][j]
        if ratio >= PAIR_SIMILARITY and score[i][j] == score[i + 1][j + 1] + ratio:
            out.append((i, j))
            i, j = i + 1, j + 1
        elif score[i][j] == score[i + 1][j]:
            out.append((i, None))
            i += 1
        else:
            out.append((None, j))
            j += 1
    out += [(k, None) for k in range(i, n)] + [(None, k) for k in range(j, m)]
    return out


def _whole_lines(window: EditWindow, i1: int, i2: int, new_lines: Sequence[str]) -> LineEdit:
    """Window lines ``i1``..``i2`` (relative) replaced by ``new_lines`` as one edit."""
    old = window.lines
    new = "".join(line + "\n" for line in new_lines)
    start, end = (window.first + i1, 0), (window.first + i2, 0)
    if window.last_of_document and i2 == len(old):
        # the document's last line has no line break after it to replace
        if i1 < len(old):
            end, new = (window.end - 1, len(old[-1])), new[:-1]
        else:
            start = end = (window.end - 1, len(old[-1]))
            new = "\n" + new[:-1]
    return LineEdit(*start, *end, new)


def smallest_edits(window: EditWindow, rewritten: Sequence[str]) -> list[LineEdit]:
    """The edits that turn ``window``'s lines into ``rewritten``, top to bottom."""
    old = list(window.lines)
    edits: list[LineEdit] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, old, rewritten, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        inserted: list[str] = []
        at = i1
        deleted_from: int | None = None
        for i, j in [*_pairs(old[i1:i2], rewritten[j1:j2]), (None, None)]:
            if j is not None and i is None:
                inserted.append(rewritten[j1 + j])
                continue
            if i is not None and j is None:
                deleted_from = i1 + i if deleted_from is None else deleted_from
                at = i1 + i + 1
                continue
            if inserted or deleted_from is not None:
                lo = deleted_from if deleted_from is not None else at
                edits.append(_whole_lines(window, lo, at, inserted))
                inserted, deleted_from = [], None
            if i is not None and j is not None:
                line = window.first + i1 + i
                edits.extend(_line_edits(line, old[i1 + i], rewritten[j1 + j]))
                at = i1 + i + 1
    return edits
