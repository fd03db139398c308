"""Running HumanEval infilling: the plain-FIM arm, the server arm, the result.

This module owns how the tasks of humaneval.py (single-line) and humaneval_sets.py
(multi-line, random-span) are answered, with the arms of harness.py: ``plain``, the model
alone, to the first line break for a single-line task and to the end-of-text for the
other sets; ``server``, the real ``lsp-assist serve`` on a scratch workspace holding each
problem as its own file, the task's file opened blanked and one inline request sent at
the cursor: automatic, as an editor does while the user types, or with
``trigger="invoked"`` as when the user asks (Alt+\\; the trigger rules skip nothing)
(for the other sets the first item's text is applied over its range). :func:`run_humaneval`
runs the arms asked for over the set asked for (the chained arm, ``--chain``, through
humaneval_chain.py), scores every answer (on the other sets also the plain answer
truncated as published, ``plain_trunc``) and returns the result that humaneval.py
writes. docs/evaluation.md.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.config import machine_cpus, parse_settings
from lsp_assist.evaluation.client import close_document, open_document
from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill import humaneval_chain as hc
from lsp_assist.evaluation.infill import humaneval_sets as hs
from lsp_assist.evaluation.infill.harness import (
    PLAIN_MAX_TOKENS,
    Answer,
    PlainModel,
    add_outcome,
    check_trigger,
    inline_item,
    model_label,
    run_meta,
    run_plain,
    scratch_server,
    shown_settings,
)
from lsp_assist.evaluation.progress import Progress

SPAN_MAX_TOKENS = 256
"""Tokens the plain arm may write for a multi-line or random-span task (it stops at its
end-of-text or a special token): the longest removed part of either set is 239 tokens
of Qwen2.5-Coder's vocabulary (a whole solution)."""
Task = he.LineTask | hs.SpanTask
"""A task of any set."""


@dataclass(slots=True)
class HumanEvalConfig:
    """What ``lsp-assist bench --humaneval`` was asked for."""

    model: Path
    tasks: int = 164
    """Sample size; 0: every task of the set."""
    seed: int = 14
    task_set: str = "single"
    """``single``, ``multi`` or ``span`` (humaneval.SET_NAMES)."""
    arms: tuple[str, ...] = he.ARMS
    settings: dict[str, Any] = field(default_factory=dict)
    """``--setting`` values: the server arm gets them all, the plain arm ``threads`` and
    ``contextLength``."""
    trigger: str = "automatic"
    """The server arm's inline request (``--trigger``, harness.TRIGGERS): ``automatic``
    (the trigger rules apply) or ``invoked`` (the user asked)."""
    timeout_s: float = he.TEST_TIMEOUT_S
    data: Path | None = None
    """A HumanEval jsonl(.gz) other than the package's (tests)."""
    problems: int = 0
    """Use only the first N problems (0: all; tests)."""
    out: Path | None = None
    """Where humaneval.md and .json are written after each arm (None: not written here)."""


# -- plain FIM --------------------------------------------------------------------------


def complete_any(plain: PlainModel, task: Task) -> Answer:
    """Return the plain arm's answer: a single-line task's first line, else the whole
    greedy answer to the end-of-text (at most :data:`SPAN_MAX_TOKENS`)."""
    if isinstance(task, he.LineTask):
        return plain.complete(task)
    return plain.complete(task, SPAN_MAX_TOKENS, one_line=False)


# -- through the server ------------------------------------------------------------------


async def _serve(
    tasks: Sequence[Task],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[Task, Answer], None],
    trigger: str,
) -> dict[str, Any]:
    answers: list[Answer] = []
    files = {problem.file_name: problem.program for problem in problems}
    async with scratch_server(
        "humaneval", model, settings, files, lambda cache: _join_prompts(cache, answers)
    ) as server:
        client, root = server.client, server.root
        last_id = ""
        for task in tasks:
            path = root / task.problem.file_name
            uri = path.as_uri()
            blank = task.blanked()
            line, character = task.cursor()
            path.write_text(blank, encoding="utf-8")  # the disk says what the buffer says
            try:
                open_document(client, uri, blank, "python")
                suggestion, edit_range, client_ms, last = await inline_item(
                    client, uri, line, character, trigger=trigger
                )
            finally:
                path.write_text(task.problem.program, encoding="utf-8")  # before didClose
            close_document(client, uri)
            answer: Answer = {"suggestion": suggestion, "client_ms": round(client_ms, 2)}
            if isinstance(task, hs.SpanTask):
                answer["range"] = edit_range  # applied as an editor does when scored
            last_id = add_outcome(answer, last, last_id, client_ms)
            answers.append(answer)
            on_answer(task, answer)  # scored now; the prompt is added to it at the end
    return server.session


def _join_prompts(cache_dir: Path, answers: Sequence[Answer]) -> None:
    """Give each answer the prompt the server logged for its request (``logPrompts``)."""
    from lsp_assist.telemetry import METRICS_FILE, read_records

    dirs = sorted({p.parent for p in cache_dir.rglob(METRICS_FILE + "*")})
    by_id = {r.request_id: r for r in read_records(dirs)} if dirs else {}
    for answer in answers:
        logged = by_id.get(str(answer.get("request_id", "")))
        if logged is not None and logged.prompt is not None:
            answer["prompt"] = logged.prompt


def run_server(
    tasks: Sequence[Task],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[Task, Answer], None],
    trigger: str = "automatic",
) -> dict[str, Any]:
    """Answer every task through ``lsp-assist serve`` with one ``trigger`` inline request
    each; return the session (load, settings)."""
    return asyncio.run(_serve(tasks, problems, model, settings, on_answer, trigger))


# -- the whole run ------------------------------------------------------------------------


def chain_meta(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return what a run's meta says of the chained arm: its settings as the report shows
    them and its asks a line (humaneval_chain.ask_cap)."""
    return {
        "chain_settings": shown_settings(settings, hc.CHAIN_SETTINGS),
        "chain_asks_per_line": hc.ASKS_PER_LINE,
    }


def server_label(arm: str, trigger: str) -> str:
    """Return an arm's name in the table: the server's arms say ``invoked`` when it was."""
    label = he.ARM_LABELS[arm]
    served = arm in ("server", he.CHAIN)
    return f"{label}, {trigger}" if served and trigger != "automatic" else label


def where(task: Task) -> dict[str, Any]:
    """Return where a task's record says its part is: line and indentation (single-line),
    the set, the name, the 1-based line and column of the start and the end, and the
    non-blank characters right of the cursor on its line (the server's automatic trigger
    skips beyond ``maxCharsRightOfCursor``)."""
    if isinstance(task, he.LineTask):
        return {"line": task.line + 1, "indent": task.indent}
    return {
        "set": task.kind,
        "name": task.name,
        "start": task.where(task.start),
        "end": task.where(task.end),
        "right_of_cursor": len(task.suffix().split("\n", 1)[0].strip()),
    }


def run_humaneval(config: HumanEvalConfig, command: str) -> dict[str, Any]:
    """Run the arms asked for over the sampled tasks of the set asked for, score every
    answer, return the result."""
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    if config.task_set not in he.SET_NAMES:
        raise ValueError(f"no HumanEval set {config.task_set!r} ({', '.join(he.SET_NAMES)})")
    check_trigger(config.trigger)
    if he.CHAIN in config.arms and config.task_set == "single":
        raise ValueError("the chained arm is for the multi-line and random-span sets")
    problems = he.load_problems(config.data)
    if config.problems:
        problems = problems[: config.problems]
    tasks: list[Task]
    if config.task_set == "single":
        tasks = list(he.sample_tasks(problems, config.tasks, config.seed))
        candidates = len(he.all_tasks(problems))
    else:
        tasks = list(hs.sample_tasks(problems, config.task_set, config.tasks, config.seed))
        candidates = len(hs.all_tasks(problems, config.task_set))
    set_name = he.SET_NAMES[config.task_set]
    label, quantization = model_label(config.model)
    settings, _ = parse_settings(config.settings)
    progress = Progress(len(tasks) * (len(config.arms) + 1), sys.stderr)
    progress.note(
        f"HumanEval {set_name}: {len(tasks)} of {candidates} tasks of {len(problems)} "
        f"problems; arms {', '.join(config.arms)}; {label}"
    )
    records: dict[str, dict[str, Any]] = {}
    canonical = blank = 0
    for task in tasks:
        ref = he.reference(task, config.timeout_s)
        canonical += ref["canonical_passes"]
        blank += ref["blank_passes"]
        records[task.id] = {"task": task.id, "problem": task.problem.task_id, **where(task)}
        records[task.id].update(expected=task.expected, **ref, arms={})
        progress.step("reference")

    def keep(arm: str) -> Callable[[Task, Answer], None]:
        def on_answer(task: Task, answer: Answer) -> None:
            suggestion = str(answer.get("suggestion", ""))
            if isinstance(task, he.LineTask):
                answer.update(he.score(task, suggestion, config.timeout_s))
            else:
                edit_range = answer.get("range")
                answer.update(hs.score(task, suggestion, edit_range, config.timeout_s))
                if arm == "plain":  # the same answer, truncated as published
                    cut = hs.truncate_plain(task, suggestion)
                    records[task.id]["arms"]["plain_trunc"] = {
                        "suggestion": cut,
                        "latency_ms": answer.get("latency_ms"),
                        **hs.score(task, cut, None, config.timeout_s),
                    }
            records[task.id]["arms"][arm] = answer
            progress.step(arm)

        return on_answer

    meta = {
        **run_meta(command, config.model, label, quantization),
        "set": config.task_set,
        "set_name": set_name,
        "problems": len(problems),
        "candidates": candidates,
        "official_tasks": hs.OFFICIAL_TASKS[config.task_set],
        "tasks": len(tasks),
        "all_lines": len(tasks) == candidates,
        "seed": config.seed,
        "timeout_s": config.timeout_s,
        "plain_max_tokens": PLAIN_MAX_TOKENS if config.task_set == "single" else SPAN_MAX_TOKENS,
        "server_settings": shown_settings(config.settings),
        **(chain_meta(config.settings) if he.CHAIN in config.arms else {}),
        "trigger": config.trigger,
        "reference": {"canonical_passes": canonical, "blank_passes": blank},
        "load_start": round(load_start, 2),
    }
    sessions: dict[str, dict[str, Any]] = {}

    def result() -> dict[str, Any]:
        rows = list(records.values())
        meta["load_end"] = round(os.getloadavg()[0], 2)
        meta["wall_min"] = round((time.perf_counter() - started) / 60, 2)
        names = [arm for arm in config.arms if arm in sessions]
        if "plain" in names and config.task_set != "single":
            names.insert(names.index("plain") + 1, "plain_trunc")
        arms = [
            {
                "name": arm,
                "label": server_label(arm, config.trigger),
                "session": sessions["plain" if arm == "plain_trunc" else arm],
                "summary": he.summarize(rows, arm),
                **({"chain": hc.figures(rows)} if arm == he.CHAIN else {}),
            }
            for arm in names
        ]
        return {"meta": meta, "arms": arms, "records": rows}

    for arm in config.arms:
        if arm == "plain":
            threads = settings.model.threads or machine_cpus()
            n_ctx = settings.model.context_length
            sessions[arm] = run_plain(
                tasks,
                config.model,
                threads=threads,
                n_ctx=n_ctx,
                answer=complete_any,
                on_answer=keep(arm),
            )
        elif arm == he.CHAIN:
            spans = [task for task in tasks if isinstance(task, hs.SpanTask)]
            sessions[arm] = hc.run_chain(
                spans, problems, config.model, dict(config.settings), keep(arm), config.trigger
            )
        else:
            sessions[arm] = run_server(
                tasks, problems, config.model, dict(config.settings), keep(arm), config.trigger
            )
        progress.note(f"arm {arm}: {sessions[arm]['wall_s']:.0f} s")
        if config.out is not None:  # what is done is kept, should a later arm fail
            he.write_outputs(config.out, result())
    progress.close()
    return result()
