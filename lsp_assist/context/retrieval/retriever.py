"""The retriever: the index read for related definitions, and the candidates it yields.

Owns :class:`Retriever`: the index lookups memoised for a few seconds (entries, deny
decisions, import resolutions, texts, lines, renderings), what a file reaches through
its imports (the files, their aliases, one hop of re-exports, whole modules), how the
file uses names (``usage.py``, reused while the text around the cursor line is the
same) and :meth:`Retriever.candidates`, which applies the rules of ``scoring`` to every
name the zone, the imports and the reachable modules offer. The summaries and the
similar layer read the index through it too.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from lsp_assist.config import Bounded
from lsp_assist.context.retrieval.names import ATTRIBUTE, BARE, KEYWORDS, identifiers, subwords
from lsp_assist.context.retrieval.render import LineCache, render_definition
from lsp_assist.context.retrieval.scoring import (
    MAX_UNEVIDENCED,
    Candidate,
    anticipation,
    import_evidence,
    is_prototype,
    module_members,
)
from lsp_assist.context.retrieval.selection import Chosen, select
from lsp_assist.context.usage import IdentCache, NameUses, usage_profile
from lsp_assist.errors import IndexError_
from lsp_assist.index.model import FileEntry, Import, IndexLookup, Symbol

log = logging.getLogger(__name__)

_HEADERS = frozenset({".h", ".hh", ".hpp", ".hxx"})
_SOURCES = (".c", ".cc", ".cpp", ".cxx")

RESOLVE_TTL_S = 5.0
"""Import resolutions are reused this long (new files are found after it)."""
RESOLVE_MEMO = 20_000
"""Deny decisions, and import resolutions, memoised at most (each memo emptied when full)."""
TEXT_FILES = 1_000
"""Files whose text is memoised at most (emptied when full, and after ``RESOLVE_TTL_S``)."""
RENDERED_DEFINITIONS = 4096
"""Definitions whose three rendered forms are memoised (emptied when full)."""
USAGE_FILES = 32
"""Files whose name uses are memoised (emptied when full)."""
API_FILES = 256
"""Files whose public top-level definitions are memoised (emptied when full)."""
FORWARD_FILES = 256
"""Files whose re-exported names are memoised (emptied when full)."""

K = TypeVar("K")
V = TypeVar("V")


def _keep(memo: dict[K, V], key: K, value: V, limit: int) -> None:
    """Store ``value`` under ``key`` in ``memo``, emptying it first when it is full."""
    if key not in memo and len(memo) >= limit:
        memo.clear()
    memo[key] = value


class Retriever:
    """Finds and scores the definitions the editing zone uses or the next line may use."""

    def __init__(self, index: IndexLookup, relative: Callable[[Path], str]) -> None:
        self.index = index
        self.relative = relative
        self._lines = LineCache()
        self._render_cache: dict[tuple[Path, int, int, str], tuple[str, str, str]] = {}
        self._idents = IdentCache()
        self._usage: dict[Path, tuple[int, NameUses]] = {}
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
        if force or now - self._resolved_at > RESOLVE_TTL_S:
            self._denied.clear()
            self._resolved.clear()
            self._texts.clear()
            self._forwards.clear()
            self._resolved_at = now

    def bounds(self) -> dict[str, Bounded]:
        """The memos against their constants (this module's, ``render.py``'s, ``usage.py``'s)."""
        here = "context/retrieval/retriever.py "
        memos: list[tuple[str, int, int, str, str]] = [
            ("denied", len(self._denied), RESOLVE_MEMO, "files", "RESOLVE_MEMO"),
            ("resolved", len(self._resolved), RESOLVE_MEMO, "imports", "RESOLVE_MEMO"),
            ("texts", len(self._texts), TEXT_FILES, "files", "TEXT_FILES"),
            (
                "rendered",
                len(self._render_cache),
                RENDERED_DEFINITIONS,
                "definitions",
                "RENDERED_DEFINITIONS",
            ),
            ("usage", len(self._usage), USAGE_FILES, "files", "USAGE_FILES"),
            ("apis", len(self._apis), API_FILES, "files", "API_FILES"),
            ("forwards", len(self._forwards), FORWARD_FILES, "files", "FORWARD_FILES"),
        ]
        out = {
            f"retriever.{name}": Bounded(size, bound, unit, here + constant)
            for name, size, bound, unit, constant in memos
        }
        out.update(self._lines.bounds())
        out.update(self._idents.bounds())
        return out

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
            _keep(self._denied, path, found, RESOLVE_MEMO)
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
        _keep(self._resolved, key, target, RESOLVE_MEMO)
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
            _keep(self._texts, path, (entry, text), TEXT_FILES)
        else:
            self._texts.pop(path, None)
        return text

    def lines_of(self, path: Path) -> list[str] | None:
        """Return the lines of ``path`` through the index (cached split)."""
        return self._lines.lines(self.text_of(path), path)

    def _render(self, sym: Symbol, language: str) -> tuple[str, str, str] | None:
        """Return (full, short, signature) texts of a definition (cached per first line)."""
        lines = self.lines_of(sym.path)
        if lines is None or sym.start_line >= len(lines):
            return None
        end = min(sym.end_line, len(lines) - 1)
        key = (sym.path, sym.start_line, end, lines[sym.start_line])
        cached = self._render_cache.get(key)
        if cached is not None:
            return cached
        result = render_definition(sym, lines, language, self.index.symbols_of)
        _keep(self._render_cache, key, result, RENDERED_DEFINITIONS)
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
        _keep(self._forwards, target, (entry, forwards), FORWARD_FILES)
        return forwards

    def usage(
        self,
        path: Path,
        lines: Sequence[str],
        cursor_line: int,
        imports: Sequence[Import],
        names: set[str],
        objects: set[str],
    ) -> NameUses:
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
        _keep(self._usage, path, (key, usage), USAGE_FILES)
        return usage

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
        _keep(self._apis, path, (entry, api), API_FILES)
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
        self, modules: dict[Path, set[str]], usage: NameUses, words: set[str]
    ) -> dict[str, tuple[str, float, str]]:
        """Return the unused members of imported modules as candidates (``module_members``)."""
        return module_members(modules, usage, words, self._api)

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
        ranked by how likely the next statement uses them (``scoring.anticipation``), except
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
        for obj, attr in ATTRIBUTE.findall(zone_text):
            attrs.setdefault(attr, set()).add(obj)
        all_idents = set(in_zone)
        bare = {m.group(1) for m in BARE.finditer(zone_text)}
        files, imported_names = self.imported(path, imports)
        for further, reexported in self.reexported(files, imported_names).items():
            files.setdefault(further, set()).update(reexported)
        reachable = {n for n in imported_names if n not in KEYWORDS and n != "*"}
        usage: NameUses | None = None
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
                (s.path, s.start_line): import_evidence(
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
            bodies = [s for s in symbols if not is_prototype(s)]
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
                    score, reasons = anticipation(name, sym, usage, cursor_line, unused)
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
        """Return what goes into the layer within ``budget`` tokens, in prompt order
        (``selection.select`` over this retriever's renderings)."""
        return select(candidates, budget, count, header_cost, self._render)
