"""How a definition is shown in the related layer: whole, signature + doc, or compact.

Owns :func:`render_definition` (the three forms of one definition from its file's
lines), :class:`LineCache` (other files' lines, re-split only when their text changes)
and the rules of the forms: a container's compact form is its header and how it is
constructed, a long definition's whole form is its signature and doc.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lsp_assist.config import Bounded
from lsp_assist.context.formats import comment_prefix
from lsp_assist.index.model import Symbol

FULL_BODY_LINES = 15
"""Definitions up to this many lines go in whole; longer ones as signature + doc."""

_CONSTRUCTORS = frozenset({"__init__", "__new__", "constructor", "new", "New"})

COMPACT_CONSTRUCTOR_CHARS = 100
"""A class's compact form includes its constructor's signature up to this long."""


LINE_CACHE_FILES = 512
"""Files whose split lines are kept (emptied when full)."""
LINE_CACHE_CHARS = 8_000_000
"""Characters those files may hold in all (their texts and lines: ~2 bytes each, more
for non-ASCII text); emptied when a new file would pass it."""


class LineCache:
    """Lines of other files, re-split only when their text changes."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[str, list[str]]] = {}
        self._chars = 0

    def bounds(self) -> dict[str, Bounded]:
        """The files kept and their characters against their constants."""
        where = "context/retrieval/render.py {}"
        return {
            "lines.files": Bounded(
                len(self._cache), LINE_CACHE_FILES, "files", where.format("LINE_CACHE_FILES")
            ),
            "lines.chars": Bounded(
                self._chars, LINE_CACHE_CHARS, "characters", where.format("LINE_CACHE_CHARS")
            ),
        }

    def lines(self, text: str | None, path: Path) -> list[str] | None:
        """Return the lines of ``text`` (the text of ``path``), split once per text."""
        if text is None:
            return None
        found = self._cache.get(path)
        if found is not None and found[0] is text:
            return found[1]
        if found is not None and found[0] == text:
            self._cache[path] = (text, found[1])
            return found[1]
        lines = text.split("\n")
        if found is not None:
            del self._cache[path]
            self._chars -= len(found[0])
        if len(self._cache) >= LINE_CACHE_FILES or self._chars + len(text) > LINE_CACHE_CHARS:
            self._cache.clear()
            self._chars = 0
        if len(text) <= LINE_CACHE_CHARS:
            self._cache[path] = (text, lines)
            self._chars += len(text)
        return lines


def _compact_class(sig: str, members: list[Symbol], python: bool) -> list[str]:
    """Return a container's compact form: its header and how it is constructed (its
    constructor's signature when short, else its fields when it has no constructor)."""
    name_of = sig.split("(", 1)[0].split(":", 1)[0].split()
    own = name_of[-1] if name_of else ""
    ctor = next(
        (m for m in members if m.name in _CONSTRUCTORS or (m.name == own and m.kind == "method")),
        None,
    )
    inner: list[str] = []
    if ctor is not None and len(ctor.signature) <= COMPACT_CONSTRUCTOR_CHARS:
        inner = [(ctor.signature.strip() or ctor.name).rstrip("{ ")]
    elif ctor is None:
        inner = [
            m.signature.strip() or m.name
            for m in members
            if m.kind in ("variable", "constant") and not m.name.startswith("__")
        ][:6]
    if python:
        head = sig if sig.endswith(":") else sig + ":"
        if not inner:
            return [f"{head} ..."]
        return [head, *(f"    {x} ..." if x.startswith("def ") else f"    {x}" for x in inner)]
    if not inner:
        return [sig.rstrip("{ ") + " { ... }"]
    return [sig.rstrip("{ ") + " {", *(f"    {x};" for x in inner), "}"]


def _dedent(block: list[str]) -> list[str]:
    widths = [len(x) - len(x.lstrip()) for x in block if x.strip()]
    cut = min(widths) if widths else 0
    return [x[cut:] if x.strip() else "" for x in block]


def render_definition(
    sym: Symbol,
    lines: list[str],
    language: str,
    symbols_of: Callable[[Path], list[Symbol]],
) -> tuple[str, str, str]:
    """Return (full, short, signature) texts of a definition, from its file's ``lines``.

    ``sym.start_line`` is within ``lines``; ``symbols_of`` gives a container's members.
    """
    end = min(sym.end_line, len(lines) - 1)
    python = language == "python"
    c = comment_prefix(language)
    block = lines[sym.start_line : end + 1]
    header = ""
    if python and sym.parent and sym.kind == "method":
        header = f"class {sym.parent}:\n"
    else:
        block = _dedent(block)
    if sym.kind in ("variable", "constant") and len(block) > 3:
        block = [*block[:3], "..."]
    full = header + "\n".join(block).rstrip() + "\n"
    # short form: signature (+ members for containers) + doc
    indent = ""
    if header and block:
        indent = block[0][: len(block[0]) - len(block[0].lstrip())]
    sig = sym.signature.strip() or (block[0].strip() if block else sym.name)
    short_lines: list[str] = []
    compact_lines: list[str] = []
    if sym.kind in ("class", "interface", "struct", "enum", "type"):
        members = [
            m
            for m in symbols_of(sym.path)
            if m.parent == sym.name and sym.start_line <= m.start_line <= sym.end_line
        ]
        compact_lines = _compact_class(sig, members, python)
        if python:
            short_lines.append(sig if sig.endswith(":") else sig + ":")
            if sym.doc:
                short_lines.append(f'    """{sym.doc}"""')
            for m in members[:12]:
                msig = m.signature.strip() or m.name
                short_lines.append(f"    {msig} ...")
            if not members and not sym.doc:
                short_lines.append("    ...")
        else:
            if sym.doc:
                short_lines.append(f"{c} {sym.doc}")
            short_lines.append(sig.rstrip("{ ") + " {")
            for m in members[:12]:
                msig = (m.signature.strip() or m.name).rstrip("{ ")
                short_lines.append(f"    {msig};")
            short_lines.append("}")
    elif python:
        short_lines.append(indent + sig)
        if sym.doc:
            short_lines.append(f'{indent}    """{sym.doc}"""')
        short_lines.append(f"{indent}    ...")
        compact_lines = [f"{indent}{sig} ..."]
    else:
        if sym.doc:
            short_lines.append(f"{c} {sym.doc}")
        short_lines.append(sig.rstrip("{ ") + " { ... }")
        compact_lines = short_lines[-1:]
    if sym.kind in ("variable", "constant"):
        compact_lines = block[:1]
    short = header + "\n".join(short_lines) + "\n"
    compact = header + "\n".join(compact_lines) + "\n"
    if len(block) <= FULL_BODY_LINES:
        short = short if len(short) < len(full) else full
    else:
        full = short
    return (full, short, compact if len(compact) < len(short) else short)
