"""The scores and the row figures: each definition checked on cases that tell it apart."""

from __future__ import annotations

from typing import Any

import pytest

from lsp_assist.evaluation.metrics import (
    edit_similarity,
    first_line,
    identifier_f1,
    levenshtein,
    score,
    suggestion_parses,
    summarize,
    summarize_eval,
)
from lsp_assist.evaluation.tasks import Task
from tests.evaluation import python_task

TASK = python_task(
    "x001",
    "cross_file",
    "shop/store.py",
    2,
    "    item = make_item(name, size)",
    called="make_item",
    key="make_item",
)
FILE = "def sell(name, size):\n    total = 0\n    item = make_item(name, size)\n    return item\n"


def test_levenshtein_and_edit_similarity() -> None:
    assert levenshtein("kitten", "sitting") == 3
    assert levenshtein("", "abc") == 3
    assert edit_similarity("abc", "abc") == 1.0
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("", "abcd") == 0.0
    assert edit_similarity("abcx", "abcd") == pytest.approx(0.75)


def test_score_compares_the_first_line_stripped() -> None:
    exact = score(TASK, "item = make_item(name, size)\n    return item")
    assert exact["first_line"] == "item = make_item(name, size)"
    assert exact["exact_match"] and exact["identifier_match"]
    assert exact["edit_similarity"] == 1.0 and exact["identifier_f1"] == 1.0
    near = score(TASK, "item = make_item(size, name)")
    assert not near["exact_match"] and near["identifier_match"]
    assert near["identifier_f1"] == 1.0 and near["edit_similarity"] < 1.0
    wrong = score(TASK, "item = build(name)")
    assert not wrong["identifier_match"]
    assert 0 < wrong["identifier_f1"] < 1
    assert score(TASK, "")["edit_similarity"] == 0.0
    assert first_line("  a\nb") == "a"


def test_identifier_f1() -> None:
    assert identifier_f1("f(a, b)", "f(a, c)") == pytest.approx(2 / 3)
    assert identifier_f1("", "") == 1.0
    assert identifier_f1("x", "") == 0.0


def test_a_suggestion_parses_when_it_adds_no_syntax_error() -> None:
    assert suggestion_parses(TASK, FILE, "item = make_item(name, size)") is True
    assert suggestion_parses(TASK, FILE, "item = make_item(name,") is False
    assert suggestion_parses(TASK, FILE, "") is None
    # a file that was broken already: only new errors count
    broken = FILE + "def (:\n"
    assert suggestion_parses(TASK, broken, "item = 1") is True
    no_grammar = Task(**{**TASK.to_json(), "language": "cobol", "needles": ()})
    assert suggestion_parses(no_grammar, FILE, "x") is None


def rec(**values: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "cross_file",
        "language": "python",
        "prompt_tokens": 100,
        "reused_tokens": 0,
        "output_tokens": 10,
        "ttft_ms": 50.0,
        "latency_ms": 80.0,
        "error": "",
    }
    return {**base, **values}


def test_summarize_counts_each_figure_over_its_own_records() -> None:
    records = [
        rec(carries_definition=True, exact_match=True, edit_similarity=1.0, identifier_match=True),
        rec(
            carries_definition=False,
            prompt_tokens=300,
            ttft_ms=150.0,
            latency_ms=200.0,
            draft_proposed=4,
            draft_accepted=3,
            reused_tokens=150,
        ),
        rec(kind="in_file", prompt_tokens=200, ttft_ms=0.0, error="timeout", edit_similarity=0.5),
        # typing: the first request at a line does not count; a cache hit evaluates nothing
        rec(kind="typing", first_at_line=True, new_tokens=500),
        rec(kind="typing", new_tokens=40, prompt_tokens=400, reused_tokens=360, ttft_ms=40.0),
        rec(kind="typing", new_tokens=1, prompt_tokens=401, reused_tokens=400, ttft_ms=60.0),
        rec(kind="typing", new_tokens=0, cache_hit=True, ttft_ms=0.3, latency_ms=0.3),
    ]
    s = summarize(records, baseline_cost=420.0)
    assert s["tasks"] == 3 and s["cross_file_tasks"] == 2 and s["answered"] == 2
    assert s["definition_share"] == 0.5
    assert s["input_tokens_mean"] == pytest.approx(200.0)
    assert s["ttft_ms"]["p50"] == pytest.approx(100.0)  # answered only: 50 and 150
    assert s["latency_ms"]["p90"] == pytest.approx(80 + 0.9 * 120)
    assert s["keystrokes"] == 3 and s["reeval_share"] == pytest.approx(1 / 3)
    assert s["typing_hits"] == 1
    # over the two keystrokes the model answered, not the hit (nor the line's first)
    assert s["typing_ttft_ms"]["p50"] == pytest.approx(50.0)
    assert s["typing_latency_ms"]["p99"] == pytest.approx(80.0)
    assert s["cost"] == pytest.approx(210.0) and s["relative_cost"] == pytest.approx(0.5)
    assert s["exact_match"] == pytest.approx(1 / 3)
    assert s["edit_similarity"] == pytest.approx(0.5)
    assert s["draft_acceptance"] == 0.75
    # model requests: the 3 holes and the typing ones that reached the model (not the hit)
    assert s["kv_reuse"] == pytest.approx((150 + 360 + 400) / (100 + 300 + 200 + 100 + 400 + 401))


def test_summarize_eval_splits_by_language() -> None:
    records = [
        rec(exact_match=True, suggestion="x", parses=True),
        rec(language="go", kind="in_file", suggestion="", parses=None),
        rec(language="go", suggestion="y", parses=False),
        rec(language="go", suggestion="", parses=None, cancelled=True),
    ]
    s = summarize_eval(records)
    assert s["overall"]["tasks"] == 4 and s["overall"]["answered"] == 2
    assert s["overall"]["cut"] == 1 and s["by_language"]["python"]["cut"] == 0
    assert s["overall"]["parses"] == 0.5
    assert s["by_language"]["go"]["tasks"] == 3
    assert s["by_language"]["python"]["exact_match"] == 1.0
    assert s["by_language"]["go"]["cross_file_exact_match"] == 0.0
