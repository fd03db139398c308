"""The acceptance replay's tasks: regions of real function bodies, and the keys that retype them.

A region is 3-8 consecutive lines inside a function body (tree-sitter), chosen
deterministically for a seed: files in an order shuffled by the seed, at most one region
per file. Every line of a region is non-blank, ASCII, at most 120 characters, outside
any docstring or multi-line string, and code (a line that is only a comment is not). The
region is deleted from the file and retyped from its first line's indentation, which is
left in place (as auto-indent gives it). Keys: one per character, except that a newline
together with the next line's indentation is one key (auto-indent). No pygls, no model.
docs/evaluation.md, "Acceptance replay".
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lsp_assist.context import get_parser
from lsp_assist.documents import language_for_path

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

    def to_json(self) -> dict[str, Any]:
        """Return the region as a JSON object."""
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Region:
        """Return the region a :meth:`to_json` object describes."""
        return cls(**data)


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


def regions_from_json(items: Sequence[dict[str, Any]]) -> list[Region]:
    """Return the regions of a results.json."""
    return [Region.from_json(x) for x in items]
