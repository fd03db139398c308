"""How the current file uses names: the evidence for what the next statement will call.

At the start of a statement nothing of the call is typed yet, so the related layer
ranks the names the file can reach (imported names, ``module.name`` attributes) by how
the file uses them outside the cursor line:

- in the enclosing function (before or after the cursor);
- in other functions that look like the enclosing one (IDF-weighted Jaccard of their
  identifier sets: code that handles the same objects tends to call the same things);
- close to the cursor, and how often in the file;
- not at all (an import nothing uses yet is usually about to be used).

:func:`usage_profile` computes this once per file text outside the cursor line, so it
is the same for every keystroke within a line (the prompt head stays still).
"""

from __future__ import annotations

import bisect
import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain

from lsp_assist.config import Bounded
from lsp_assist.index.model import Import, Symbol

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNIT_KINDS = frozenset({"function", "method"})


@dataclass(slots=True)
class NameUses:
    """Where the file, outside the cursor line and its imports, uses each name."""

    lines: dict[str, list[int]] = field(default_factory=dict)
    """Name -> the lines referencing it (bare, or through ``obj.name``)."""
    attrs: dict[str, set[str]] = field(default_factory=dict)
    """Attribute -> the names it is reached through (``obj.attr``) anywhere in the file."""
    unit: tuple[int, int] | None = None
    """The enclosing function's lines (None at module level)."""
    similarity: dict[str, float] = field(default_factory=dict)
    """Name -> the best similarity to the enclosing function of another function using it."""
    adjacent: dict[str, float] = field(default_factory=dict)
    """Name -> how much one of its uses looks like the cursor's position: the statements
    right before and after it against those around the cursor (IDF-weighted, 0-1)."""
    aliases: dict[str, str] = field(default_factory=dict)
    """Local name -> imported name, for ``import x as y`` / ``from m import x as y``."""
    code_lines: int = 0
    """Non-blank lines of the file (the base of a name's rate of use)."""

    def uses(self, name: str) -> int:
        """Return how many lines reference ``name``."""
        return len(self.lines.get(name, ()))

    def in_unit(self, name: str, outside: tuple[int, int] = (0, -1)) -> bool:
        """True when the enclosing function references ``name`` on a line not in ``outside``."""
        if self.unit is None:
            return False
        a, b = self.unit
        return any(
            a <= i <= b and not outside[0] <= i <= outside[1] for i in self.lines.get(name, ())
        )

    def distance(self, name: str, line: int) -> int | None:
        """Return the distance in lines from ``line`` to the nearest reference of ``name``."""
        found = self.lines.get(name)
        if not found:
            return None
        k = bisect.bisect_left(found, line)
        near = [abs(found[j] - line) for j in (k - 1, k) if 0 <= j < len(found)]
        return min(near) if near else None


IDENT_LINES = 20_000
"""Lines whose identifier sets :class:`IdentCache` keeps (~600 bytes a line, ~12 MB)."""


class IdentCache:
    """Identifier sets of single lines, keyed by the line's text (lines rarely change).

    About 600 bytes a line: :data:`IDENT_LINES` (~12 MB) hold the largest files of a
    session; the cache is emptied when it is full.
    """

    def __init__(self, limit: int | None = None) -> None:
        self.limit = IDENT_LINES if limit is None else limit
        self._sets: dict[str, frozenset[str]] = {}

    def bounds(self) -> dict[str, Bounded]:
        """The lines kept against ``IDENT_LINES``."""
        return {
            "idents.lines": Bounded(
                len(self._sets), self.limit, "lines", "context/usage.py IDENT_LINES"
            )
        }

    def of(self, line: str) -> frozenset[str]:
        """Return the identifiers of ``line`` (cached by its text)."""
        found = self._sets.get(line)
        if found is None:
            if len(self._sets) >= self.limit:
                self._sets.clear()
            found = frozenset(_IDENT.findall(line))
            self._sets[line] = found
        return found


_ALIAS = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\s+as\s+([A-Za-z_][A-Za-z0-9_]*)")


def import_lines(lines: Sequence[str], imports: Iterable[Import]) -> set[int]:
    """Return the lines the import statements span (a parenthesised list included)."""
    out: set[int] = set()
    for imp in imports:
        depth = 0
        for i in range(imp.line, min(len(lines), imp.line + 200)):
            out.add(i)
            text = lines[i]
            depth += sum(text.count(ch) for ch in "([{") - sum(text.count(ch) for ch in ")]}")
            if depth <= 0 and not text.rstrip().endswith("\\"):
                break
    return out


def enclosing_unit(symbols: Iterable[Symbol], lines: Sequence[str], line: int) -> Symbol | None:
    """Return the innermost function or method around ``line``.

    A blank line right after a function's last statement, indented deeper than its
    header, belongs to it too (the parser ends the function at its last statement).
    """
    best: Symbol | None = None
    indent = _indent(lines[line]) if 0 <= line < len(lines) else 0
    for sym in symbols:
        if sym.kind not in _UNIT_KINDS or sym.start_line > line or sym.start_line >= len(lines):
            continue
        inside = line <= sym.end_line
        if not inside and indent > _indent(lines[sym.start_line]):
            gap = range(sym.end_line + 1, line)
            inside = all(not lines[i].strip() for i in gap if i < len(lines))
        if inside and (best is None or sym.start_line >= best.start_line):
            best = sym
    return best


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip())


def usage_profile(
    lines: Sequence[str],
    cursor_line: int,
    symbols: Sequence[Symbol],
    imports: Sequence[Import],
    names: Iterable[str],
    objects: Iterable[str],
    cache: IdentCache,
) -> NameUses:
    """Return how ``lines`` (the cursor line and the imports left out) use ``names``.

    ``objects`` are the names attributes may be reached through (imported modules);
    every ``object.attr`` of the file is recorded in ``NameUses.attrs`` and counts as a
    reference of ``attr``.
    """
    skip = import_lines(lines, imports)
    usage = NameUses()
    for i in sorted(skip):
        for original, local in _ALIAS.findall(lines[i]):
            usage.aliases[local] = original
    skip.add(cursor_line)
    wanted = {n for n in names if n}
    objs = {o for o in objects if o}
    # a name imported under another name is used under that one
    wanted |= {a for a, o in usage.aliases.items() if o in wanted}
    objs |= {a for a, o in usage.aliases.items() if o in objs}
    if not wanted and not objs:
        return usage
    real = usage.aliases.get
    per_line: list[frozenset[str]] = [
        frozenset() if i in skip else cache.of(text) for i, text in enumerate(lines)
    ]
    attr_re = (
        re.compile(
            r"(?<![\w.])("
            + "|".join(sorted(map(re.escape, objs)))
            + r")\s*(?:\.|::|->)\s*([A-Za-z_]\w*)"
        )
        if objs
        else None
    )
    found: dict[str, set[int]] = {}
    for i, idents in enumerate(per_line):
        if not idents:
            continue
        hits = idents & wanted
        if attr_re is not None and idents & objs:
            for obj, attr in attr_re.findall(lines[i]):
                usage.attrs.setdefault(attr, set()).add(real(obj, obj))
                found.setdefault(attr, set()).add(i)
        for name in hits:
            found.setdefault(real(name, name), set()).add(i)
    usage.lines = {name: sorted(rows) for name, rows in found.items()}
    usage.code_lines = sum(1 for idents in per_line if idents)
    unit = enclosing_unit(symbols, lines, cursor_line)
    usage.unit = (unit.start_line, max(unit.end_line, cursor_line)) if unit is not None else None
    own_name = unit.name if unit is not None else ""
    usage.similarity = _similarity(per_line, symbols, usage, len(lines), own_name)
    usage.adjacent = _adjacent(per_line, cursor_line, usage)
    return usage


NAMESAKE_BONUS = 0.3
"""Similarity added to a function of the same name as the enclosing one."""

ADJACENT_USES = 24
"""Per name, the uses nearest the cursor whose neighbouring statements are compared."""


def _neighbour(per_line: list[frozenset[str]], i: int, step: int) -> frozenset[str]:
    """Return the identifiers of the nearest non-empty line from ``i`` in direction ``step``."""
    j = i + step
    for _ in range(8):
        if not 0 <= j < len(per_line):
            break
        if per_line[j]:
            return per_line[j]
        j += step
    return frozenset()


def _adjacent(
    per_line: list[frozenset[str]], cursor_line: int, usage: NameUses
) -> dict[str, float]:
    """Return, per name, the best match between the statements around one of its uses and
    the statements around the cursor (the share of the cursor's neighbours' IDF weight
    that the use's neighbours repeat)."""
    before = _neighbour(per_line, cursor_line, -1)
    after = _neighbour(per_line, cursor_line, 1)
    words = before | after
    if not words:
        return {}
    df: Counter[str] = Counter()
    for idents in per_line:
        if idents:
            df.update(idents & words)
    n = len(per_line) + 1
    weight = {w: math.log(n / (1 + df[w])) for w in words}
    mine = [(side, sum(weight[w] for w in side)) for side in (before, after)]
    out: dict[str, float] = {}
    for name, rows in usage.lines.items():
        k = bisect.bisect_left(rows, cursor_line)
        nearest = sorted(
            rows[max(0, k - ADJACENT_USES) : k + ADJACENT_USES], key=lambda i: abs(i - cursor_line)
        )
        best = 0.0
        for j in nearest[:ADJACENT_USES]:
            if abs(j - cursor_line) <= 1:
                continue
            score = 0.0
            for (side, total), step in zip(mine, (-1, 1), strict=True):
                if total > 0:
                    theirs = _neighbour(per_line, j, step) - {name}
                    score += sum(weight[w] for w in side & theirs) / total
            best = max(best, score / 2)
        if best > 0.0:
            out[name] = best
    return out


def _similarity(
    per_line: list[frozenset[str]],
    symbols: Sequence[Symbol],
    usage: NameUses,
    n_lines: int,
    own_name: str = "",
) -> dict[str, float]:
    """Return, per name, the best IDF-weighted Jaccard similarity to the enclosing function
    of another function that references the name."""
    if usage.unit is None:
        return {}
    a, b = usage.unit
    units: list[tuple[int, int]] = []
    namesakes: list[bool] = []
    for sym in sorted(symbols, key=lambda s: s.start_line):
        if sym.kind not in _UNIT_KINDS or sym.start_line >= n_lines:
            continue
        lo, hi = sym.start_line, min(sym.end_line, n_lines - 1)
        if lo <= a <= hi or a <= lo <= b:  # the enclosing function, around it or nested in it
            continue
        units.append((lo, hi))
        namesakes.append(bool(own_name) and sym.name == own_name)
    if not units:
        return {}
    sets = [frozenset().union(*per_line[lo : hi + 1]) for lo, hi in units]
    own = frozenset().union(*per_line[a : b + 1])
    df = Counter(chain.from_iterable(sets))
    n = len(sets) + 1
    weights = {w: math.log(n / (1 + c)) + 1.0 for w, c in df.items()}
    top = math.log(n) + 1.0
    own_weight = sum(weights.get(w, top) for w in own)
    scores: list[float] = []
    for s in sets:
        shared = sum(weights[w] for w in s & own)
        union = own_weight + sum(weights[w] for w in s - own)
        scores.append(shared / union if union else 0.0)
    for k, same in enumerate(namesakes):
        if same:  # the same method in another class (write, visit, serialize ...)
            scores[k] = min(1.0, scores[k] + NAMESAKE_BONUS)
    # the innermost unit of each line (units are sorted by start: nested ones come later)
    unit_of: dict[int, int] = {}
    for k, (lo, hi) in enumerate(units):
        for i in range(lo, hi + 1):
            unit_of[i] = k
    out: dict[str, float] = {}
    for name, rows in usage.lines.items():
        best = max((scores[unit_of[i]] for i in rows if i in unit_of), default=0.0)
        if best > 0.0:
            out[name] = best
    return out
