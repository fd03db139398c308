"""What the line being written asks of the related layer: definitions it needs, found exactly.

Three sources of candidates that score 1.0, above every rule of ``scoring`` (so
``selection`` gives them their long form first: the whole definition when it is short,
else its signature, doc and member signatures), each behind a setting:

- **pins** (``relatedPins``): definitions named by hand, ``[FILE[:LINE]=][PATH:]NAME``;
  a scope holds the pin to one file or one line of it (the cross-file benchmark's
  oracle row places the definition a line needs this way);
- **the line's names** (``relatedLineNames``): each complete identifier of the typed
  part of the cursor line that the editing zone does not bind (no assignment,
  parameter, ``def``/``class``/``const``/``for``/``as`` of it before the cursor) and that
  another file defines at its top level: in a file the current file imports when one
  does, else the only definition the index has;
- **the receiver** (``relatedReceivers``): at ``obj.`` or ``self.attr.`` (``this.attr.``),
  with perhaps part of a member name typed after the dot, the class of the receiver:
  for an attribute, from the enclosing class's text (``self.attr: T``, ``self.attr =
  T(...)``, ``this.attr = new T(...)``, ``self.attr = param`` with ``param: T``, a field
  ``attr: T``); for a name, from the lines above the cursor (``name: T``, ``name =
  T(...)``, the nearest first). The first identifier of the annotation or call that
  another file defines as a class (or interface, struct, type) is the class; a function
  called there leads to the class its signature returns (``-> T``, ``): T``).

Nothing here changes what a build holds unless its setting is on. No model.
"""

from __future__ import annotations

import builtins
import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.context.retrieval.names import IDENT, KEYWORDS
from lsp_assist.context.retrieval.retriever import Retriever
from lsp_assist.context.retrieval.scoring import Candidate
from lsp_assist.errors import IndexError_
from lsp_assist.index.model import Import, Symbol

log = logging.getLogger(__name__)

CLASS_KINDS = frozenset({"class", "interface", "struct", "type", "enum"})
"""Definitions that have members a receiver reaches."""
DEFINITION_KINDS = frozenset({*CLASS_KINDS, "function", "constant", "variable"})
"""Top-level definitions a name of the line may mean."""
SCOPE_LINES = 200
"""Lines above the cursor searched for a name's binding or a receiver's type."""
_RECEIVER = re.compile(r"(?<![\w.])((?:[A-Za-z_]\w*\s*\.\s*)+)([A-Za-z_]\w*)?$")
"""A chain ending in a dot at the end of the typed part, perhaps a member name begun."""
_RETURNS = re.compile(r"(?:->|\)\s*:)\s*([^:{=]+)")
"""What a function's signature says it returns (Python ``-> T``, TypeScript ``): T``)."""
_PYTHON_BUILTINS = frozenset(dir(builtins))
_WRAPPER = re.compile(
    r"(?:typing\.)?(?:Optional|Annotated|ClassVar|Final|Required|NotRequired|ReadOnly|Readonly|"
    r"Awaitable|Promise)\s*[\[<]"
)
"""Wrappers whose first argument is the type a value has (unwrapped by ``type_heads``)."""
_MODIFIERS = "(?:private|public|protected|readonly|static|declare|override)"
"""Words before a TypeScript field's name."""


@dataclass(frozen=True, slots=True)
class Pin:
    """One ``relatedPins`` entry: where it holds and which definition it names."""

    name: str
    path: str = ""
    """The definition's workspace-relative file ('' any)."""
    scope: str = ""
    """The workspace-relative file the pin holds in ('' everywhere)."""
    line: int = 0
    """The 1-based line of ``scope`` it holds at (0: the whole file)."""

    def holds(self, rel: str, line: int) -> bool:
        """True when the pin applies at 0-based ``line`` of the file ``rel``."""
        if self.scope and self.scope != rel:
            return False
        return not self.line or self.line == line + 1


def parse_pin(text: str) -> Pin | None:
    """Return the pin ``[FILE[:LINE]=][PATH:]NAME`` says (None when it names nothing)."""
    scope, _, definition = text.strip().rpartition("=")
    path, _, name = definition.strip().rpartition(":")
    if not IDENT.fullmatch(name.strip()):
        return None
    where, _, number = scope.strip().rpartition(":")
    line = int(number) if where and number.isdigit() else 0
    return Pin(name.strip(), path.strip(), where if line else scope.strip(), line)


def _candidate(sym: Symbol, source: str, reason: str, language: str) -> Candidate:
    return Candidate(
        symbol=sym, source=source, score=1.0, reason=reason, language=language, asked=True
    )


def _lookup(retriever: Retriever, name: str) -> list[Symbol]:
    """Return the index's definitions of ``name`` (none when the index fails)."""
    try:
        return list(retriever.index.lookup(name))
    except IndexError_:  # an index failure must not break the prompt
        log.debug("lookup failed for %s", name, exc_info=True)
        return []


def pinned(
    retriever: Retriever, pins: Iterable[str], path: Path, line: int, language: str
) -> list[Candidate]:
    """Return the definitions ``pins`` (``relatedPins`` entries) place at ``line`` of ``path``."""
    rel = retriever.relative(path)
    out: list[Candidate] = []
    for text in pins:
        pin = parse_pin(text)
        if pin is None or not pin.holds(rel, line):
            continue
        found = [
            s
            for s in _lookup(retriever, pin.name)
            if (not pin.path or retriever.relative(s.path) == pin.path)
            and not retriever.denied(s.path)
        ]
        found.sort(key=lambda s: (s.parent is not None, str(s.path), s.start_line))
        if found:
            sym = found[0]
            out.append(_candidate(sym, retriever.relative(sym.path), "pinned", language))
    return out


def binds(text: str, name: str) -> bool:
    """True when ``text`` binds ``name`` locally: an assignment, a parameter, a ``def``,
    ``class``, ``const``/``let``/``var``/``function``, ``for`` or ``as`` of it."""
    n = re.escape(name)
    patterns = (
        rf"(?<![\w.]){n}\s*(?::[^=\n]*)?=(?![=>])",
        rf"\b(?:def|class|function|const|let|var|for|as|interface|type|enum)\s+{n}\b",
        rf"[(,]\s*\*{{0,2}}{n}\s*[:=,)?]",
        rf"\b{n}\s*,[^=\n]*=(?!=)",
    )
    return any(re.search(p, text) for p in patterns)


def _imported_files(retriever: Retriever, path: Path, imports: Sequence[Import]) -> set[Path]:
    files, _ = retriever.imported(path, imports)
    return set(files)


def _definition(
    retriever: Retriever, name: str, path: Path, imported: set[Path], kinds: frozenset[str]
) -> Symbol | None:
    """Return the top-level definition of ``name`` in another file that ``path`` means:
    the one in a file it imports, else the index's only one (None when ambiguous)."""
    found = [
        s
        for s in _lookup(retriever, name)
        if s.parent is None and s.path != path and s.kind in kinds and not retriever.denied(s.path)
    ]
    near = [s for s in found if s.path in imported]
    chosen = near or (found if len(found) == 1 else [])
    return min(chosen, key=lambda s: (str(s.path), s.start_line)) if chosen else None


def line_names(typed: str, zone_before: str, language: str) -> list[str]:
    """Return the complete identifiers of ``typed`` (the cursor line up to the cursor) that
    ``zone_before`` does not bind: keywords, Python's builtins, the word still being typed
    and what follows a dot (a member) left out."""
    out: dict[str, None] = {}
    for match in IDENT.finditer(typed):
        name = match.group(0)
        if match.end() == len(typed) or name in KEYWORDS or name in out:
            continue
        if typed[: match.start()].rstrip().endswith("."):
            continue
        if language == "python" and name in _PYTHON_BUILTINS:
            continue
        if not binds(zone_before, name):
            out[name] = None
    return list(out)


def names_needed(
    retriever: Retriever,
    path: Path,
    language: str,
    typed: str,
    zone_before: str,
    imports: Sequence[Import],
) -> list[Candidate]:
    """Return the definitions of the names of the line being written that the zone lacks
    and another file defines (``relatedLineNames``)."""
    names = line_names(typed, zone_before, language)
    if not names:
        return []
    imported = _imported_files(retriever, path, imports)
    out: list[Candidate] = []
    for name in names:
        sym = _definition(retriever, name, path, imported, DEFINITION_KINDS)
        if sym is not None:
            reason = f"{name} on the line being written, not in the zone"
            out.append(_candidate(sym, retriever.relative(sym.path), reason, language))
    return out


def receiver_chain(typed: str) -> list[str]:
    """Return the receiver at the end of ``typed`` as its names (``self._session.`` ->
    ``["self", "_session"]``; ``[]`` when the typed part does not end at a member access)."""
    match = _RECEIVER.search(typed)
    if match is None:
        return []
    return [part.strip() for part in match.group(1).split(".") if part.strip()]


def _enclosing_class(lines: Sequence[str], line: int) -> list[str]:
    """Return the lines of the class around ``line`` (by indentation), [] when none."""
    indent = len(lines[line]) - len(lines[line].lstrip()) if line < len(lines) else 0
    for start in range(line - 1, -1, -1):
        text = lines[start]
        depth = len(text) - len(text.lstrip())
        if not text.strip() or depth >= indent:
            continue
        if re.match(r"\s*(?:export\s+)?(?:default\s+)?(?:abstract\s+)?class\s", text):
            end = start + 1
            while end < len(lines) and (
                not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > depth
            ):
                end += 1
            return list(lines[start:end])
        indent = depth
    return []


def _found(patterns: Iterable[str], text: str) -> list[tuple[int, str]]:
    """Return (where, first group) of every match of ``patterns`` in ``text`` (multi-line)."""
    return [
        (match.start(), match.group(1))
        for pattern in patterns
        for match in re.finditer(pattern, text, re.MULTILINE)
    ]


def attribute_types(text: str, attr: str) -> list[str]:
    """Return what a class's ``text`` says the type of its attribute ``attr`` is: the
    annotations and the called names of its assignments, in the order they appear."""
    a = re.escape(attr)
    patterns = (
        rf"(?:self|this)\.{a}\s*:\s*([^=\n;]+)",
        rf"(?:self|this)\.{a}\s*=\s*(?:await\s+)?(?:new\s+)?([A-Za-z_][\w.]*)\s*[(<]",
        rf"^\s*(?:{_MODIFIERS}\s+)*{a}\??\s*:\s*([^=\n;]+)",
        rf"^\s*(?:{_MODIFIERS}\s+)*{a}\??\s*(?::[^=\n;]+)?=\s*(?:new\s+)?([A-Za-z_][\w.]*)\s*[(<]",
        rf"[(,]\s*(?:{_MODIFIERS}\s+)+{a}\??\s*:\s*([^=,)\n]+)",
    )
    found = _found(patterns, text)
    for match in re.finditer(rf"(?:self|this)\.{a}\s*=\s*([A-Za-z_]\w*)\s*;?\s*$", text, re.M):
        param = re.search(rf"[(,]\s*{re.escape(match.group(1))}\s*\??:\s*([^=,)\n]+)", text)
        if param is not None:
            found.append((match.start(), param.group(1)))
    return [t for _, t in sorted(found)]


def variable_types(text: str, name: str) -> list[str]:
    """Return what ``text`` (the lines above the cursor) says the type of the variable or
    parameter ``name`` is, the nearest binding first."""
    n = re.escape(name)
    patterns = (
        rf"(?<![\w.]){n}\s*\??:\s*([^=,)\n;]+)",
        rf"(?<![\w.]){n}\s*=\s*(?:await\s+)?(?:new\s+)?([A-Za-z_][\w.]*)\s*[(<]",
    )
    return [t for _, t in sorted(_found(patterns, text), reverse=True)]


def type_heads(type_text: str) -> list[str]:
    """Return the names a type annotation or a called name stands for at its top: the head
    of each ``|`` alternative, ``Optional[...]``/``Annotated[...]`` and the like unwrapped,
    the last part of a dotted name (``dict[str, Agent]`` -> ``dict``: a container, not an
    ``Agent``; ``Optional[Store] | None`` -> ``Store``, ``None``)."""
    text = type_text.strip().strip("\"'")
    while True:
        wrapped = _WRAPPER.match(text)
        if wrapped is None:
            break
        text = text[wrapped.end() :].strip()
    heads: list[str] = []
    depth, part = 0, ""
    for char in text + "|":
        depth += (char in "[<(") - (char in "]>)")
        if char == "|" and depth <= 0:
            head = re.match(r"\s*[\"']?([A-Za-z_][\w.]*)", part)
            if head is not None:
                heads.append(head.group(1).rsplit(".", 1)[-1])
            part = ""
        else:
            part += char
    return heads


def _class_of(
    retriever: Retriever, type_text: str, path: Path, imported: set[Path]
) -> Symbol | None:
    """Return the class a type annotation or called name means (a function called there
    leads to the class its signature returns, once)."""
    for name in type_heads(type_text):
        sym = _definition(retriever, name, path, imported, CLASS_KINDS)
        if sym is not None:
            return sym
        func = _definition(retriever, name, path, imported, frozenset({"function"}))
        returns = _RETURNS.search(func.signature) if func is not None else None
        for inner in type_heads(returns.group(1)) if returns is not None else ():
            sym = _definition(retriever, inner, path, imported, CLASS_KINDS)
            if sym is not None:
                return sym
    return None


def receiver_class(
    retriever: Retriever,
    path: Path,
    language: str,
    lines: Sequence[str],
    line: int,
    typed: str,
    imports: Sequence[Import],
) -> list[Candidate]:
    """Return the class of the receiver the typed part ends at (``relatedReceivers``)."""
    chain = receiver_chain(typed)
    if len(chain) == 2 and chain[0] in ("self", "this"):
        types = attribute_types("\n".join(_enclosing_class(lines, line)), chain[1])
    elif len(chain) == 1 and chain[0] not in ("self", "this"):
        above = "\n".join(lines[max(0, line - SCOPE_LINES) : line])
        types = variable_types(above + "\n" + typed[: typed.rfind(chain[0])], chain[0])
    else:
        return []
    imported = _imported_files(retriever, path, imports)
    for type_text in types:
        sym = _class_of(retriever, type_text, path, imported)
        if sym is not None:
            reason = f"class of the receiver {'.'.join(chain)}"
            return [_candidate(sym, retriever.relative(sym.path), reason, language)]
    return []


def demanded(
    retriever: Retriever,
    *,
    path: Path,
    language: str,
    lines: Sequence[str],
    line: int,
    typed: str,
    zone_before: str,
    imports: Sequence[Import],
    pins: Sequence[str] = (),
    line_names_on: bool = False,
    receivers_on: bool = False,
) -> list[Candidate]:
    """Return what the line asks for, pins first, each definition once."""
    found = pinned(retriever, pins, path, line, language) if pins else []
    if receivers_on:
        found += receiver_class(retriever, path, language, lines, line, typed, imports)
    if line_names_on:
        found += names_needed(retriever, path, language, typed, zone_before, imports)
    out: dict[tuple[str, int], Candidate] = {}
    for cand in found:
        out.setdefault(cand.key, cand)
    return list(out.values())
