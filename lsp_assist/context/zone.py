"""The editing zone: the code around the cursor, verbatim, in whole syntactic blocks.

The zone starts from the outermost syntax node around the cursor that fits the line
and token limits (typically the enclosing function) and grows by whole sibling nodes
(its neighbours) before and, for fill-in-the-middle models, after it, up to
``editing_zone_lines`` lines. A block is never cut in half: when the enclosing
function is too large, the zone is made of whole statements of its body instead.

The zone is returned in three parts so the prompt can keep everything but the
typed part of the cursor line stable while the user types within that line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Zone:
    """The editing zone: lines ``start_line``..``end_line`` (inclusive) around the cursor."""

    start_line: int
    end_line: int
    before: str
    """Whole lines from ``start_line`` up to (not including) the cursor line."""
    typed: str
    """The cursor line up to the cursor."""
    after: str
    """The rest of the cursor line and the lines up to ``end_line`` (FIM only, else '')."""

    @property
    def line_count(self) -> int:
        """Number of lines in the zone."""
        return self.end_line - self.start_line + 1


def _parts(
    lines: list[str], start: int, end: int, line: int, col: int, fim: bool
) -> tuple[str, str, str]:
    before = "".join(f"{text}\n" for text in lines[start:line])
    cur = lines[line] if line < len(lines) else ""
    typed = cur[:col]
    if not fim:
        return before, typed, ""
    rest = cur[col:]
    tail = lines[line + 1 : end + 1]
    after = rest + "".join(f"\n{text}" for text in tail)
    if end + 1 < len(lines):
        after += "\n"
    return before, typed, after


def node_lines(node: Any) -> tuple[int, int]:
    """Return a node's first and last line (a node ending at column 0 ends the line before)."""
    start = int(node.start_point[0])
    end = int(node.end_point[0])
    if node.end_point[1] == 0 and end > start:
        end -= 1
    return start, end


def select_zone(
    tree: Any | None,
    lines: list[str],
    line: int,
    col: int,
    *,
    max_lines: int,
    budget: int,
    count: Callable[[str], int],
    fim: bool,
    hint: tuple[int, int] | None = None,
    estimate: Callable[[str], int] | None = None,
) -> Zone:
    """Return the editing zone around ``(line, col)`` within ``max_lines`` and ``budget``.

    ``hint`` is the previous zone of the same file; it is kept when the tree has
    syntax errors (a half-typed line) so the zone does not jump while typing.
    ``estimate`` (default ``count``) sizes candidate blocks cheaply; the chosen zone is
    then counted exactly with ``count`` and shrunk if it does not fit.
    """
    guess = estimate or count
    n = len(lines)
    line = max(0, min(line, n - 1)) if n else 0
    col = max(0, min(col, len(lines[line]) if n else 0))
    max_lines = max(1, max_lines)

    def line_cost(a: int, b: int) -> int:
        hi = b if fim else min(b, line)
        return sum(guess(lines[i] + "\n") for i in range(a, hi + 1))

    def fits(a: int, b: int) -> bool:
        span = (b if fim else line) - a + 1
        return span <= max_lines and line_cost(a, b) <= budget

    start, end = line, line
    children: list[tuple[int, int]] = []
    if (
        hint is not None
        and tree is not None
        and tree.root_node.has_error
        and hint[0] <= line <= hint[1]
        and hint[1] < n
        and fits(hint[0], hint[1])
    ):
        start, end = hint
        before, typed, after = _parts(lines, start, end if fim else line, line, col, fim)
        if count(before) + count(typed) + count(after) <= budget:
            return Zone(
                start_line=start,
                end_line=end if fim else line,
                before=before,
                typed=typed,
                after=after,
            )
    if tree is not None and n:
        byte_col = len(lines[line][:col].encode("utf-8"))
        node = tree.root_node.descendant_for_point_range((line, byte_col), (line, byte_col))
        chain: list[Any] = []
        while node is not None:
            chain.append(node)
            node = node.parent
        container: Any | None = None
        core: tuple[int, int] | None = None
        for idx, anc in enumerate(chain):
            a, b = node_lines(anc)
            if fits(a, b):
                core = (a, b)
                container = chain[idx + 1] if idx + 1 < len(chain) else None
            else:
                if core is None:
                    container = anc
                break
        if core is not None:
            start, end = min(core[0], line), max(core[1], line)
        if container is not None:
            children = sorted({node_lines(c) for c in container.children if c.is_named})
    elif n:
        # no grammar: blank-line separated paragraphs stand in for blocks
        para_start = 0
        for i in range(n + 1):
            if i == n or not lines[i].strip():
                if i > para_start:
                    children.append((para_start, i - 1))
                para_start = i + 1
    if not fim:
        end = line
    # grow by whole neighbours: before first (it matters more), then after (FIM)
    prev = [c for c in children if c[1] < start]
    nxt = [c for c in children if c[0] > end]
    grow_prev, grow_next = True, fim
    while grow_prev or grow_next:
        if grow_prev:
            if prev and fits(prev[-1][0], end):
                start = prev.pop()[0]
            else:
                grow_prev = False
        if grow_next:
            if nxt and fits(start, nxt[0][1]):
                end = nxt.pop(0)[1]
            else:
                grow_next = False
    # a zone that does not fit even as its core: whole lines upward from the cursor
    if not fits(start, end):
        start, end = line, line
        while start > 0 and fits(start - 1, end):
            start -= 1
    before, typed, after = _parts(lines, start, end, line, col, fim)
    total = count(before) + count(typed) + count(after)
    while total > budget and start < line:
        start += 1
        before, typed, after = _parts(lines, start, end, line, col, fim)
        total = count(before) + count(typed) + count(after)
    while total > budget and end > line:
        end -= 1
        before, typed, after = _parts(lines, start, end, line, col, fim)
        total = count(before) + count(typed) + count(after)
    while total > budget and typed:
        typed = typed[max(1, len(typed) // 8) :]
        total = count(before) + count(typed) + count(after)
    while total > budget and after:
        after = after[: len(after) // 2]
        total = count(before) + count(typed) + count(after)
    return Zone(start_line=start, end_line=end, before=before, typed=typed, after=after)
