"""The acceptance replay's tasks: regions of real function bodies, and the keys that retype them.

A region is 3-8 consecutive lines inside a function body (tree-sitter), chosen
deterministically for a seed: files in an order shuffled by the seed, at most one region
per file. Every line of a region is non-blank, ASCII, at most 120 characters, outside
any docstring or multi-line string, and code (a line that is only a comment is not). The
region is deleted from the file and retyped from its first line's indentation, which is
left in place (as auto-indent gives it). Keys: one per character, except that a newline
together with the next line's indentation is one key (auto-indent). A region's lines that
use a top-level name defined in another file of the workspace (and not in its own) are
marked cross-file from the workspace's index (:func:`mark_cross_lines`). No pygls, no
model. docs/evaluation.md, "Acceptance replay".
"""

from __future__ import annotations

import builtins
import dataclasses
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lsp_assist.context import get_parser
from lsp_assist.documents import language_for_path
from lsp_assist.evaluation.tasks import is_keyword

MIN_LINES, MAX_LINES = 3, 8
"""Lines per region."""
MAX_LINE_CHARS = 120
_COMMENT_STARTS = ("#", "//", "/*", "*", "--")
_BODY_OWNERS = ("function", "method", "constructor", "lambda")
"""A node whose type contains one of these and that has a ``body`` field is a function."""


@dataclass(frozen=True, slots=True)
class Region:
    """Lines ``start``-``end`` (0-based, end excluded) of one file, to retype."""

    id: str
    path: str
    """Workspace-relative, '/'-separated."""
    language: str
    start: int
    end: int
    indent: str
    """The first line's indentation: already in the buffer when typing starts."""
    target: str
    """What the user types: the region from its first line's indentation, the lines
    joined by newlines, trailing whitespace of each line left out."""
    cross_lines: tuple[int, ...] = ()
    """The region's lines (0-based from its first) that use a name defined in another
    file of the workspace and not in its own (:func:`mark_cross_lines`)."""
    cross_names: tuple[str, ...] = ()
    """Those names, each once, in order."""

    def to_json(self) -> dict[str, Any]:
        """Return the region as a JSON object."""
        data = asdict(self)
        data["cross_lines"], data["cross_names"] = list(self.cross_lines), list(self.cross_names)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Region:
        """Return the region a :meth:`to_json` object describes (older ones: none marked)."""
        values = dict(data)
        values["cross_lines"] = tuple(values.get("cross_lines", ()))
        values["cross_names"] = tuple(values.get("cross_names", ()))
        return cls(**values)


def region_buffers(text: str, region: Region) -> tuple[str, str]:
    """Return the buffer before the cursor and after the typed text, with the region removed.

    ``before + target[:p] + after`` is the buffer once ``p`` characters are typed; with
    all of them typed it is the file with the region's trailing whitespace trimmed.
    """
    lines = text.split("\n")
    before = "\n".join(lines[: region.start])
    before = (before + "\n" if region.start > 0 else "") + region.indent
    after = "\n" + "\n".join(lines[region.end :]) if region.end < len(lines) else ""
    return before, after


def next_key(target: str, p: int) -> str:
    """Return the text the next key types at ``p``: a character, or newline + indentation.

    A newline comes with the next line's indentation (auto-indent: one key). Whitespace
    at a line's start that is still missing (after an accepted suggestion that ended in
    the indentation) is likewise one key.
    """
    if p >= len(target):
        return ""
    if target[p] == "\n":
        return target[p : _indent_end(target, p + 1)]
    line_start = target.rfind("\n", 0, p) + 1
    if line_start > 0 and target[p] in " \t" and not target[line_start:p].strip(" \t"):
        return target[p : _indent_end(target, p)]
    return target[p]


def _indent_end(target: str, p: int) -> int:
    while p < len(target) and target[p] in " \t":
        p += 1
    return p


def keys_between(target: str, start: int, end: int) -> int:
    """Return how many keys type ``target[start:end]`` without suggestions."""
    count, p = 0, start
    while p < end:
        p += len(next_key(target, p))
        count += 1
    return count


def key_sequence(target: str) -> list[str]:
    """Return the keys that type ``target`` from scratch (no suggestion accepted)."""
    keys: list[str] = []
    p = 0
    while p < len(target):
        keys.append(next_key(target, p))
        p += len(keys[-1])
    return keys


def within_line(target: str, p: int) -> bool:
    """True when code is typed before the cursor at ``p`` on its line (not a line's start)."""
    return bool(target[target.rfind("\n", 0, p) + 1 : p].strip())


def line_of(target: str, p: int) -> int:
    """Return the region's line (0-based) the cursor at ``p`` is on."""
    return target.count("\n", 0, p)


def rest_of_line(target: str, p: int) -> str:
    """Return what is still to type on the cursor's line at ``p`` (up to its end)."""
    end = target.find("\n", p)
    return target[p:] if end < 0 else target[p:end]


def keys_per_line(target: str) -> list[int]:
    """Return, per line of ``target``, the keys that type it without suggestions (a newline
    key counts on the line it ends)."""
    counts = [0] * (target.count("\n") + 1)
    p = 0
    while p < len(target):
        counts[line_of(target, p)] += 1
        p += len(next_key(target, p))
    return counts


# -- choosing regions -----------------------------------------------------------------


def body_lines(root: Any, source: bytes) -> set[int]:
    """Return the lines strictly inside function bodies (braces' own lines left out)."""
    inside: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if not any(word in str(node.type) for word in _BODY_OWNERS):
            continue
        body = node.child_by_field_name("body")
        if body is None or body.end_point[0] <= node.start_point[0]:
            continue
        first, last = body.start_point[0], body.end_point[0]
        text = source[body.start_byte : body.end_byte].strip()
        if text.startswith(b"{"):
            first += 1
        if text.endswith(b"}"):
            last -= 1
        if first <= node.start_point[0]:  # a one-line body on the head's line
            first = node.start_point[0] + 1
        inside.update(range(first, last + 1))
    return inside


def string_lines(root: Any) -> set[int]:
    """Return the lines of docstrings (a statement that is only a string, on any number of
    lines) and of every multi-line string (a text block)."""
    lines: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        kind = str(node.type)
        named = [c for c in node.named_children if c.type != "comment"]
        alone = kind == "expression_statement" and len(named) == 1 and "string" in named[0].type
        if alone or ("string" in kind and node.end_point[0] > node.start_point[0]):
            lines.update(range(node.start_point[0], node.end_point[0] + 1))
            continue
        stack.extend(node.children)
    return lines


def _line_ok(raw: str) -> bool:
    return bool(raw.strip()) and raw.isascii() and len(raw) <= MAX_LINE_CHARS


def _is_comment(raw: str) -> bool:
    return raw.strip().startswith(_COMMENT_STARTS)


def eligible_lines(text: str, language: str) -> list[bool]:
    """Return, per line, whether it may be in a region: inside a function body, non-blank,
    ASCII, short enough, not a comment, not in a docstring or a multi-line string."""
    parser = get_parser(language)
    lines = text.split("\n")
    if parser is None or "\r" in text:
        return [False] * len(lines)
    source = text.encode("utf-8", "surrogatepass")
    root = parser.parse(source).root_node
    inside = body_lines(root, source) - string_lines(root)
    return [i in inside and _line_ok(raw) and not _is_comment(raw) for i, raw in enumerate(lines)]


def candidate_starts(ok: Sequence[bool], length: int) -> list[int]:
    """Return the first lines of every ``length``-line window fit to be a region: every line
    eligible (``ok``)."""
    return [s for s in range(len(ok) - length + 1) if all(ok[s : s + length])]


def make_region(number: int, rel: str, language: str, text: str, start: int, length: int) -> Region:
    """Return the region of ``length`` lines from ``start`` of a file's ``text``."""
    lines = [x.rstrip() for x in text.split("\n")[start : start + length]]
    indent = lines[0][: len(lines[0]) - len(lines[0].lstrip())]
    return Region(
        id=f"r{number:03d}",
        path=rel,
        language=language,
        start=start,
        end=start + length,
        indent=indent,
        target="\n".join(lines)[len(indent) :],
    )


def choose_regions(root: Path, files: Iterable[str], count: int, seed: int) -> list[Region]:
    """Choose ``count`` regions from ``files`` (workspace-relative) under ``root``; same seed,
    same regions.

    Files are visited in an order shuffled by ``seed``; each draws a length of 3-8 lines
    (shorter ones are tried when it has no window that long) and one window of it.
    """
    rng = random.Random(seed)
    order = sorted(f for f in files if language_for_path(f) is not None)
    rng.shuffle(order)
    regions: list[Region] = []
    for rel in order:
        if len(regions) >= count:
            break
        length = rng.randint(MIN_LINES, MAX_LINES)
        try:
            text = (root / rel).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        language = language_for_path(rel) or ""
        ok = eligible_lines(text, language)
        for size in range(length, MIN_LINES - 1, -1):
            starts = candidate_starts(ok, size)
            if starts:
                start = rng.choice(starts)
                regions.append(make_region(len(regions) + 1, rel, language, text, start, size))
                break
    return regions


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUALIFIER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\.\s*$")
_STRING = re.compile(r"""("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*'|`(?:\\.|[^`\\])*`)""")
"""A one-line string literal (its words are not names the line uses)."""


_IMPORTS_BY_NAME = frozenset({"python", "javascript", "typescript", "tsx", "rust"})
"""Languages in which a name from another file is bound by an import that names it (in
Go, Java, C and C++ a bare name may come from another file without one)."""


def imported_names(index: Any, path: Path) -> tuple[set[str], set[str]]:
    """Return the names ``path``'s imports bind (``from os import path``, ES ``import
    {f}``) and the names through which it reaches another module's top level: those and
    each import's last module component (``import os.path`` -> ``path``, ``'./util'`` ->
    ``util``), as tasks.py reads them."""
    entry = index.file(path)
    bound: set[str] = set()
    modules: set[str] = set()
    for imp in entry.imports if entry is not None else ():
        bound.update(imp.names)
        modules.add(re.split(r"[./:\\]", imp.module.strip("\"'<>").rstrip("/"))[-1])
    modules.update(bound)
    modules.discard("")
    return bound, modules


def cross_names_of(index: Any, path: Path, text: str, language: str) -> tuple[str, ...]:
    """Return the names of one line of code that only another file of the workspace
    defines: a top-level definition elsewhere (``index.lookup``) and none of that name in
    ``path`` itself (``index.symbols_of``), used bare (in a language that imports by
    name, only a name an import binds: a local variable named like another file's
    function is not a use of it) or through an imported module (``mod.name`` defined in
    a file named ``mod``, or in the ``__init__``/``index``/``mod`` file of a folder named
    so; any other ``obj.name`` is an attribute the index cannot resolve); keywords,
    Python's builtins and what string literals hold left out."""
    text = _STRING.sub('""', text)
    own = {sym.name for sym in index.symbols_of(path)}
    bound, modules = imported_names(index, path)
    found: dict[str, None] = {}
    for match in _NAME.finditer(text):
        name = match.group(0)
        if name in found or name in own or is_keyword(name, language):
            continue
        if language == "python" and hasattr(builtins, name):
            continue
        qualifier = _QUALIFIER.search(text, 0, match.start())
        module = qualifier.group(1) if qualifier is not None else ""
        if module and module not in modules:
            continue
        if not module and language in _IMPORTS_BY_NAME and name not in bound:
            continue
        if any(
            sym.parent is None and sym.path != path and (not module or _module_of(sym.path, module))
            for sym in index.lookup(name)
        ):
            found[name] = None
    return tuple(found)


def _module_of(path: Path, module: str) -> bool:
    """True when ``path`` is the file module ``module`` names (``module.py``, ``module.ts``,
    or a folder ``module``'s ``__init__``, ``index`` or ``mod`` file)."""
    if path.stem == module:
        return True
    return path.stem in ("__init__", "index", "mod") and path.parent.name == module


def mark_cross_lines(index: Any, root: Path, regions: Sequence[Region]) -> list[Region]:
    """Return ``regions`` with their cross-file lines marked from ``index`` (a
    :class:`~lsp_assist.index.WorkspaceIndex` of ``root``, scanned)."""
    marked: list[Region] = []
    for region in regions:
        path = (root / region.path).resolve()
        lines: list[int] = []
        names: dict[str, None] = {}
        for i, line in enumerate(region.target.split("\n")):
            found = cross_names_of(index, path, line, region.language)
            if found:
                lines.append(i)
                names.update(dict.fromkeys(found))
        marked.append(
            dataclasses.replace(region, cross_lines=tuple(lines), cross_names=tuple(names))
        )
    return marked


def index_regions(
    root: Path, exclude: Sequence[str], cache_dir: Path, regions: Sequence[Region]
) -> list[Region]:
    """Open the workspace copy's index (its cache under ``cache_dir``, as the servers do),
    mark the regions' cross-file lines, close it."""
    from lsp_assist.config import IndexSettings, parse_settings, workspace_cache_dir
    from lsp_assist.index import WorkspaceIndex

    settings, _ = parse_settings({"cacheDir": str(cache_dir)})
    index = WorkspaceIndex(
        [root],
        IndexSettings(exclude_globs=list(exclude), watch=False),
        cache_dir=workspace_cache_dir(settings, root.resolve()),
    )
    try:
        index.scan()
        return mark_cross_lines(index, root, regions)
    finally:
        index.stop()


def regions_from_json(items: Sequence[dict[str, Any]]) -> list[Region]:
    """Return the regions of a results.json."""
    return [Region.from_json(x) for x in items]
