"""How a related-definition candidate is scored: the rules and the value they produce.

The rules, applied by :meth:`~.retriever.Retriever.candidates` to the definitions of
each name the editing zone, the imports and the modules they reach offer:

- named in the editing zone: +0.45, on or just above the cursor line: +0.2
- import evidence (the name is imported, reached as ``module.name``, or a member of a
  class the zone names, in a file the current file imports): +0.35 (+0.45 when imported)
- not in the zone but reachable through an import: 0.3, plus what anticipates the next
  statement (``usage.py``): used elsewhere in the enclosing function +0.35, used by a
  function that looks like it +0.35 x similarity, used within a few lines +0.1, an
  import nothing uses yet +0.3 (less when many are unused), how often +0.1 at most;
  capped at 0.85, below what the zone names
- same package (directory): +0.1; recently opened or edited: +0.1
- no import evidence in Python (names reach other files only through imports): x0.5
- a name with several definitions and none imported: divided by sqrt(count)
- a method without import evidence: x0.6; a variable: x0.8

A name that has a definition in an imported file drops its other definitions, so an
unrelated file that happens to define the same name stays out.

Owns :class:`Candidate` and the scoring rules that need no index: :func:`import_evidence` (why
a definition is the one the zone means), :func:`anticipation` (how likely the next
statement uses a reachable name) and :func:`module_members` (an imported module's
unused members as candidates). :class:`~.retriever.Retriever` applies them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.context.retrieval.names import subwords
from lsp_assist.context.usage import NameUses
from lsp_assist.index.model import Symbol

MAX_UNEVIDENCED = 0.85
"""The best score a definition without import evidence can reach before ambiguity."""

ANTICIPATED_BASE = 0.3
"""Score of a reachable name before the signals that anticipate the next statement."""

ANTICIPATED_MAX = 0.9
"""Anticipated names rank below the names referenced on the cursor line."""

API_PER_MODULE = 6
"""Unused members of one imported module that may become candidates (best named first)."""


@dataclass(slots=True)
class Candidate:
    """A scored definition that may go into the related layer."""

    symbol: Symbol
    source: str
    score: float
    reason: str
    language: str = ""
    asked: bool = False
    """What the line asks for (demand.py): its long form may take the whole layer."""

    @property
    def label(self) -> str:
        """The definition's name as explain shows it (``Parent.name`` for a member)."""
        sym = self.symbol
        return f"{sym.parent}.{sym.name}" if sym.parent else sym.name

    @property
    def key(self) -> tuple[str, int]:
        """Stable identity and prompt order: source path, then line."""
        return (self.source, self.symbol.start_line)


def is_prototype(sym: Symbol) -> bool:
    """True for a declaration without a body (a C prototype, an abstract method)."""
    return sym.end_line == sym.start_line and sym.signature.rstrip().endswith(";")


def import_evidence(
    sym: Symbol,
    name: str,
    files: dict[Path, set[str]],
    imported_names: set[str],
    attrs: dict[str, set[str]],
    idents: set[str],
    bare: set[str],
    language: str,
) -> str:
    """Return why ``sym`` is the definition the zone means ('' when only by name)."""
    aliases = files.get(sym.path)
    if aliases is None:
        return ""
    if name in imported_names and sym.parent is None:
        return "imported name"
    if aliases & attrs.get(name, set()):
        return f"{sorted(aliases & attrs[name])[0]}.{name} of an imported file"
    if sym.parent and (sym.parent in idents or sym.parent in imported_names):
        return f"{sym.parent} of an imported file"
    if sym.parent is None and name in bare and language != "python":
        return "imported file"
    return ""


def anticipation(
    name: str, sym: Symbol, usage: NameUses, cursor_line: int, unused: int
) -> tuple[float, list[str]]:
    """Return how likely the next statement uses ``name`` (the score), and why.

    The weights were fit on development samples of bench_anticipate.py (seeds 1
    and 2; the figures in docs/performance.md are from seed 7).
    """
    signals = 0.0
    reasons: list[str] = []
    uses = usage.uses(name)
    distance = usage.distance(name, cursor_line)
    if distance is not None:
        signals += 0.25 * math.exp(-distance / 10)
        reasons.append(f"used {distance} lines away")
    if usage.in_unit(name):
        signals += 0.1
        reasons.append("used in this function")
    similar = usage.similarity.get(name, 0.0)
    if similar > 0.0:
        signals += 0.25 * min(1.0, similar / 0.3)
        reasons.append(f"used by a similar function ({similar:.2f})")
    adjacent = usage.adjacent.get(name, 0.0)
    if adjacent > 0.0:
        signals += 0.2 * adjacent
        reasons.append(f"used between similar statements ({adjacent:.2f})")
    if uses:
        # a name used on many of the file's lines is likely on the next one too
        rate = math.log((uses + 1) / max(50, usage.code_lines)) + 4
        signals += 0.2 * max(0.0, min(1.0, rate / 3))
        reasons.append(f"used on {uses} lines")
    elif sym.parent is None:
        signals += 0.4 / math.sqrt(max(1.0, unused / 3))
        reasons.append("imported, not used yet")
    if sym.kind in ("variable", "constant"):
        signals *= 0.7  # rarely what a statement starts by calling
    score = ANTICIPATED_BASE + signals
    if sym.parent:
        score *= 0.5  # a member: reached through an object, not through the import
    return min(score, ANTICIPATED_MAX), reasons


def module_members(
    modules: dict[Path, set[str]],
    usage: NameUses,
    words: set[str],
    api: Callable[[Path], list[Symbol]],
) -> dict[str, tuple[str, float, str]]:
    """Return members of imported modules the file does not use yet, as candidates:
    name -> (the module's file, score, reason).

    An imported module's next use may be a member the file has not used: its public
    functions and classes compete by how their names share words with the zone's
    identifiers, with a prior shared among the module's members (fewer members, more
    each); a module the file already uses through other members gets half of it.
    """
    out: dict[str, tuple[str, float, str]] = {}
    for target, aliases in sorted(modules.items()):
        members = api(target)
        if not members:
            continue
        used = {a for a, objs in usage.attrs.items() if objs & aliases}
        prior = 0.25 / math.sqrt(max(1.0, len(members) / 3)) * (0.5 if used else 1.0)
        alias = sorted(aliases)[0]
        ranked: list[tuple[float, str, Symbol]] = []
        for sym in members:
            if sym.name in used:
                continue
            parts = subwords(sym.name)
            shared = len(parts & words) / len(parts) if parts else 0.0
            if sym.name == alias:
                shared = max(shared, 0.5)  # getopt.getopt, pprint.pprint
            ranked.append((-shared, sym.name, sym))
        ranked.sort(key=lambda t: (t[0], t[1]))
        for neg, name, sym in ranked[:API_PER_MODULE]:
            score = (0.15 + prior + 0.2 * -neg) * (0.9 if sym.kind == "class" else 1.0)
            why = f"{alias}.{name}: unused member of an imported module"
            if neg:
                why += f", shares {-neg:.0%} of its words with the zone"
            if name not in out or out[name][1] < score:
                out[name] = (str(target), min(score, ANTICIPATED_MAX), why)
    return out
