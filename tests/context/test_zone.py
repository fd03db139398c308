"""The editing zone fills its grant with the code nearest the cursor (issue 10, part 1)."""

from __future__ import annotations

import pytest
from tree_sitter import Tree

from lsp_assist.context.syntax import get_parser
from lsp_assist.context.tokens import ApproxTokenizer, CachedCounter
from lsp_assist.context.zone import Zone, node_lines, select_zone

COUNTER = CachedCounter(ApproxTokenizer())


def endpoint_source() -> tuple[str, int]:
    """Return a method shaped like asyncio's create_datagram_endpoint and the cursor line.

    A long ``if``/``else`` statement (over 100 lines, more than the zone can hold)
    ends right above ``protocol = factory()``; the cursor is on the blanked line after
    it, at its indentation.
    """
    out = [
        "class Loop:",
        "    async def create_endpoint(self, factory, local=None, remote=None, *, sock=None):",
        '        """Create a datagram connection."""',
        "        if sock is not None:",
        "            if sock.type != 2:",
        "                raise ValueError(f'a UDP socket was expected, got {sock!r}')",
        "            sock.setblocking(False)",
        "            r_addr = None",
        "        else:",
    ]
    for i in range(30):
        out += [
            f"            if option_{i} is not None and not isinstance(option_{i}, str):",
            f"                raise TypeError('option {i} must be a str, not ' + repr(option_{i}))",
            f"            infos_{i} = await self._ensure_resolved(",
            f"                option_{i}, family=family, proto={i}, flags=flags, loop=self)",
        ]
    out += [
        "            r_addr = infos_29[0]",
        "",
        "        protocol = factory()",
        "        ",
        "        transport = self._make_datagram_transport(sock, protocol, r_addr, waiter)",
        "        return transport, protocol",
        "",
    ]
    return "\n".join(out), len(out) - 4


def statement_starts(tree: object, lines: list[str]) -> set[int]:
    """Return the lines on which a statement (or clause) begins."""
    starts: set[int] = set()
    stack = [tree.root_node]  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if node.type.endswith(("statement", "clause", "definition", "block")):
            starts.add(node_lines(node)[0])
        stack.extend(node.named_children)
    return starts


def endpoint_zone(budget: int, fim: bool) -> tuple[Zone, Tree, list[str]]:
    """Select the zone of :func:`endpoint_source` at its cursor (60 lines at most)."""
    text, line = endpoint_source()
    lines = text.split("\n")
    tree = get_parser("python").parse(text.encode())
    zone = select_zone(
        tree,
        lines,
        line,
        8,
        max_lines=60,
        budget=budget,
        count=COUNTER.count,
        fim=fim,
        estimate=lambda s: len(s) // 3 + 1,
    )
    return zone, tree, lines


@pytest.mark.parametrize("fim", [False, True])
def test_zone_descends_into_a_block_too_large_to_take_whole(fim: bool) -> None:
    budget = 497
    zone, tree, lines = endpoint_zone(budget, fim)
    used = COUNTER.count(zone.before) + COUNTER.count(zone.typed) + COUNTER.count(zone.after)
    assert used <= budget
    # the nearest code up to the grant, not the two lines of the old whole-sibling rule
    assert zone.line_count >= 20
    assert used >= budget * 0.8, used
    # with FIM the cursor line's indentation ends the prefix (the middle starts at code)
    indent = " " * 8 if fim else ""
    assert zone.before.endswith("\n\n        protocol = factory()\n" + indent)
    assert zone.typed == ("" if fim else " " * 8)
    assert "infos_29 = await self._ensure_resolved(" in zone.before
    # whole lines from a statement boundary: never the continuation of a statement
    assert zone.start_line in statement_starts(tree, lines)
    assert zone.before.startswith(lines[zone.start_line] + "\n")
    if fim:
        assert "return transport, protocol" in zone.after


def test_zone_prefers_whole_blocks_when_they_fit() -> None:
    text, line = endpoint_source()
    lines = text.split("\n")
    tree = get_parser("python").parse(text.encode())
    zone = select_zone(
        tree, lines, line, 8, max_lines=200, budget=100_000, count=COUNTER.count, fim=True
    )
    # the whole class fits: no partial block
    assert zone.start_line == 0
    assert lines[zone.end_line] == "        return transport, protocol"


def test_zone_takes_whole_lines_of_an_unsplittable_neighbour() -> None:
    # a long literal right above the cursor: no statements to descend into
    body = ["DATA = ["] + [f"    {i}, {i + 1}, {i + 2}," for i in range(200)] + ["]", "x = 1", ""]
    lines = body
    text = "\n".join(lines)
    tree = get_parser("python").parse(text.encode())
    line = len(lines) - 1
    zone = select_zone(tree, lines, line, 0, max_lines=30, budget=10_000, count=len, fim=False)
    assert zone.line_count == 30
    assert zone.before.endswith("    199, 200, 201,\n]\nx = 1\n")


def test_zone_without_grammar_fills_with_lines() -> None:
    lines = [f"line {i} of a paragraph" for i in range(100)] + [""]
    zone = select_zone(None, lines, 100, 0, max_lines=25, budget=10_000, count=len, fim=False)
    assert zone.line_count == 25


@pytest.mark.parametrize("budget", range(150, 500, 23))
def test_zone_starts_on_a_statement_whatever_the_grant(budget: int) -> None:
    zone, tree, lines = endpoint_zone(budget, fim=False)
    assert COUNTER.count(zone.before) + COUNTER.count(zone.typed) <= budget
    assert COUNTER.count(zone.before) >= budget * 0.6
    # never the second line of a multi-line call: whole statements when there are any
    assert zone.start_line in statement_starts(tree, lines)


def literal_spans(tree: Tree) -> list[tuple[int, int]]:
    """Return the first and last lines of every multi-line string or comment."""
    spans: list[tuple[int, int]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        first, last = node_lines(node)
        if node.type in ("string", "comment", "block_comment") and last > first:
            spans.append((first, last))
        stack.extend(node.named_children)
    return spans


def documented_source(examples: int) -> tuple[str, int]:
    """Return two functions with long docstrings and the cursor line in the first's body."""
    doc = [f"    Example {i}: f({i}) == {i * i}, the square of {i}." for i in range(examples)]
    out = ["def f(x):", '    """Square x.', "", *doc, '    """', "    y = x * x", "    "]
    cursor = len(out) - 1
    out += ["    return y", "", "", "def g(x):", '    """Cube x.', "", *doc, '    """']
    out += ["    return x * x * x", ""]
    return "\n".join(out), cursor


@pytest.mark.parametrize("budget", range(40, 700, 37))
def test_zone_never_starts_or_ends_inside_a_docstring(budget: int) -> None:
    """Closing quotes without their opening ones read as an opening string to a model."""
    text, line = documented_source(30)
    lines = text.split("\n")
    tree = get_parser("python").parse(text.encode())
    zone = select_zone(
        tree, lines, line, 4, max_lines=200, budget=budget, count=COUNTER.count, fim=True
    )
    for first, last in literal_spans(tree):
        assert not first < zone.start_line <= last, (budget, zone.start_line, first, last)
        assert not first <= zone.end_line < last, (budget, zone.end_line, first, last)
    assert zone.start_line <= line <= zone.end_line
    assert "    y = x * x\n" in zone.before  # the statement right above is always there


def test_zone_takes_a_docstring_whole_when_it_fits() -> None:
    text, line = documented_source(6)
    lines = text.split("\n")
    tree = get_parser("python").parse(text.encode())
    whole = sum(len(text) + 1 for text in lines[: line + 1])  # count=len: a token a character
    zone = select_zone(tree, lines, line, 4, max_lines=200, budget=whole + 40, count=len, fim=False)
    assert zone.before.startswith('def f(x):\n    """Square x.\n')
    cut = select_zone(tree, lines, line, 4, max_lines=200, budget=whole - 20, count=len, fim=False)
    assert cut.before == "    y = x * x\n"  # not the docstring's last lines


def test_zone_never_starts_inside_a_block_comment() -> None:
    comment = ["    /**", *[f"     * Line {i} of a long comment about run." for i in range(40)]]
    body = ["     */", "    int run(int x) {", "        int y = x * x;", "        ", "    }"]
    lines = ["class A {", *comment, *body, "}", ""]
    line = len(lines) - 4
    text = "\n".join(lines)
    tree = get_parser("java").parse(text.encode())
    for budget in (60, 120, 240):
        zone = select_zone(tree, lines, line, 8, max_lines=200, budget=budget, count=len, fim=False)
        assert zone.start_line > len(comment), (budget, zone.start_line)
        assert zone.before.startswith("    int run(int x) {\n")


def test_a_cursor_inside_a_docstring_keeps_its_zone() -> None:
    text, _ = documented_source(30)
    lines = text.split("\n")
    tree = get_parser("python").parse(text.encode())
    line = lines.index("    Example 20: f(20) == 400, the square of 20.")
    zone = select_zone(tree, lines, line, 8, max_lines=200, budget=120, count=len, fim=True)
    assert zone.start_line <= line <= zone.end_line
    assert zone.typed == "Exam"
