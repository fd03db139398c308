"""The editing zone: the code around the cursor, verbatim, nearest first.

The zone starts from the outermost syntax node around the cursor that fits the line
and token limits (typically the enclosing function) and grows by whole neighbouring
nodes (siblings, then the siblings of each enclosing node) before and, for
fill-in-the-middle models, after it, up to ``editing_zone_lines`` lines and the
zone's token grant. Whole blocks are preferred; when the next neighbour does not fit
whole, the zone takes its trailing whole statements (its leading ones after the
cursor), descending into nested blocks, and as a last resort whole lines, so the
grant is filled with the code nearest the cursor. A line is never cut (a single
over-long line is the only thing ever trimmed).

The zone is returned in three parts so the prompt can keep everything but the
typed part of the cursor line stable while the user types within that line;
:func:`zone_pieces` renders them as the prompt's ``editing_zone`` layer, and
:func:`widen_zone` grows a rendered zone into what the layers after it left unused.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from tree_sitter import Node, Tree

from lsp_assist.context.budget import MAX_GROUP_FACTOR, BudgetPlan
from lsp_assist.context.layout import Parts, PieceMaker, cost, heal_split
from lsp_assist.context.model import LayerItem


@dataclass(frozen=True, slots=True)
class Zone:
    """The editing zone: lines ``start_line``..``end_line`` (inclusive) around the cursor."""

    start_line: int
    end_line: int
    before: str
    """Whole lines from ``start_line`` up to (not including) the cursor line; with FIM
    also the leading white space of the typed part."""
    typed: str
    """The cursor line up to the cursor (with FIM: from its first non-blank character,
    and after the lines typed since ``middle_from``)."""
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


def estimate_ratio(
    zone: Zone, lines: list[str], count: Callable[[str], int], estimate: Callable[[str], int]
) -> float:
    """Return exact / estimated tokens of ``zone`` (the ``scale`` of the next selection)."""
    guessed = sum(estimate(lines[i] + "\n") for i in range(zone.start_line, zone.end_line + 1))
    exact = count(zone.before) + count(zone.typed) + count(zone.after)
    return max(0.2, min(2.0, exact / max(1, guessed)))


def zone_from_span(
    lines: list[str],
    start: int,
    end: int,
    line: int,
    col: int,
    *,
    fim: bool,
    middle_from: int | None = None,
) -> Zone:
    """Return the zone of lines ``start``..``end`` around ``(line, col)`` (no selection).

    ``middle_from`` (FIM only): the lines from there to the cursor line are part of the
    typed text, written after the middle token, rather than of the prefix: the lines a
    user types one after another then only append to the prompt (``memory.anchored``).
    """
    end = end if fim else line
    before, typed, after = _parts(lines, start, end, line, col, fim)
    if fim and middle_from is not None and start <= middle_from < line:
        before = "".join(f"{text}\n" for text in lines[start:middle_from])
        typed = "".join(f"{text}\n" for text in lines[middle_from:line]) + typed
    if fim:
        before, typed = indent_to_prefix(before, typed)
    return Zone(start_line=start, end_line=end, before=before, typed=typed, after=after)


def indent_to_prefix(before: str, typed: str) -> tuple[str, str]:
    """Return (before, typed) of a FIM prompt with the typed part's indentation moved to
    the prefix: the middle starts at its first line's first non-blank character.

    A code model saw indentation at the end of the prefix, almost never alone after the
    middle token (there it answers the function's last line: issue 20).
    """
    lead = len(typed) - len(typed.lstrip(" \t"))
    return before + typed[:lead], typed[lead:]


def node_lines(node: Node) -> tuple[int, int]:
    """Return a node's first and last line (a node ending at column 0 ends the line before)."""
    start = int(node.start_point[0])
    end = int(node.end_point[0])
    if node.end_point[1] == 0 and end > start:
        end -= 1
    return start, end


@dataclass(slots=True)
class _Block:
    """A candidate neighbour: its lines and, when it has one, the node to descend into."""

    first: int
    last: int
    node: Node | None = None


def _named(node: Node) -> list[_Block]:
    return [_Block(*node_lines(c), c) for c in node.children if c.is_named]


STARVED = 0.6
"""Below this share of its limit the zone takes whole lines of a block it cannot split."""

_BODY_SUFFIXES = ("block", "body", "clause", "compound_statement", "declaration_list")


_LITERAL_SUFFIXES = ("string", "string_literal", "comment", "text_block")
"""Node types whose inner lines a zone must not start or end on: a zone starting inside
a docstring shows its closing quotes without the opening ones, and a model reads them
as opening a string (HumanEval/105: it answered the three quotes). A
``concatenated_string`` is strings on lines of their own: code, not one literal."""


def _is_literal(node: Node) -> bool:
    """True when ``node`` is a string or comment (its lines are text, not code)."""
    kind = str(node.type)
    return kind.endswith(_LITERAL_SUFFIXES) and not kind.startswith("concatenated")


def _literal_lines(node: Node) -> tuple[int, int] | None:
    """Return the lines of the multi-line string or comment that ``node`` is or holds whole.

    A docstring is an expression statement holding one string; None when ``node`` is
    anything else or fits on one line.
    """
    inner = node
    while not _is_literal(inner) and inner.named_child_count == 1:
        only = inner.named_children[0]
        if node_lines(only) != node_lines(inner):
            return None
        inner = only
    if not _is_literal(inner):
        return None
    first, last = node_lines(inner)
    return (first, last) if last > first else None


def literal_around(tree: Tree, row: int) -> tuple[int, int] | None:
    """Return the lines of the multi-line string or comment that line ``row`` lies inside
    (past its first line), or None when the line starts outside any."""
    node: Node | None = tree.root_node.descendant_for_point_range((row, 0), (row, 0))
    found: tuple[int, int] | None = None
    while node is not None:
        if _is_literal(node):
            first, last = node_lines(node)
            if first < row <= last:
                found = (first, last)
        node = node.parent
    return found


def clear_of_literals(tree: Tree | None, start: int, end: int, line: int) -> tuple[int, int]:
    """Return ``start``..``end`` moved so neither end cuts a string or comment in two.

    A start inside one moves past its last line, an end inside one before its first
    line, never past the cursor ``line`` (a cursor inside a docstring keeps the cut).
    """
    if tree is None:
        return start, end
    inside = literal_around(tree, start) if start < line else None
    if inside is not None and inside[1] < line:
        start = inside[1] + 1
    below = literal_around(tree, end + 1) if end > line else None
    if below is not None and below[0] > line:
        end = below[0] - 1
    return start, end


def _has_statements(node: Node, depth: int = 2) -> bool:
    """True when ``node`` is, or within ``depth`` levels holds, a block of statements."""
    if str(node.type).endswith(_BODY_SUFFIXES):
        return True
    return depth > 0 and any(_has_statements(c, depth - 1) for c in node.named_children)


class _Grower:
    """Grows the span ``start``..``end`` around the cursor line under one cost function."""

    def __init__(
        self,
        lines: list[str],
        line: int,
        *,
        max_lines: int,
        limit: float,
        cost: Callable[[str], float],
        fim: bool,
    ) -> None:
        self.lines = lines
        self.line = line
        self.max_lines = max_lines
        self.limit = limit
        self.cost = cost
        self.fim = fim
        self._line_costs: dict[int, float] = {}
        self.start = line
        self.end = line

    def span_cost(self, a: int, b: int) -> float:
        """Return the cost of lines ``a``..``b`` (up to the cursor line without FIM)."""
        hi = b if self.fim else min(b, self.line)
        total = 0.0
        for i in range(a, hi + 1):
            c = self._line_costs.get(i)
            if c is None:
                c = self._line_costs[i] = self.cost(self.lines[i] + "\n")
            total += c
        return total

    def fits(self, a: int, b: int) -> bool:
        """True when lines ``a``..``b`` are within the line cap and the token limit."""
        span = (b if self.fim else self.line) - a + 1
        return span <= self.max_lines and self.span_cost(a, b) <= self.limit

    def covered(self, block: _Block, side: int) -> bool:
        """True when the zone already reaches past ``block`` on ``side`` (0 before, 1 after)."""
        return block.first >= self.start if side == 0 else block.last <= self.end

    def take_whole(self, block: _Block, side: int) -> bool:
        """Extend over the whole ``block`` on ``side`` if it fits."""
        a, b = (block.first, self.end) if side == 0 else (self.start, block.last)
        if not self.fits(a, b):
            return False
        self.start, self.end = a, b
        return True

    def take(self, block: _Block, side: int) -> bool:
        """Extend over ``block`` on ``side``: whole, else its nearest parts; False once cut.

        A block that holds statements is descended into (its nearest whole statements,
        recursively); what has no statements to offer (a long expression, a literal)
        is taken as whole lines, nearest first, only while the zone has less than
        ``STARVED`` of its limit: a last resort, not a way to start mid-statement.
        """
        if self.covered(block, side) or self.take_whole(block, side):
            return True
        if block.node is not None and _has_statements(block.node):
            children = _named(block.node)
            for child in reversed(children) if side == 0 else children:
                if not self.covered(child, side) and not self.take(child, side):
                    return False
            return False
        if self.span_cost(self.start, self.end) < STARVED * self.limit:
            if side == 0:
                while self.start > block.first and self.fits(self.start - 1, self.end):
                    self.start -= 1
            else:
                while self.end < block.last and self.fits(self.start, self.end + 1):
                    self.end += 1
        return False

    def grow(self, before: Iterator[_Block], after: Iterator[_Block]) -> None:
        """Grow by whole neighbours on both sides, then fill with the parts of the next ones."""
        sides = [before, after]
        pending: list[_Block | None] = [None, None]
        active = [True, self.fim]
        while any(active):
            for side in (0, 1):
                if not active[side]:
                    continue
                block = next(sides[side], None)
                if block is None:
                    active[side] = False
                elif not self.covered(block, side) and not self.take_whole(block, side):
                    pending[side] = block
                    active[side] = False
        # the nearest code first: the parts of the blocks that did not fit whole
        for side in (0, 1):
            block = pending[side]
            if block is not None:
                self.take(block, side)


def _neighbours(chain: list[Node], point: tuple[int, int], forward: bool) -> Iterator[_Block]:
    """Yield the named nodes next to the cursor, nearest first, climbing the ancestors."""
    inner: Node | None = None
    for node in chain:
        kids = [c for c in node.children if c.is_named]
        if inner is None:
            if forward:
                side = [c for c in kids if tuple(c.start_point) >= point]
            else:
                side = [c for c in kids if tuple(c.end_point) <= point]
        elif forward:
            side = [c for c in kids if c.start_byte >= inner.end_byte]
        else:
            side = [c for c in kids if c.end_byte <= inner.start_byte]
        if not forward:
            side.reverse()
        for c in side:
            yield _Block(*node_lines(c), c)
        inner = node


def _paragraphs(lines: list[str]) -> list[_Block]:
    """Blank-line separated paragraphs: the blocks of a file without a grammar."""
    out: list[_Block] = []
    para_start = 0
    for i in range(len(lines) + 1):
        if i == len(lines) or not lines[i].strip():
            if i > para_start:
                out.append(_Block(para_start, i - 1))
            para_start = i + 1
    return out


def select_zone(
    tree: Tree | None,
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
    scale: float = 1.0,
    reserve: int = 0,
) -> Zone:
    """Return the editing zone around ``(line, col)`` within ``max_lines`` and ``budget``.

    ``hint`` is the previous zone of the same file; it is kept when the tree has
    syntax errors (a half-typed line) so the zone does not jump while typing.
    ``estimate`` (default ``count``) sizes candidate blocks cheaply, times ``scale``
    (what the caller last measured as exact / estimate in this file); the chosen zone is
    then counted exactly with ``count``, sized again with the estimate scaled to the
    exact count when it left room, and shrunk if it does not fit. ``reserve`` tokens
    of ``budget`` are left free where there is room, so the cursor line can grow while
    the zone stays the same.
    """
    n = len(lines)
    line = max(0, min(line, n - 1)) if n else 0
    col = max(0, min(col, len(lines[line]) if n else 0))
    max_lines = max(1, max_lines)

    def exact(zone: Zone) -> int:
        return count(zone.before) + count(zone.typed) + count(zone.after)

    if (
        hint is not None
        and tree is not None
        and tree.root_node.has_error
        and hint[0] <= line <= hint[1]
        and hint[1] < n
        and (hint[1] if fim else line) - hint[0] + 1 <= max_lines
    ):
        kept = zone_from_span(lines, hint[0], hint[1], line, col, fim=fim)
        if exact(kept) <= budget:
            return kept

    chain: list[Node] = []
    point = (line, 0)
    if tree is not None and n:
        point = (line, len(lines[line][:col].encode("utf-8")))
        node = tree.root_node.descendant_for_point_range(point, point)
        while node is not None:
            chain.append(node)
            node = node.parent
    blocks = _paragraphs(lines) if tree is None else []

    def attempt(cost: Callable[[str], float], limit: float) -> tuple[int, int]:
        grower = _Grower(lines, line, max_lines=max_lines, limit=limit, cost=cost, fim=fim)
        core: tuple[int, int] | None = None
        for anc in chain:
            a, b = node_lines(anc)
            if not grower.fits(a, b):
                break
            core = (a, b)
        if core is not None:
            grower.start, grower.end = min(core[0], line), max(core[1], line)
        if not fim:
            grower.end = line
        if chain:
            grower.grow(_neighbours(chain, point, False), _neighbours(chain, point, True))
        else:
            grower.grow(
                reversed([b for b in blocks if b.last < line]),
                iter([b for b in blocks if b.first > line]),
            )
        if not grower.fits(grower.start, grower.end):
            # not even the core fits: whole lines upward from the cursor
            grower.start = grower.end = line
            while grower.start > 0 and grower.fits(grower.start - 1, line):
                grower.start -= 1
        grower.start, grower.end = clear_of_literals(tree, grower.start, grower.end, line)
        # blank lines at the far ends carry nothing
        while grower.start < line and not lines[grower.start].strip():
            grower.start += 1
        while grower.end > line and not lines[grower.end].strip():
            grower.end -= 1
        return grower.start, grower.end

    base = estimate or count

    def guess(text: str) -> float:
        return base(text) * scale

    limit = budget - reserve if budget > reserve else budget
    start, end = attempt(guess, limit)
    zone = zone_from_span(lines, start, end, line, col, fim=fim)
    total = exact(zone)
    best, best_total = (zone, total) if total <= limit else (None, 0)
    # The estimate is cheap but off by a factor: size again with it scaled to the
    # exact count of the last attempt, so whole blocks (not trimmed lines) fit the limit.
    for _ in range(3):
        if best is not None and (best_total >= 0.95 * limit or best.line_count >= max_lines):
            break
        guessed = sum(base(lines[i] + "\n") for i in range(zone.start_line, zone.end_line + 1))
        ratio = total / max(1, guessed) * max(1.0, total / max(1.0, limit))

        def scaled(text: str, r: float = ratio) -> float:
            return base(text) * r

        start, end = attempt(scaled, limit)
        if (start, end) == (zone.start_line, zone.end_line):
            break
        zone = zone_from_span(lines, start, end, line, col, fim=fim)
        total = exact(zone)
        if total <= limit and (best is None or total > best_total):
            best, best_total = zone, total
    zone = best if best is not None else zone
    zone = _shrink(zone, lines, line, col, (limit, budget), fim, count)
    start, end = clear_of_literals(tree, zone.start_line, zone.end_line, line)
    if (start, end) != (zone.start_line, zone.end_line):
        zone = zone_from_span(lines, start, end, line, col, fim=fim)
    return zone


def _shrink(
    zone: Zone,
    lines: list[str],
    line: int,
    col: int,
    limits: tuple[float, int],
    fim: bool,
    count: Callable[[str], int],
) -> Zone:
    """Return ``zone`` cut to its limits: whole lines from the far ends, then the line itself.

    ``limits`` is (the size to cut to with whole lines, the budget never exceeded).
    """
    soft, budget = limits

    def total(z: Zone) -> int:
        return count(z.before) + count(z.typed) + count(z.after)

    while total(zone) > soft and zone.start_line < line:
        zone = zone_from_span(lines, zone.start_line + 1, zone.end_line, line, col, fim=fim)
    while total(zone) > soft and zone.end_line > line:
        zone = zone_from_span(lines, zone.start_line, zone.end_line - 1, line, col, fim=fim)
    while total(zone) > budget and zone.typed:
        zone = replace(zone, typed=zone.typed[max(1, len(zone.typed) // 8) :])
    while total(zone) > budget and zone.after:
        zone = replace(zone, after=zone.after[: len(zone.after) // 2])
    return zone


def zone_pieces(maker: PieceMaker, parts: Parts, zone: Zone, rel: str, *, heal: bool = True) -> int:
    """Set the zone's pieces and explain item in ``parts``; return their tokens.

    With ``heal`` the typed part's last pre-token is left for the model to write
    (``parts.healed``: token healing, :func:`~lsp_assist.context.layout.heal_split`).
    """
    parts.before = [maker.piece("editing_zone", zone.before)] if zone.before else []
    parts.after = [maker.piece("editing_zone", zone.after)] if zone.after else []
    kept, parts.healed = heal_split(zone.typed) if heal else (zone.typed, "")
    parts.typed = [maker.piece("editing_zone", kept)] if kept else []
    for piece in parts.typed:
        piece.volatile = True
    zone_cost = cost(parts.before + parts.after + parts.typed)
    parts.items["editing_zone"] = [
        LayerItem(
            source=rel,
            reason=f"lines {zone.start_line + 1}-{zone.end_line + 1}",
            tokens=zone_cost,
        )
    ]
    return zone_cost


WIDEN_TRIES = 3
"""How often :func:`widen_zone` asks for a wider zone that overshot the room, with less."""


def zone_room(plan: BudgetPlan) -> int:
    """Return the tokens the zone may still take: what the layers after it left unused
    (the plan's carry), within the zone's group cap and the budget."""
    cap = int(MAX_GROUP_FACTOR * plan.shares.get("editing_zone", 0))
    room = cap - plan.spent.get("editing_zone", 0)
    return max(0, min(plan.carry, room, plan.remaining))


def widen_zone(
    plan: BudgetPlan,
    zone: Zone,
    zone_cost: int,
    select: Callable[[int], Zone],
    *,
    maker: PieceMaker,
    parts: Parts,
    rel: str,
    step: int,
    room: int | None = None,
) -> tuple[Zone, int]:
    """Return the zone grown into ``room`` (default the plan's, :func:`zone_room`) and its
    tokens.

    ``select(extra)`` selects the zone with ``extra`` more tokens than ``zone`` had. The
    selection estimates tokens, so a wider zone may overshoot the room by a few: it is
    asked again for that much less (and ``step``, the typed part's charge) rather than
    the narrow zone kept. The chosen zone's pieces are in ``parts``; the plan is charged
    for what it added and granted the room.
    """
    extra = zone_room(plan) if room is None else max(0, min(room, plan.remaining))
    grant = extra
    for _ in range(WIDEN_TRIES):
        if grant <= step:
            break
        wider = select(grant)
        if (wider.start_line, wider.end_line) == (zone.start_line, zone.end_line):
            break
        wider_cost = zone_pieces(maker, parts, wider, rel)
        over = wider_cost - zone_cost - extra
        if over > 0:
            grant -= over + step
            continue
        plan.spent["editing_zone"] += wider_cost - zone_cost
        plan.granted["editing_zone"] += extra
        plan.carry -= wider_cost - zone_cost
        return wider, wider_cost
    zone_pieces(maker, parts, zone, rel)
    return zone, zone_cost
