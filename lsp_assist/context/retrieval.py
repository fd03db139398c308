"""Related definitions: the symbols the editing zone uses or the next statement will use.

Candidates are the identifiers of the editing zone (calls, attribute chains, type
names; the identifier being typed is left out until it is complete), the names the
current file imports, and the ``module.name`` attributes the file reaches through
imported modules. Each is looked up in the index and scored by rules:

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
unrelated file that happens to define the same name stays out. Candidates below the
relevance threshold are dropped, never added to fill space. Definitions in the
current file are left to the file summary, so nothing duplicates the editing zone.

:meth:`Retriever.select` spends the layer's grant: the definitions called at the
cursor in full first, then a compact signature of every other candidate, best first,
then bodies (whole definitions, else signature + doc) for the candidates that matter,
while they fit. :func:`related_layer` renders the choice as the prompt's ``related``
layer.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.context.formats import comment_prefix
from lsp_assist.context.layout import PieceMaker, Rendered, cost
from lsp_assist.context.model import Cursor, LayerItem
from lsp_assist.context.usage import IdentCache, Usage, usage_profile
from lsp_assist.context.zone import Zone
from lsp_assist.errors import IndexError_
from lsp_assist.index.model import FileEntry, Import, IndexLookup, Symbol

log = logging.getLogger(__name__)

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# overlapping: ``a.b.c`` gives (a, b) and (b, c)
_ATTR = re.compile(
    r"(?<![A-Za-z0-9_])(?=([A-Za-z_][A-Za-z0-9_]*)\s*(?:\.|::|->)\s*([A-Za-z_][A-Za-z0-9_]*))"
)

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

AT_CURSOR = 0.95
"""Candidates scoring this much (named at the cursor, imported) get their body first."""

BODY_SCORE = 0.6
"""After every candidate has its signature, bodies go to those scoring at least this."""

AT_CURSOR_SHARE = 0.5
"""The body of a definition named at the cursor takes at most this share of the layer."""

BODY_SHARE = 0.25
"""Any other body takes at most this share of the layer."""

ANTICIPATED_BASE = 0.3
"""Score of a reachable name before the signals that anticipate the next statement."""

ANTICIPATED_MAX = 0.9
"""Anticipated names rank below the names referenced on the cursor line."""

API_PER_MODULE = 6
"""Unused members of one imported module that may become candidates (best named first)."""

MAX_CONSIDERED = 48
"""At most this many candidates, best first, are rendered and counted for the layer."""

MIN_ITEM_TOKENS = 6
"""Below this many tokens left, no further signature is tried."""

MAX_CHARS_PER_TOKEN = 8
"""A text longer than this many characters a token left is not tokenized to be tried."""


@dataclass(slots=True)
class Candidate:
    """A scored definition that may go into the related layer."""

    symbol: Symbol
    source: str
    score: float
    reason: str
    language: str = ""

    @property
    def key(self) -> tuple[str, int]:
        """Stable identity and prompt order: source path, then line."""
        return (self.source, self.symbol.start_line)


@dataclass(slots=True)
class Chosen:
    """A candidate selected for the layer, with the form it goes in."""

    candidate: Candidate
    text: str
    form: str
    """full (the whole definition), short (signature + doc + members) or signature."""
    tokens: int

    @property
    def note(self) -> str:
        """Return what explain adds to the reason for the form ('' when whole)."""
        return {"short": ", signature and doc", "signature": ", signature only"}.get(self.form, "")


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


_WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def subwords(name: str) -> set[str]:
    """Return the lower-case words of an identifier (snake_case and camelCase), 3+ letters."""
    return {w.lower() for w in _WORD_PARTS.findall(name) if len(w) >= 3}


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


_CONSTRUCTORS = frozenset({"__init__", "__new__", "constructor", "new", "New"})

COMPACT_CONSTRUCTOR_CHARS = 100
"""A class's compact form includes its constructor's signature up to this long."""


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


class Retriever:
    """Finds and scores the definitions the editing zone uses or the next line may use."""

    def __init__(self, index: IndexLookup, relative: Callable[[Path], str]) -> None:
        self.index = index
        self.relative = relative
        self._lines = _LineCache()
        self._render_cache: dict[tuple[Path, int, int, str], tuple[str, str, str]] = {}
        self._idents = IdentCache()
        self._usage: dict[Path, tuple[int, Usage]] = {}
        self._apis: dict[Path, tuple[FileEntry, list[Symbol]]] = {}
        self._forwards: dict[Path, tuple[FileEntry, dict[str, Path]]] = {}
        self._denied: dict[Path, bool] = {}
        self._resolved: dict[tuple[Path, Import], Path | None] = {}
        self._texts: dict[Path, tuple[FileEntry, str]] = {}
        self._resolved_at = 0.0

    def reset(self, *, force: bool = False) -> None:
        """Forget memoised deny decisions, import resolutions (re-exports too) and texts older
        than a few seconds."""
        now = time.monotonic()
        too_big = max(len(self._resolved), len(self._denied), len(self._texts) * 20) > 20_000
        if force or too_big or now - self._resolved_at > RESOLVE_TTL_S:
            self._denied.clear()
            self._resolved.clear()
            self._texts.clear()
            self._forwards.clear()
            self._resolved_at = now

    def entry(self, path: Path) -> FileEntry | None:
        """Return ``index.file(path)``, None when the index fails (never breaks the prompt)."""
        try:
            return self.index.file(path)
        except IndexError_:  # an index failure must not break the prompt
            log.debug("index.file failed for %s", path, exc_info=True)
            return None

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
        except IndexError_:  # an index failure must not break the prompt
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
        entry = self.entry(path)
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

    def _render(self, sym: Symbol, language: str) -> tuple[str, str, str] | None:
        """Return (full, short, signature) texts of a definition."""
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
        compact_lines: list[str] = []
        if sym.kind in ("class", "interface", "struct", "enum", "type"):
            members = [
                m
                for m in self.index.symbols_of(sym.path)
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
        result = (full, short, compact if len(compact) < len(short) else short)
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

    def reexported(self, files: dict[Path, set[str]], names: set[str]) -> dict[Path, set[str]]:
        """Return the files that define names ``files`` only re-export (one hop: a
        package's ``__init__`` importing them from its modules), with those names."""
        out: dict[Path, set[str]] = {}
        for target in sorted(files):
            for name, further in self._forwarded(target).items():
                if name in names:
                    out.setdefault(further, set()).add(name)
        return out

    def _forwarded(self, target: Path) -> dict[str, Path]:
        """Return the names ``target`` imports by name without defining them, with the
        file each comes from (cached per index entry)."""
        entry = self.entry(target)
        if entry is None or not entry.imports:
            return {}
        found = self._forwards.get(target)
        if found is not None and found[0] is entry:
            return found[1]
        defined = {s.name for s in entry.symbols if s.parent is None}
        forwards: dict[str, Path] = {}
        for imp in entry.imports:
            names = [n for n in imp.names if n not in defined and n != "*"]
            further = self.resolve(target, imp) if names else None
            if further is not None and further != target and not self.denied(further):
                for name in names:
                    forwards.setdefault(name, further)
        if len(self._forwards) > 256:
            self._forwards.clear()
        self._forwards[target] = (entry, forwards)
        return forwards

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

    def usage(
        self,
        path: Path,
        lines: Sequence[str],
        cursor_line: int,
        imports: Sequence[Import],
        names: set[str],
        objects: set[str],
    ) -> Usage:
        """Return how the file uses ``names`` and ``objects``' attributes outside the cursor
        line, reused while that text is unchanged (so every keystroke in a line sees the
        same ranking)."""
        key = hash(
            (
                cursor_line,
                tuple(lines[:cursor_line]),
                tuple(lines[cursor_line + 1 :]),
                frozenset(names),
                frozenset(objects),
            )
        )
        found = self._usage.get(path)
        if found is not None and found[0] == key:
            return found[1]
        entry = self.entry(path)
        symbols = entry.symbols if entry is not None else []
        usage = usage_profile(lines, cursor_line, symbols, imports, names, objects, self._idents)
        if len(self._usage) > 32:
            self._usage.clear()
        self._usage[path] = (key, usage)
        return usage

    @staticmethod
    def _anticipation(
        name: str, sym: Symbol, usage: Usage, cursor_line: int, unused: int
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

    def _api(self, path: Path) -> list[Symbol]:
        """Return the public top-level functions and classes of ``path`` (all but dunders for
        a private module), cached per entry."""
        entry = self.entry(path)
        if entry is None:
            return []
        found = self._apis.get(path)
        if found is not None and found[0] is entry:
            return found[1]
        private = path.stem.startswith("_")  # a private module is imported for its insides
        api = [
            s
            for s in entry.symbols
            if s.parent is None
            and s.kind in ("function", "class")
            and (private or not s.name.startswith("_"))
            and not s.name.startswith("__")
        ]
        if len(self._apis) > 256:
            self._apis.clear()
        self._apis[path] = (entry, api)
        return api

    def module_aliases(self, path: Path, imports: Iterable[Import]) -> dict[Path, set[str]]:
        """Return the files ``path`` imports as whole modules, with the names that reach
        them (``import a.b`` -> b, ``from pkg import mod`` -> mod)."""
        out: dict[Path, set[str]] = {}
        for imp in imports:
            target = self.resolve(path, imp)
            if target is None or target == path or self.denied(target):
                continue
            if not imp.names:
                name = imp.module.replace("::", ".").rsplit(".", 1)[-1].rsplit("/", 1)[-1]
                out.setdefault(target, set()).add(name.strip("\"'<>"))
            for name in imp.names:
                if name in (target.stem, target.parent.name):
                    out.setdefault(target, set()).add(name)
        return out

    def _module_members(
        self, modules: dict[Path, set[str]], usage: Usage, words: set[str]
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
            api = self._api(target)
            if not api:
                continue
            used = {a for a, objs in usage.attrs.items() if objs & aliases}
            prior = 0.25 / math.sqrt(max(1.0, len(api) / 3)) * (0.5 if used else 1.0)
            alias = sorted(aliases)[0]
            ranked: list[tuple[float, str, Symbol]] = []
            for sym in api:
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
        text: str | None = None,
        cursor_line: int = -1,
        cursor_text: str = "",
    ) -> list[Candidate]:
        """Return the candidates at or above ``threshold``, best first (deterministic).

        With the file's ``text`` and the ``cursor_line``, the names the file can reach are
        ranked by how likely the next statement uses them (``_anticipation``), except
        those already referenced on the cursor line (``cursor_text``: finished calls and
        attribute chains), which keep the zone's rules and score highest.
        """
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
        for further, reexported in self.reexported(files, imported_names).items():
            files.setdefault(further, set()).update(reexported)
        reachable = {n for n in imported_names if n not in KEYWORDS and n != "*"}
        usage: Usage | None = None
        unused = 0
        if text is not None and cursor_line >= 0:
            lines = text.split("\n")
            modules = self.module_aliases(path, imports)
            objects = set().union(*modules.values()) if modules else set()
            usage = self.usage(path, lines, cursor_line, imports, reachable, objects)
            for local, original in usage.aliases.items():
                if local in zone_set:
                    zone_set.add(original)
                if local in near:
                    near.add(original)
            for attr, objs in usage.attrs.items():
                attrs.setdefault(attr, set()).update(objs)
            reachable |= {a for a in usage.attrs if a not in KEYWORDS}
            unused = sum(1 for n in imported_names if n in reachable and not usage.uses(n))
            words = set().union(*map(subwords, in_zone)) if in_zone else set()
            members = self._module_members(modules, usage, words)
        else:
            members = {}
        at_cursor = set(identifiers(cursor_text))
        names = sorted(zone_set | reachable | members.keys())
        out: dict[tuple[Path, int], Candidate] = {}
        for name in names:
            try:
                symbols = self.index.lookup(name)
            except IndexError_:
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
            if name in members and not any(evidence.values()):
                module_file, _, why = members[name]
                for s in symbols:
                    if str(s.path) == module_file and s.parent is None:
                        evidence[(s.path, s.start_line)] = why
            from_imports = [s for s in symbols if evidence[(s.path, s.start_line)]]
            if from_imports:
                symbols = from_imports
            elif name not in zone_set and name not in imported_names:
                continue  # an attribute or member name with no definition where it points
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
                why = evidence[(sym.path, sym.start_line)]
                weight = 0.45 if name in imported_names else 0.35
                if name in members and why == members[name][2]:
                    score = members[name][1]
                    reasons.append(why)
                elif why and usage is not None and name not in at_cursor:
                    score, reasons = self._anticipation(name, sym, usage, cursor_line, unused)
                    reasons.insert(0, why)
                elif name in zone_set:
                    score += 0.45
                    reasons.append("in editing zone")
                    if name in near:
                        score += 0.2
                        reasons.append("near cursor")
                    if why:
                        score += weight
                        reasons.append(why)
                elif why:
                    score += 0.1 + weight
                    reasons.append(why)
                else:
                    score += 0.1
                if not why and sym.path.parent == path.parent:
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
                key = (sym.path, sym.start_line)
                prev = out.get(key)
                if prev is None or prev.score < score:
                    out[key] = Candidate(
                        symbol=sym,
                        source=self.relative(sym.path),
                        score=score,
                        reason=", ".join(reasons),
                        language=language,
                    )
        ranked = sorted(out.values(), key=lambda c: (-c.score, c.key))
        return ranked

    def select(
        self,
        candidates: Sequence[Candidate],
        budget: int,
        count: Callable[[str], int],
        header_cost: Callable[[str], int],
    ) -> list[Chosen]:
        """Return what goes into the layer within ``budget`` tokens, in prompt order.

        The definitions named at the cursor go in whole first (else as signature + doc);
        then every other candidate, best first, gets its compact signature; then, best
        first, candidates scoring at least ``BODY_SCORE`` are enlarged to their whole
        definition (else signature + doc) while that fits. ``header_cost(source)`` is
        what the first definition from a file pays for the file's header.
        """
        chosen: dict[tuple[str, int], Chosen] = {}
        headers: set[str] = set()
        spent = 0

        def overlaps(cand: Candidate) -> bool:
            sym = cand.symbol
            return any(
                o.candidate.symbol.path == sym.path
                and not (
                    sym.end_line < o.candidate.symbol.start_line
                    or sym.start_line > o.candidate.symbol.end_line
                )
                for o in chosen.values()
            )

        rendered: dict[tuple[str, int], tuple[str, str, str] | None] = {}

        def forms(cand: Candidate) -> tuple[str, str, str] | None:
            if cand.key not in rendered:
                found = self._render(cand.symbol, cand.language)
                rendered[cand.key] = (
                    None
                    if found is None
                    else (
                        found[0] + "\n",
                        found[1] + "\n",
                        found[2] + "\n",
                    )
                )
            return rendered[cand.key]

        def add(cand: Candidate, options: list[tuple[str, str]]) -> None:
            nonlocal spent
            if cand.key in chosen or overlaps(cand):
                return
            header = 0 if cand.source in headers else header_cost(cand.source)
            for form, text in options:
                if len(text) // MAX_CHARS_PER_TOKEN > budget - spent - header:
                    continue  # cannot fit: not worth tokenizing
                cost = count(text)
                if spent + cost + header <= budget:
                    chosen[cand.key] = Chosen(cand, text, form, cost)
                    spent += cost + header
                    headers.add(cand.source)
                    return

        ranked = list(candidates[:MAX_CONSIDERED])
        for cand in ranked:
            found = forms(cand) if cand.score >= AT_CURSOR else None
            if found is not None:
                options = [("full", found[0]), ("short", found[1])]
                bodies = [(f, t) for f, t in options if count(t) <= budget * AT_CURSOR_SHARE]
                add(cand, [*bodies, ("signature", found[2])])
        for cand in ranked:
            if budget - spent < MIN_ITEM_TOKENS:
                break
            found = forms(cand)
            if found is not None:
                add(cand, [("signature", found[2])])
        for cand in ranked:
            item = chosen.get(cand.key)
            found = rendered.get(cand.key)
            if item is None or found is None or item.form != "signature":
                continue
            if cand.score < BODY_SCORE:
                continue
            for form, text in (("full", found[0]), ("short", found[1])):
                if text == item.text or len(text) // MAX_CHARS_PER_TOKEN > budget - spent:
                    continue
                cost = count(text)
                if cost <= budget * BODY_SHARE and spent - item.tokens + cost <= budget:
                    spent += cost - item.tokens
                    chosen[cand.key] = Chosen(cand, text, form, cost)
                    break
        return sorted(chosen.values(), key=lambda c: c.candidate.key)


_REFERENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*(?:\(|\.|::|->)(?:\s*[A-Za-z_][A-Za-z0-9_]*)?")
"""A finished call or attribute chain (``name(``, ``name.``, ``name::``, ``name->``)."""


def related_layer(
    retriever: Retriever,
    maker: PieceMaker,
    cursor: Cursor,
    zone: Zone,
    imports: list[Import],
    recent: set[Path],
    budget: int,
    threshold: float,
) -> tuple[Rendered, list[Candidate]]:
    """Return the ``related`` layer within ``budget`` tokens and the candidates it holds."""
    # On the cursor line only finished calls and attribute chains count (``name(``,
    # ``name.``): every other word being typed would reshuffle the layer.
    typed_refs = " ".join(_REFERENCE.findall(zone.typed))
    near_lines = (zone.before.split("\n")[-3:]) if zone.before else []
    near = "\n".join([*near_lines, typed_refs, zone.after.split("\n", 1)[0]])
    zone_text = zone.before + typed_refs + "\n" + zone.after
    candidates = retriever.candidates(
        path=cursor.path,
        language=cursor.language,
        zone_text=zone_text,
        near_text=near,
        typed_partial=partial_identifier(zone.typed),
        imports=imports,
        recent=recent,
        threshold=threshold,
        text=cursor.text,
        cursor_line=cursor.line,
        cursor_text=typed_refs,
    )
    chosen = retriever.select(
        candidates,
        budget,
        maker.counter.count,
        lambda source: cost(maker.source_header("related", source, "From ", cursor.language)),
    )
    out = Rendered()
    current = None
    for pick in chosen:
        cand, text = pick.candidate, pick.text
        if cand.source != current:
            out.pieces += maker.source_header("related", cand.source, "From ", cursor.language)
            current = cand.source
        piece = maker.piece("related", text)
        out.pieces.append(piece)
        sym = cand.symbol
        out.items.append(
            LayerItem(
                source=cand.source,
                symbol=f"{sym.parent}.{sym.name}" if sym.parent else sym.name,
                score=cand.score,
                reason=cand.reason + pick.note,
                tokens=len(piece.ids),
                text=text,
            )
        )
    return out, [pick.candidate for pick in chosen]
