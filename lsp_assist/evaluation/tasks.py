"""Evaluation tasks: real lines of a workspace to complete, chosen with a fixed seed.

A task is one line of code whose text is removed (its indentation kept) from
everything the server sees, the buffer and the file on disk, with the cursor at the
indentation. Three kinds:

- ``cross_file``: the line calls a function or class defined in another file of the
  workspace, reached through one of the file's imports (``name(...)`` imported by name,
  ``module.name(...)`` through an imported module, re-exports followed);
- ``in_file``: any other ordinary one-line statement;
- ``typing``: a line retyped one keystroke at a time (server_row.py replays it).

Lines are one whole statement (tree-sitter: the node starting at the indentation
ends at the end of the line, without errors), not a definition, import, comment or
docstring, 8-120 characters, and their stripped text occurs once in the workspace, so
that finding it in a prompt can only mean it leaked. Files are visited in an order
shuffled by the seed, at most ``per_file`` tasks of each kind per file: the same
workspace and seed always give the same tasks. No pygls and no model here.
"""

from __future__ import annotations

import keyword
import random
import re
import shutil
from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from lsp_assist.context import get_parser
from lsp_assist.documents import language_for_path
from lsp_assist.index import Symbol

TaskKind = Literal["cross_file", "in_file", "typing"]
TASK_KINDS: tuple[TaskKind, ...] = ("cross_file", "in_file", "typing")
HOLE_KINDS: tuple[TaskKind, ...] = ("cross_file", "in_file")
"""The kinds that punch a hole and ask once (the typing replay asks at every keystroke)."""
DEFAULT_SEED = 14
MIN_CHARS, MAX_CHARS = 8, 120
TYPING_CHARS = (16, 60)
"""Typed lines are this long (stripped): long enough to type, short enough to afford."""
CALLABLE_KINDS = frozenset({"function", "class", "struct", "interface", "enum", "type"})

_EXCLUDED_NODE_WORDS = (
    "import",
    "include",
    "comment",
    "function",
    "class",
    "method",
    "decorat",
    "package",
    "use_declaration",
    "struct",
    "interface",
    "enum",
    "impl",
    "module",
    "namespace",
    "preproc",
    "if_",
    "for_",
    "while_",
    "try_",
    "with_",
    "switch_",
    "match_",
    "do_",
    "else",
    "pass_",
    "break_",
    "continue_",
)
"""Node types that are not an ordinary line of code (definitions, imports, control heads)."""
_STRING_TYPES = frozenset({"string", "concatenated_string", "string_literal", "template_string"})
_COMMENT_STARTS = ("#", "//", "/*", "*", "--", '"""', "'''")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OTHER_KEYWORDS = frozenset(
    [
        "return",
        "new",
        "var",
        "let",
        "const",
        "await",
        "async",
        "yield",
        "throw",
        "func",
        "go",
        "defer",
        "mut",
        "self",
        "this",
        "true",
        "false",
        "nil",
        "null",
        "int",
        "char",
        "void",
        "auto",
        "static",
        "final",
        "public",
        "private",
        "protected",
        "fn",
        "pub",
        "impl",
        "struct",
        "enum",
        "match",
        "if",
        "else",
        "for",
        "while",
        "do",
        "switch",
        "case",
        "break",
        "continue",
        "goto",
        "sizeof",
        "typeof",
        "instanceof",
        "in",
        "of",
        "try",
        "catch",
        "finally",
        "package",
        "import",
        "export",
        "default",
        "extends",
        "implements",
        "interface",
        "type",
        "unsigned",
        "signed",
        "long",
        "short",
        "float",
        "double",
        "bool",
        "boolean",
        "string",
        "delete",
    ]
)
"""Keywords of the other languages (C, C++, Go, Java, JavaScript, TypeScript, Rust)."""


@dataclass(frozen=True, slots=True)
class Task:
    """One line to complete: where it is, what it was, what it calls."""

    id: str
    kind: TaskKind
    path: str
    """Workspace-relative path, '/'-separated."""
    language: str
    line: int
    """0-based line."""
    indent: int
    """Columns of indentation kept on the blanked line (where the cursor goes)."""
    target: str
    """The original line, without its line break."""
    called: str = ""
    """cross_file: the called function or class."""
    definition: str = ""
    """cross_file: the workspace-relative file that defines it."""
    needles: tuple[str, ...] = ()
    """cross_file: texts of the definition, one of which a prompt carrying it contains."""
    key: str = ""
    """The name identifier match checks: the called name (cross_file), else the first
    called or first non-keyword identifier of the line."""

    @property
    def expected(self) -> str:
        """What the completion should insert at the cursor: the line after its indentation."""
        return self.target[self.indent :].rstrip()

    def to_json(self) -> dict[str, Any]:
        """Return the task as a JSON object."""
        out = asdict(self)
        out["needles"] = list(self.needles)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Task:
        """Return the task a :meth:`to_json` object describes."""
        values = dict(data)
        values["needles"] = tuple(values.get("needles", ()))
        return cls(**values)


def is_keyword(word: str, language: str) -> bool:
    """True when ``word`` is a keyword of ``language`` (Python's own list for Python)."""
    if language == "python":
        return keyword.iskeyword(word) or keyword.issoftkeyword(word)
    return word in _OTHER_KEYWORDS


def identifiers(text: str, language: str = "python") -> list[str]:
    """Return the identifiers of a line of code, in order (keywords left out)."""
    return [w for w in _IDENTIFIER.findall(text) if not is_keyword(w, language)]


def key_identifier(text: str, language: str = "python") -> str:
    """Return the name a line is about: the first one called, else its first identifier."""
    for match in _IDENTIFIER.finditer(text):
        word = match.group(0)
        if text[match.end() :].lstrip().startswith("(") and not is_keyword(word, language):
            return word
    names = identifiers(text, language)
    return names[0] if names else ""


def blank_line(text: str, line: int, indent: int) -> str:
    """Return ``text`` with line ``line`` cut to its first ``indent`` columns (line break kept)."""
    lines = text.split("\n")
    raw = lines[line]
    lines[line] = raw[:indent] + ("\r" if raw.endswith("\r") else "")
    return "\n".join(lines)


_MARKERS = re.compile(r"^(?:<[^<>\s]{1,40}>)+|(?:<[^<>\s]{1,40}>)+$")
"""Special tokens written out at the start or end of a prompt line (``<fim_suffix>``...)."""


def prompt_leaks(prompt: str, target: str) -> bool:
    """True when the target line (stripped) is a whole line of ``prompt``.

    A line counts with the special tokens written out before or after it (a FIM
    prompt's suffix starts with ``<fim_suffix>`` on the line the cursor is on).
    """
    wanted = target.strip()
    if not wanted:
        return False
    for part in prompt.split("\n"):
        line = part.strip()
        if line == wanted or _MARKERS.sub("", line).strip() == wanted:
            return True
    return False


# -- workspace ---------------------------------------------------------------------


def copy_workspace(files: Iterable[Path], root: Path, destination: Path) -> Path:
    """Copy ``files`` (under ``root``) to ``destination`` keeping relative paths and mtimes.

    The server runs on the copy, so a task can blank its line on disk without touching
    the user's files. Returns ``destination``.
    """
    root = root.resolve()
    for path in files:
        rel = path.resolve().relative_to(root)
        target = destination / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return destination


# -- finding lines ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Line:
    line: int
    indent: int
    text: str
    symbol: Symbol | None = None
    called: str = ""


@dataclass(slots=True)
class _Quota:
    cross_file: int
    in_file: int
    typing: int
    taken: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TASK_KINDS, 0))

    def need(self, kind: str) -> int:
        return max(0, int(getattr(self, kind)) - self.taken[kind])

    def done(self) -> bool:
        return all(self.need(kind) == 0 for kind in TASK_KINDS)


def _statement_ok(root: Any, line: int, indent: int, end_byte_col: int) -> bool:
    """True when the node at (line, indent) is one whole ordinary statement of that line."""
    node = root.named_descendant_for_point_range((line, indent), (line, indent))
    while (
        node is not None
        and node.parent is not None
        and node.parent.start_point == (line, indent)
        and node.parent.end_point[0] == line
        and node.parent.parent is not None
    ):
        node = node.parent
    if node is None or node.parent is None:
        return False
    if node.start_point != (line, indent) or node.end_point != (line, end_byte_col):
        return False
    if node.has_error or node.is_missing:
        return False
    kind = str(node.type)
    if not (kind.endswith(("_statement", "_declaration", "declaration")) or kind == "expression"):
        return False
    if any(word in kind for word in _EXCLUDED_NODE_WORDS):
        return False
    children = [c for c in node.named_children if c.type != "comment"]
    return not (len(children) == 1 and children[0].type in _STRING_TYPES)


def definition_in(
    index: Any,
    target: Path,
    name: str,
    depth: int = 0,
    kinds: Collection[str] = CALLABLE_KINDS,
) -> Symbol | None:
    """Return the top-level definition ``name`` of ``target`` (one of ``kinds``), following
    re-exports twice."""
    for sym in index.symbols_of(target):
        if sym.name == name and sym.parent is None:
            return sym if sym.kind in kinds else None
    entry = index.file(target)
    if entry is None or depth >= 2:
        return None
    for imp in entry.imports:
        if name in imp.names:
            further = index.resolve_import(target, imp)
            if further is not None and further != target:
                return definition_in(index, further, name, depth + 1, kinds)
    return None


def reachable_calls(index: Any, path: Path) -> list[tuple[re.Pattern[str], str, Symbol]]:
    """Return (call pattern, name, definition) for each callable another file gives ``path``.

    By name for imports that bind names (``from m import f``, ``use a::f``, ES
    ``import {f}``), as ``alias.name`` for whole-module imports (``import m``, Go
    packages), and by bare name for C/C++ includes.
    """
    entry = index.file(path)
    if entry is None:
        return []
    calls: dict[str, tuple[re.Pattern[str], str, Symbol]] = {}
    for imp in entry.imports:
        target = index.resolve_import(path, imp)
        if target is None or target == path:
            continue
        if imp.names:
            for name in imp.names:
                sym = definition_in(index, target, name)
                if sym is not None and sym.path != path:
                    calls[name] = (re.compile(rf"(?<![\w.]){re.escape(name)}\s*\("), name, sym)
                elif sym is None and target.stem == name:  # from package import module
                    _module_calls(index, path, target, name, False, calls)
            continue
        alias = re.split(r"[./:\\]", imp.module.strip("\"'<>").rstrip("/"))[-1]
        _module_calls(index, path, target, alias, entry.language in ("c", "cpp"), calls)
    return [calls[k] for k in sorted(calls)]


def _module_calls(
    index: Any,
    path: Path,
    target: Path,
    alias: str,
    bare: bool,
    calls: dict[str, tuple[re.Pattern[str], str, Symbol]],
) -> None:
    """Add the calls of ``target``'s top-level callables as ``alias.name`` (or bare)."""
    for sym in index.symbols_of(target):
        if sym.parent is not None or sym.kind not in CALLABLE_KINDS or sym.path == path:
            continue
        if bare:
            ref = rf"(?<![\w.]){re.escape(sym.name)}\s*\("
        elif alias:
            ref = rf"(?<![\w.]){re.escape(alias)}\.{re.escape(sym.name)}\s*\("
        else:
            continue
        calls.setdefault(f"{alias}.{sym.name}", (re.compile(ref), sym.name, sym))


def candidate_lines(index: Any, path: Path, text: str, unique: Counter[str]) -> list[_Line]:
    """Return the lines of one file fit to be a task, with the cross-file call of each."""
    language = language_for_path(path)
    parser = get_parser(language) if language else None
    if parser is None:
        return []
    root = parser.parse(text.encode("utf-8", "surrogatepass")).root_node
    calls = reachable_calls(index, path)
    found: list[_Line] = []
    for i, raw in enumerate(text.split("\n")):
        raw = raw.rstrip("\r")
        stripped = raw.strip()
        if not MIN_CHARS <= len(stripped) <= MAX_CHARS or unique[stripped] != 1:
            continue
        if stripped.startswith(_COMMENT_STARTS):
            continue
        indent = len(raw) - len(raw.lstrip())
        end_col = len(raw.rstrip().encode("utf-8", "surrogatepass"))
        if not _statement_ok(root, i, indent, end_col):
            continue
        hit: tuple[int, str, Symbol] | None = None
        for pattern, name, sym in calls:
            match = pattern.search(raw)
            if match is not None and (hit is None or match.start() < hit[0]):
                hit = (match.start(), name, sym)
        if hit is None:
            found.append(_Line(i, indent, raw))
        else:
            found.append(_Line(i, indent, raw, hit[2], hit[1]))
    return found


def definition_needles(index: Any, sym: Symbol) -> tuple[str, ...]:
    """Return texts showing a definition is in a prompt: its signature, its first line."""
    out = [sym.signature.strip().split("\n")[0][:60]]
    lines = (index.text_of(sym.path) or "").split("\n")
    if sym.start_line < len(lines) and sym.name in lines[sym.start_line]:
        out.append(lines[sym.start_line].strip())
    return tuple(dict.fromkeys(n for n in out if n))


def line_counts(index: Any, files: Iterable[Path]) -> Counter[str]:
    """Return how often each stripped line occurs across ``files``."""
    counts: Counter[str] = Counter()
    for path in files:
        counts.update(x.strip() for x in (index.text_of(path) or "").split("\n"))
    return counts


def generate_tasks(
    index: Any,
    *,
    cross_file: int,
    in_file: int,
    typing: int = 0,
    seed: int = DEFAULT_SEED,
    per_file: int = 2,
) -> list[Task]:
    """Choose the tasks from a scanned index: the same index and seed give the same list.

    Visits the indexed files in an order shuffled by ``seed`` and takes up to
    ``per_file`` lines of each kind from each until the counts are met (fewer when the
    workspace has fewer). Typed lines are in-file or cross-file lines of
    :data:`TYPING_CHARS` characters inside a block, never a line another task uses.
    """
    files = sorted(p for p in index.files() if language_for_path(p) is not None)
    unique = line_counts(index, files)
    rng = random.Random(seed)
    order = list(files)
    rng.shuffle(order)
    quota = _Quota(cross_file=cross_file, in_file=in_file, typing=typing)
    tasks: list[Task] = []
    for path in order:
        if quota.done():
            break
        text = index.text_of(path)
        if not text:
            continue
        lines = candidate_lines(index, path, text, unique)
        cross = [c for c in lines if c.symbol is not None]
        local = [c for c in lines if c.symbol is None]
        chosen: set[int] = set()
        picks: list[tuple[TaskKind, _Line]] = []
        pools: tuple[tuple[TaskKind, list[_Line]], ...] = (
            ("cross_file", cross),
            ("in_file", local),
        )
        for kind, pool in pools:
            count = min(per_file, len(pool), quota.need(kind))
            for item in rng.sample(pool, count):
                picks.append((kind, item))
                chosen.add(item.line)
        typable = [
            c
            for c in lines
            if c.line not in chosen
            and c.indent > 0
            and TYPING_CHARS[0] <= len(c.text.strip()) <= TYPING_CHARS[1]
        ]
        count = min(1, len(typable), quota.need("typing"))
        picks += [("typing", item) for item in rng.sample(typable, count)]
        rel = index.relative(path)
        language = language_for_path(path) or ""
        for kind, item in sorted(picks, key=lambda p: p[1].line):
            quota.taken[kind] += 1
            tasks.append(_task(index, kind, quota.taken[kind], rel, language, item))
    return tasks


def _task(index: Any, kind: TaskKind, number: int, rel: str, language: str, item: _Line) -> Task:
    prefix = {"cross_file": "x", "in_file": "i", "typing": "t"}[kind]
    sym = item.symbol
    text = item.text[item.indent :]
    return Task(
        id=f"{prefix}{number:03d}",
        kind=kind,
        path=rel,
        language=language,
        line=item.line,
        indent=item.indent,
        target=item.text,
        called=item.called if sym is not None else "",
        definition=index.relative(sym.path) if sym is not None else "",
        needles=definition_needles(index, sym) if sym is not None else (),
        key=item.called if sym is not None else key_identifier(text, language),
    )
