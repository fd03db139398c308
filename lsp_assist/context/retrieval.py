"""Related definitions: the symbols the editing zone uses, found through the index.

Candidates are the identifiers of the editing zone (calls, attribute chains, type
names; the identifier being typed is left out until it is complete) and the names the
current file imports. Each is looked up in the index and scored by rules:

- named in the editing zone: +0.45, on or just above the cursor line: +0.2
- import evidence (the name is imported, reached as ``module.name``, or a member of a
  class the zone names, in a file the current file imports): +0.35 (+0.45 when imported)
- same package (directory): +0.1; recently opened or edited: +0.1
- no import evidence in Python (names reach other files only through imports): x0.5
- a name with several definitions and none imported: divided by sqrt(count)
- a method without import evidence: x0.6; a variable: x0.8

A name that has a definition in an imported file drops its other definitions, so an
unrelated file that happens to define the same name stays out. Candidates below the
relevance threshold are dropped, never added to fill space. Definitions in the
current file are left to the file summary, so nothing duplicates the editing zone.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.context.formats import comment_prefix
from lsp_assist.index.model import FileEntry, Import, IndexLookup, Symbol

log = logging.getLogger(__name__)

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ATTR = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\.|::|->)\s*([A-Za-z_][A-Za-z0-9_]*)")

KEYWORDS = frozenset(
    """
    and as assert async await break case catch class const continue def default defer del
    delete do elif else enum except export extends false finally fn for from func function
    global go goto if impl import in instanceof interface is lambda let loop match mod
    module mut new nil none None not null or package pass pub raise return self Self static
    struct super switch this throw throws true True False try type typeof union unsafe use
    using var void where while with yield int float str bool char double long short
    unsigned signed auto bytes dict list set tuple print len range isinstance object string
    boolean number any undefined include define ifdef ifndef endif namespace template
    typename public private protected final abstract override virtual extern inline sizeof
    crate where dyn ref move chan map make append error println printf std err ok Ok Err
    Some Option Result Vec String Box main init __init__ cls args kwargs
    """.split()  # noqa: SIM905
)

_HEADERS = frozenset({".h", ".hh", ".hpp", ".hxx"})
_SOURCES = (".c", ".cc", ".cpp", ".cxx")

MAX_UNEVIDENCED = 0.85
"""The best score a definition without import evidence can reach before ambiguity."""

RESOLVE_TTL_S = 5.0
"""Import resolutions are reused this long (new files are found after it)."""

FULL_BODY_LINES = 15
"""Definitions up to this many lines go in whole; longer ones as signature + doc."""


@dataclass(slots=True)
class Candidate:
    """A scored definition that may go into the related layer."""

    symbol: Symbol
    source: str
    score: float
    reason: str
    full: str
    short: str

    @property
    def key(self) -> tuple[str, int]:
        """Stable identity and prompt order: source path, then line."""
        return (self.source, self.symbol.start_line)


_BARE = re.compile(r"(?<![.\w>:])\s*([A-Za-z_][A-Za-z0-9_]*)")


def _is_prototype(sym: Symbol) -> bool:
    """True for a declaration without a body (a C prototype, an abstract method)."""
    return sym.end_line == sym.start_line and sym.signature.rstrip().endswith(";")


def identifiers(text: str) -> list[str]:
    """Return the identifiers of ``text`` that are worth looking up, in order of appearance."""
    seen: dict[str, None] = {}
    for name in IDENT.findall(text):
        if len(name) > 1 and name not in KEYWORDS:
            seen.setdefault(name, None)
    return list(seen)


def partial_identifier(typed: str) -> str:
    """Return the identifier being typed at the end of ``typed`` ('' when none)."""
    match = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", typed)
    return match.group(0) if match else ""


class _LineCache:
    """Lines of other files, re-split only when their text changes."""

    def __init__(self) -> None:
        self._cache: dict[Path, tuple[str, list[str]]] = {}

    def lines(self, text: str | None, path: Path) -> list[str] | None:
        if text is None:
            return None
        found = self._cache.get(path)
        if found is not None and found[0] is text:
            return found[1]
        if found is not None and found[0] == text:
            self._cache[path] = (text, found[1])
            return found[1]
        lines = text.split("\n")
        if len(self._cache) > 512:
            self._cache.clear()
        self._cache[path] = (text, lines)
        return lines


def _dedent(block: list[str]) -> list[str]:
    widths = [len(x) - len(x.lstrip()) for x in block if x.strip()]
    cut = min(widths) if widths else 0
    return [x[cut:] if x.strip() else "" for x in block]


class Retriever:
    """Finds and scores the definitions the editing zone refers to."""

    def __init__(self, index: IndexLookup, relative: Callable[[Path], str]) -> None:
        self.index = index
        self.relative = relative
        self._lines = _LineCache()
        self._render_cache: dict[tuple[Path, int, int, str], tuple[str, str]] = {}
        self._denied: dict[Path, bool] = {}
        self._resolved: dict[tuple[Path, Import], Path | None] = {}
        self._texts: dict[Path, tuple[FileEntry, str]] = {}
        self._resolved_at = 0.0

    def reset(self, *, force: bool = False) -> None:
        """Forget memoised deny decisions, import resolutions and texts older than a few seconds."""
        now = time.monotonic()
        too_big = max(len(self._resolved), len(self._denied), len(self._texts) * 20) > 20_000
        if force or too_big or now - self._resolved_at > RESOLVE_TTL_S:
            self._denied.clear()
            self._resolved.clear()
            self._texts.clear()
            self._resolved_at = now

    def denied(self, path: Path) -> bool:
        """Return ``index.is_denied(path)``, memoised for a few seconds."""
        found = self._denied.get(path)
        if found is None:
            found = bool(self.index.is_denied(path))
            self._denied[path] = found
        return found

    def resolve(self, path: Path, imp: Import) -> Path | None:
        """Return ``index.resolve_import`` memoised for a few seconds (None on failure)."""
        key = (path, imp)
        if key in self._resolved:
            return self._resolved[key]
        try:
            target = self.index.resolve_import(path, imp)
        except Exception:  # an index failure must not break the prompt
            log.debug("resolve_import failed for %s", imp.module, exc_info=True)
            target = None
        self._resolved[key] = target
        return target

    def text_of(self, path: Path) -> str | None:
        """Return ``index.text_of(path)``, reused while the index keeps the same entry.

        The index replaces a file's entry whenever it sees new text (an edit of an open
        buffer, a change on disk), and ``file`` is much cheaper than ``text_of`` (which
        checks the deny rules through symlinks and stats the file): a text is reused while
        its entry is unchanged, and for a few seconds at most (see ``reset``).
        """
        try:
            entry = self.index.file(path)
        except Exception:  # an index failure must not break the prompt
            log.debug("index.file failed for %s", path, exc_info=True)
            entry = None
        found = self._texts.get(path)
        if entry is not None and found is not None and found[0] is entry:
            return found[1]
        text = self.index.text_of(path)
        if entry is not None and text is not None:
            self._texts[path] = (entry, text)
        else:
            self._texts.pop(path, None)
        return text

    def lines_of(self, path: Path) -> list[str] | None:
        """Return the lines of ``path`` through the index (cached split)."""
        return self._lines.lines(self.text_of(path), path)

    def _render(self, sym: Symbol, language: str) -> tuple[str, str] | None:
        """Return (full, short) texts of a definition."""
        lines = self.lines_of(sym.path)
        if lines is None or sym.start_line >= len(lines):
            return None
        end = min(sym.end_line, len(lines) - 1)
        key = (sym.path, sym.start_line, end, lines[sym.start_line])
        cached = self._render_cache.get(key)
        if cached is not None:
            return cached
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
        if sym.kind in ("class", "interface", "struct", "enum", "type"):
            members = [
                m
                for m in self.index.symbols_of(sym.path)
                if m.parent == sym.name and sym.start_line <= m.start_line <= sym.end_line
            ]
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
        else:
            if sym.doc:
                short_lines.append(f"{c} {sym.doc}")
            short_lines.append(sig.rstrip("{ ") + " { ... }")
        short = header + "\n".join(short_lines) + "\n"
        if len(block) <= FULL_BODY_LINES:
            result = (full, short if len(short) < len(full) else full)
        else:
            result = (short, short)
        if len(self._render_cache) > 4096:
            self._render_cache.clear()
        self._render_cache[key] = result
        return result

    def imported(
        self, path: Path, imports: Iterable[Import]
    ) -> tuple[dict[Path, set[str]], set[str]]:
        """Return the files ``path`` imports (with the names they are reached by), and the
        names imported explicitly."""
        files: dict[Path, set[str]] = {}
        names: set[str] = set()
        for imp in imports:
            target = self.resolve(path, imp)
            names.update(imp.names)
            if target is None or self.denied(target):
                continue
            module = imp.module.strip("\"'<>")
            aliases = {module.rsplit("/", 1)[-1].rsplit(".", 1)[0]}
            aliases.add(module.replace("::", ".").rsplit(".", 1)[-1].rsplit("/", 1)[-1])
            aliases.update(imp.names)
            files.setdefault(target, set()).update(aliases)
            if target.suffix in _HEADERS:
                # a C/C++ header: its implementation file holds the definitions
                for ext in _SOURCES:
                    impl = target.with_suffix(ext)
                    known = impl != target and self.index.file(impl) is not None
                    if known and not self.denied(impl):
                        files.setdefault(impl, set()).update(aliases)
        return files, names

    @staticmethod
    def _evidence(
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

    def candidates(
        self,
        *,
        path: Path,
        language: str,
        zone_text: str,
        near_text: str,
        typed_partial: str,
        imports: list[Import],
        recent: set[Path],
        threshold: float,
    ) -> list[Candidate]:
        """Return the candidates at or above ``threshold``, best first (deterministic)."""
        in_zone = identifiers(zone_text)
        near = set(identifiers(near_text))
        zone_set = set(in_zone)
        if typed_partial and zone_text.count(typed_partial) <= 1:
            zone_set.discard(typed_partial)
            near.discard(typed_partial)
        attrs: dict[str, set[str]] = {}
        for obj, attr in _ATTR.findall(zone_text):
            attrs.setdefault(attr, set()).add(obj)
        all_idents = set(in_zone)
        bare = {m.group(1) for m in _BARE.finditer(zone_text)}
        files, imported_names = self.imported(path, imports)
        names = sorted(zone_set | {n for n in imported_names if n not in KEYWORDS})
        out: dict[tuple[Path, int], Candidate] = {}
        for name in names:
            try:
                symbols = self.index.lookup(name)
            except Exception:
                log.debug("lookup failed for %s", name, exc_info=True)
                continue
            symbols = [s for s in symbols if s.path != path and s.kind != "module"]
            if not symbols:
                continue
            evidence = {
                (s.path, s.start_line): self._evidence(
                    s, name, files, imported_names, attrs, all_idents, bare, language
                )
                for s in symbols
            }
            from_imports = [s for s in symbols if evidence[(s.path, s.start_line)]]
            if from_imports:
                symbols = from_imports
            elif MAX_UNEVIDENCED / math.sqrt(len(symbols)) < threshold:
                continue  # too common a name to mean any one of its definitions
            symbols = [s for s in symbols if not self.denied(s.path)]
            if not symbols:
                continue
            bodies = [s for s in symbols if not _is_prototype(s)]
            if bodies and len(bodies) < len(symbols):
                symbols = bodies
            symbols.sort(key=lambda s: (str(s.path), s.start_line))
            ambiguity = 1.0 if from_imports else math.sqrt(len(symbols))
            for sym in symbols[:8]:
                score = 0.0
                reasons: list[str] = []
                if name in zone_set:
                    score += 0.45
                    reasons.append("in editing zone")
                    if name in near:
                        score += 0.2
                        reasons.append("near cursor")
                else:
                    score += 0.1
                why = evidence[(sym.path, sym.start_line)]
                if why:
                    score += 0.45 if name in imported_names else 0.35
                    reasons.append(why)
                elif sym.path.parent == path.parent:
                    score += 0.1
                    reasons.append("same package")
                if not why and language == "python":
                    # Python names reach other files only through imports
                    score *= 0.5
                    reasons.append("not imported")
                if sym.parent and not why:
                    score *= 0.6
                    reasons.append("method matched by name")
                if sym.path in recent:
                    score += 0.1
                    reasons.append("recently opened")
                score /= ambiguity
                if sym.kind in ("variable", "constant"):
                    score *= 0.8
                if ambiguity > 1.0:
                    reasons.append(f"{len(symbols)} definitions")
                score = min(score, 1.0)
                if score < threshold:
                    continue
                rendered = self._render(sym, language)
                if rendered is None:
                    continue
                key = (sym.path, sym.start_line)
                prev = out.get(key)
                if prev is None or prev.score < score:
                    out[key] = Candidate(
                        symbol=sym,
                        source=self.relative(sym.path),
                        score=score,
                        reason=", ".join(reasons),
                        full=rendered[0],
                        short=rendered[1],
                    )
        ranked = sorted(out.values(), key=lambda c: (-c.score, c.key))
        return ranked
