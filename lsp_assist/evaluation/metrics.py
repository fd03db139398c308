"""Scoring suggestions and summarising rows: the definitions behind every number of the table.

Per task (first line of the suggestion against the removed line, both stripped):
exact match; edit similarity (1 - Levenshtein distance / the longer length, as
CrossCodeEval's ``fuzz.ratio`` but on characters); identifier match (the task's key
name, the called definition for cross-file lines, is an identifier of the suggestion's
first line); identifier F1 (CrossCodeEval's identifier metric over the two lines'
identifiers); whether the whole suggestion, put in the hole, parses (tree-sitter: no
more syntax errors than the original file).

Per row (:func:`summarize`): the shares, means and percentiles of those records.
Percentiles interpolate linearly between closest ranks (``telemetry.stats.percentile``,
numpy's default). No pygls here.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from typing import Any

from lsp_assist.context import get_parser
from lsp_assist.evaluation.tasks import HOLE_KINDS, Task, blank_line, identifiers
from lsp_assist.telemetry import percentile

NEW_TOKENS_LIMIT = 32
"""A keystroke evaluating more prompt tokens than this re-evaluated its prompt."""


def first_line(suggestion: str) -> str:
    """Return the suggestion's first line, stripped (what the line metrics compare)."""
    return suggestion.split("\n", 1)[0].strip()


def levenshtein(a: str, b: str) -> int:
    """Return the edit distance (insertions, deletions, substitutions) of two strings."""
    if len(a) < len(b):
        a, b = b, a
    previous = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        current = [i]
        for j, cb in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (ca != cb)))
        previous = current
    return previous[-1]


def edit_similarity(prediction: str, reference: str) -> float:
    """Return 1 - distance / the longer length (1.0 for two empty strings)."""
    longest = max(len(prediction), len(reference))
    return 1.0 if longest == 0 else 1.0 - levenshtein(prediction, reference) / longest


def identifier_f1(prediction: str, reference: str, language: str = "python") -> float:
    """Return the F1 of the two lines' identifiers (multisets; 1.0 when both have none)."""
    pred = Counter(identifiers(prediction, language))
    ref = Counter(identifiers(reference, language))
    if not pred and not ref:
        return 1.0
    common = sum((pred & ref).values())
    if common == 0:
        return 0.0
    precision = common / sum(pred.values())
    recall = common / sum(ref.values())
    return 2 * precision * recall / (precision + recall)


def _errors(language: str, text: str) -> int | None:
    parser = get_parser(language)
    if parser is None:
        return None
    root = parser.parse(text.encode("utf-8", "surrogatepass")).root_node
    if not root.has_error:
        return 0
    count = 0
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        elif node.has_error:
            stack.extend(node.children)
    return count


def suggestion_parses(task: Task, original: str, suggestion: str) -> bool | None:
    """True when the file with ``suggestion`` in the task's hole has no more syntax errors
    than ``original`` (the file as it was); None without a grammar or a suggestion."""
    if not suggestion.strip():
        return None
    hole = blank_line(original, task.line, task.indent)
    lines = hole.split("\n")
    raw = lines[task.line]
    cr = "\r" if raw.endswith("\r") else ""
    lines[task.line] = raw.removesuffix("\r") + suggestion.rstrip("\n") + cr
    before = _errors(task.language, original)
    after = _errors(task.language, "\n".join(lines))
    if before is None or after is None:
        return None
    return after <= before


def score(task: Task, suggestion: str) -> dict[str, Any]:
    """Return the line metrics of one suggestion for one task."""
    got = first_line(suggestion)
    want = task.expected.strip()
    return {
        "first_line": got,
        "exact_match": got == want,
        "edit_similarity": round(edit_similarity(got, want), 4),
        "identifier_match": bool(task.key) and task.key in identifiers(got, task.language),
        "identifier_f1": round(identifier_f1(got, want, task.language), 4),
    }


# -- rows ------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return statistics.fmean(values) if values else None


def _share(flags: Sequence[bool]) -> float | None:
    return sum(1 for f in flags if f) / len(flags) if flags else None


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _pcts(values: Sequence[float]) -> dict[str, float | None]:
    return {f"p{q}": percentile(values, q) for q in (50, 90, 99)}


def holes(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the records of the hole tasks (cross-file and in-file), in order."""
    return [r for r in records if r["kind"] in HOLE_KINDS]


def answered(record: dict[str, Any]) -> bool:
    """True when a first token arrived for the request (its times mean something)."""
    return bool(record.get("ttft_ms")) and not record.get("error")


def model_requests(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the records of requests that reached the model (no cache hit, no skip)."""
    return [
        r
        for r in records
        if r.get("prompt_tokens") and not r.get("cache_hit") and not r.get("skipped")
    ]


def summarize(
    records: Sequence[dict[str, Any]], baseline_cost: float | None = None
) -> dict[str, Any]:
    """Return one row's figures from its per-task records (docs/evaluation.md defines each).

    ``baseline_cost`` is the baseline row's ``cost`` (mean input + output tokens per
    hole task); the row's ``relative_cost`` is its own cost over that.
    """
    hole = holes(records)
    cross = [r for r in hole if r["kind"] == "cross_file"]
    prompted = [r for r in hole if r.get("prompt_tokens")]
    done = [r for r in hole if answered(r)]
    typing = [r for r in records if r["kind"] == "typing" and not r.get("first_at_line")]
    model = model_requests(records)
    # the keystrokes the model answered (type-through hits are counted apart)
    typed_model = [r for r in model_requests(typing) if answered(r)]
    tokens = [float(r["prompt_tokens"]) for r in prompted]
    cost = _mean([float(r["prompt_tokens"] + r.get("output_tokens", 0)) for r in prompted])
    proposed = sum(int(r.get("draft_proposed", 0)) for r in model)
    accepted = sum(int(r.get("draft_accepted", 0)) for r in model)
    prompt_sum = sum(int(r["prompt_tokens"]) for r in model)
    reused_sum = sum(int(r.get("reused_tokens", 0)) for r in model)
    return {
        "tasks": len(hole),
        "cross_file_tasks": len(cross),
        "answered": len(done),
        "errors": sum(1 for r in hole if r.get("error")),
        "definition_share": _share([bool(r.get("carries_definition")) for r in cross]),
        "input_tokens_mean": _mean(tokens),
        "input_tokens_p90": percentile(tokens, 90),
        "ttft_ms": _pcts([float(r["ttft_ms"]) for r in done]),
        "latency_ms": _pcts([float(r["latency_ms"]) for r in done]),
        "keystrokes": len(typing),
        "reeval_share": _share([int(r.get("new_tokens", 0)) > NEW_TOKENS_LIMIT for r in typing]),
        "typing_hits": sum(1 for r in typing if r.get("cache_hit")),
        "typing_new_tokens_mean": _mean([float(r.get("new_tokens", 0)) for r in typing]),
        "typing_ttft_ms": _pcts([float(r["ttft_ms"]) for r in typed_model]),
        "typing_latency_ms": _pcts([float(r["latency_ms"]) for r in typed_model]),
        "cost": cost,
        "relative_cost": _ratio(cost, baseline_cost)
        if cost is not None and baseline_cost
        else None,
        "exact_match": _share([bool(r.get("exact_match")) for r in hole]),
        "edit_similarity": _mean([float(r.get("edit_similarity", 0.0)) for r in hole]),
        "identifier_match": _share([bool(r.get("identifier_match")) for r in hole]),
        "draft_acceptance": _ratio(accepted, proposed),
        "kv_reuse": _ratio(reused_sum, prompt_sum),
        "leaks": sum(1 for r in records if r.get("leaked")),
    }


def summarize_rows(rows: Sequence[dict[str, Any]], records: Sequence[dict[str, Any]]) -> None:
    """Set each row's ``summary`` from the records of that row (``record["row"]``).

    The baseline row's cost, when there is one, is what ``relative_cost`` divides by.
    """
    by_row = {r["name"]: [x for x in records if x["row"] == r["name"]] for r in rows}
    baseline = summarize(by_row["baseline"]) if "baseline" in by_row else None
    cost = baseline["cost"] if baseline is not None else None
    for row in rows:
        row["summary"] = summarize(by_row[row["name"]], cost)


def summarize_eval(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return ``lsp-assist eval``'s figures: overall and per language (hole tasks only)."""

    def part(subset: Sequence[dict[str, Any]]) -> dict[str, Any]:
        parsed = [r["parses"] for r in subset if r.get("parses") is not None]
        return {
            "tasks": len(subset),
            "answered": sum(1 for r in subset if first_line(r.get("suggestion", ""))),
            "cut": sum(1 for r in subset if r.get("cancelled") or r.get("error")),
            "exact_match": _share([bool(r.get("exact_match")) for r in subset]),
            "edit_similarity": _mean([float(r.get("edit_similarity", 0.0)) for r in subset]),
            "identifier_match": _share([bool(r.get("identifier_match")) for r in subset]),
            "identifier_f1": _mean([float(r.get("identifier_f1", 0.0)) for r in subset]),
            "parses": _share([bool(p) for p in parsed]),
            "cross_file_exact_match": _share(
                [bool(r.get("exact_match")) for r in subset if r["kind"] == "cross_file"]
            ),
        }

    hole = holes(records)
    languages = sorted({r["language"] for r in hole})
    return {
        "overall": part(hole),
        "by_language": {
            lang: part([r for r in hole if r["language"] == lang]) for lang in languages
        },
    }
