"""The bench's rows: what each row is (its settings, its model) and the records it gives.

A row is the server with some settings switched (:class:`RowSpec`, the table's rows in
:func:`default_rows`), or the peer. Whichever runs it (server_row.py, peers/llmls_row.py), each
task gives records that start alike (:func:`task_record`), and a hole task's record is
scored the same way (:func:`finish_hole`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.config import Settings
from lsp_assist.evaluation.metrics import score, suggestion_parses
from lsp_assist.evaluation.tasks import Task, prompt_leaks

CAPS = {"promptTimeoutMs": 600_000, "generationTimeoutMs": 120_000}
"""Time caps every bench row runs with: each request answers, however slow the prompt
(a 4,000-token baseline prompt takes minutes on a 2-core CPU shared with other work)."""
ROW_NAMES = ("baseline", "layered", "retrieval", "speculative", "model2", "peer")
"""The rows ``--rows`` can pick, in the table's order (model2 only with ``--model2``)."""


@dataclass(slots=True)
class RowSpec:
    """One row of the table: the server with these settings, or the peer."""

    name: str
    label: str
    settings: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    model: str = ""
    """The GGUF of this row ('' = the bench's model)."""
    peer: bool = False


def task_record(row: str, task: Task) -> dict[str, Any]:
    """Return the fields every record of ``task`` in row ``row`` starts with."""
    return {
        "row": row,
        "task": task.id,
        "kind": task.kind,
        "language": task.language,
        "path": task.path,
        "line": task.line + 1,
        "target": task.expected,
        "called": task.called,
    }


def finish_hole(record: dict[str, Any], task: Task, original: str, prompt: str | None) -> None:
    """Add the scores, the definition check and the leak check to a hole task's record."""
    suggestion = str(record.get("suggestion", ""))
    record.update(score(task, suggestion))
    record["parses"] = suggestion_parses(task, original, suggestion)
    if prompt is not None:
        record["prompt"] = prompt
        record["leaked"] = prompt_leaks(prompt, task.target)
        if task.kind == "cross_file":
            record["carries_definition"] = any(n in prompt for n in task.needles)


def default_rows(settings: Settings, model2: str = "") -> list[RowSpec]:
    """Return the table's rows: baseline, layered, + retrieval and budget, + drafting, ..."""
    from lsp_assist.serving import budget_cap

    cap, cap_reason = budget_cap(settings)
    rows = [
        RowSpec(
            "baseline",
            "baseline: whole file + open files",
            {"strategy": "baseline", "draft": "off", **CAPS},
            "strategy baseline (the current file and the open files up to the model's "
            "context), drafting off",
        ),
        RowSpec(
            "layered",
            "layered (zones + summaries)",
            {
                "strategy": "layered",
                "layerRelated": False,
                "layerSimilar": False,
                "contextBudget": cap,
                "draft": "off",
                **CAPS,
            },
            f"editing zone and summaries, retrieval off, budget {cap} ({cap_reason}: "
            "nothing enforced below the model's context), drafting off",
        ),
        RowSpec(
            "retrieval",
            "+ retrieval and budget",
            {"strategy": "layered", "draft": "off", **CAPS},
            "the defaults: related definitions and similar code, the adaptive budget, drafting off",
        ),
        RowSpec(
            "speculative",
            "+ speculative drafting",
            {"strategy": "layered", "draft": "prompt-lookup", "batchInvariant": True, **CAPS},
            "the row above with prompt-lookup drafting and batch-invariant steps (the "
            "default until 2026-12-07)",
        ),
    ]
    if model2:
        rows.append(
            RowSpec(
                "model2",
                f"defaults, {Path(model2).name}",
                {"strategy": "layered", "draft": "off", **CAPS},
                f"the defaults with {Path(model2).name}",
                model=model2,
            )
        )
    rows.append(
        RowSpec(
            "peer",
            "peer: llm-ls window via llama_cpp.server",
            {},
            "llm-ls's sliding-window prompt (current buffer only, no index), sent to "
            "`python -m llama_cpp.server` on 127.0.0.1 with the same model",
            peer=True,
        )
    )
    return rows
