"""Unit tests of the engine's parts: incremental trees, the budget plan, the zone, summaries."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_assist.config import ContextSettings
from lsp_assist.context.budget import BudgetPlan
from lsp_assist.context.summaries import file_summary
from lsp_assist.context.syntax import TreeCache, get_parser
from lsp_assist.context.zone import select_zone

from .conftest import CART

GO = """package main

import "fmt"

type Point struct {
\tX, Y int
}

func (p Point) Norm() int {
\treturn p.X*p.X + p.Y*p.Y
}

func main() {
\tp := Point{1, 2}
\tfmt.Println(p.Norm())
\tfor i := 0; i < 3; i++ {
\t\tfmt.Println(i)
\t}
}
"""


@settings(max_examples=40, deadline=None)
@given(
    start=st.integers(min_value=0, max_value=len(CART)),
    length=st.integers(min_value=0, max_value=40),
    insert=st.text(alphabet="abc():\n =+1", max_size=12),
)
def test_incremental_reparse_matches_fresh_parse(start: int, length: int, insert: str) -> None:
    cache = TreeCache()
    path = Path("/ws/a.py")
    cache.tree(path, "python", CART)
    edited = CART[:start] + insert + CART[start + length :]
    incremental = cache.tree(path, "python", edited)
    fresh = get_parser("python").parse(edited.encode())
    assert str(incremental.root_node) == str(fresh.root_node)


@given(
    total=st.integers(min_value=0, max_value=5000),
    used=st.lists(st.integers(0, 3000), min_size=6, max_size=6),
)
def test_budget_plan_never_grants_more_than_left(total: int, used: list[int]) -> None:
    plan = BudgetPlan.split(total, ContextSettings())
    spent = 0
    for layer, want in zip(
        ("instructions", "editing_zone", "related", "similar", "file_summary", "project_summary"),
        used,
        strict=True,
    ):
        grant = plan.grant(layer)
        assert 0 <= grant <= total - spent
        take = min(grant, want)
        plan.spend(layer, take)
        spent += take
    assert spent <= total


def test_unused_share_flows_on_within_group_caps() -> None:
    plan = BudgetPlan.split(1000, ContextSettings())
    assert plan.grant("instructions") == 100
    plan.spend("instructions", 20)
    assert plan.grant("editing_zone") == 480  # 400 + 80 unused by instructions
    plan.spend("editing_zone", 100)
    assert plan.grant("related") == 600  # 300 + 380, capped at twice the share
    plan.spend("related", 50)
    assert plan.grant("similar") == 550  # the group's cap minus what related spent
    plan.spend("similar", 0)
    assert plan.grant("file_summary") == 400  # 200 + lots, capped at twice the share


def test_zone_is_whole_blocks_in_go() -> None:
    lines = GO.split("\n")
    tree = get_parser("go").parse(GO.encode())
    line = next(i for i, x in enumerate(lines) if "fmt.Println(i)" in x)
    zone = select_zone(tree, lines, line, 3, max_lines=8, budget=500, count=len, fim=True)
    assert lines[zone.start_line].startswith("func main()")
    assert lines[zone.end_line] == "}"
    small = select_zone(tree, lines, line, 3, max_lines=4, budget=500, count=len, fim=True)
    # the for loop whole, grown by the whole statement before it
    assert small.line_count == 4
    assert lines[small.start_line].strip() == "fmt.Println(p.Norm())"
    assert lines[small.end_line] == "\t}"


def test_go_file_summary_elides_bodies() -> None:
    lines = GO.split("\n")
    tree = get_parser("go").parse(GO.encode())
    entries = file_summary(tree, GO, lines, "go", (12, 18))
    text = "".join(e.text for e in entries)
    assert 'import "fmt"' in text
    assert "func (p Point) Norm() int { ... }" in text
    assert "return p.X" not in text
    assert "func main" not in text


def test_similar_search_is_jaccard_over_windows() -> None:
    import random

    from lsp_assist.context.retrieval import identifiers
    from lsp_assist.context.similar import STRIDE, WINDOW, SimilarCode

    rng = random.Random(3)
    words = [f"name{i}" for i in range(40)] + ["if", "x", "return"]
    text = "\n".join(
        " ".join(rng.choice(words) for _ in range(rng.randint(0, 5))) for _ in range(100)
    )
    query = " ".join(rng.sample(words, 12))
    path = Path("/w/other.py")
    hits = SimilarCode().search(
        query,
        [(path, text)],
        threshold=0.0,
        relative=lambda p: p.name,
        exclude=lambda p, a, b: False,
        limit=100,
    )
    # brute force: every window of WINDOW lines at STRIDE, Jaccard of identifier sets
    q = set(identifiers(query))
    lines = text.split("\n")
    expected = {}
    start = 0
    while True:
        end = min(len(lines), start + WINDOW) - 1
        idents = set(identifiers("\n".join(lines[start : end + 1])))
        if q & idents:
            expected[(start, end)] = len(q & idents) / len(q | idents)
        if end + 1 >= len(lines):
            break
        start += STRIDE
    assert hits
    for hit in hits:
        key = (hit.chunk.start_line, hit.chunk.end_line)
        assert hit.score == expected[key]
        assert hit.chunk.idents == frozenset(identifiers(hit.chunk.text))
    # best first, and no better window left out unless it overlaps a chosen one
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    best = max(expected.values())
    assert hits[0].score == best
