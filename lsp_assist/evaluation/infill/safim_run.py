"""Running SAFIM: the plain-FIM arm, the server arm, resuming, the result.

``plain`` loads the model with harness.py's :class:`PlainModel` (the model's own FIM
ids) and decodes greedily to the end-of-text token; ``server`` starts the real
``lsp-assist serve`` over stdio on a scratch workspace and, for each task, writes the
program with the mask removed as the workspace's only task file, opens it, sends one
inline request at the mask (automatic, or invoked as when the user asks: ``trigger``)
and applies the first item as an editor does (its
``insertText`` over its ``range``); the file is deleted before ``didClose`` so no later
task sees it (SAFIM's splits share programs: one task's file holds another's answer).
:func:`run_safim` samples, runs the arms asked for, scores every answer and writes
results.json and safim.md after every few tasks; run again with the same ``--out``, it
keeps the answers already there and does the rest. docs/evaluation.md, "SAFIM".
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.config import machine_cpus, parse_settings
from lsp_assist.evaluation.client import close_document, open_document
from lsp_assist.evaluation.infill import safim as sf
from lsp_assist.evaluation.infill.harness import (
    PlainModel,
    add_outcome,
    check_trigger,
    greedy,
    inline_item,
    model_label,
    run_meta,
    run_plain,
    scratch_server,
    shown_settings,
)
from lsp_assist.evaluation.progress import Progress

PLAIN_MAX_TOKENS = {"block": 128, "control": 64, "api": 64}
"""Tokens the plain arm may write per split (it stops earlier at its end-of-text); block's
128 is SAFIM's own harness's (``max_length`` = the input + 128)."""
DEFAULT_TASKS = 3
"""Tasks per split x language by default (36 in all: minutes on a 2-core CPU)."""
SAVE_EVERY = 8
"""Write the outputs after this many answers (and at each arm's end)."""
LANGUAGE_IDS = {"python": "python", "java": "java", "cpp": "cpp", "csharp": "csharp"}
"""The languageId the server arm's didOpen sends, as VS Code names them."""


@dataclass(slots=True)
class SafimConfig:
    """What ``lsp-assist bench --safim`` was asked for."""

    model: Path
    tasks: int = DEFAULT_TASKS
    """Tasks per split x language; 0: all."""
    seed: int = 14
    splits: tuple[str, ...] = sf.SPLITS
    languages: tuple[str, ...] = sf.LANGUAGES
    arms: tuple[str, ...] = sf.ARMS
    settings: dict[str, Any] = field(default_factory=dict)
    """``--setting`` values: the server arm gets them all, the plain arm ``threads`` and
    ``contextLength``."""
    trigger: str = "automatic"
    """The server arm's inline request (``--trigger``, harness.TRIGGERS): ``automatic``
    (the trigger rules apply) or ``invoked`` (the user asked)."""
    timeout_s: float = sf.TEST_TIMEOUT_S
    data: Path | None = None
    out: Path | None = None
    """Where results.json and safim.md go; answers already there are kept (resume)."""


Answer = dict[str, Any]
"""One arm's answer: ``suggestion``, the ``completion`` where the mask was, the program."""


# -- plain FIM -------------------------------------------------------------------------------


def plain_ids(
    prefix: list[int],
    suffix: list[int],
    fim: tuple[int, int, int] | None,
    bos: Sequence[int],
    room: int,
) -> tuple[list[int], bool]:
    """Return the plain prompt's ids (BOS, FIM prefix, prefix, FIM suffix, suffix, FIM
    middle; without FIM ids BOS and the prefix) fitted into ``room`` tokens: the prefix
    keeps its end and the suffix its start, the suffix at most a quarter; and whether it
    was cut."""
    room -= len(bos) + (3 if fim is not None else 0)
    if fim is None:
        suffix = []
    cut = len(prefix) + len(suffix) > room
    if cut:
        keep_suffix = min(len(suffix), max(room // 4, room - len(prefix)))
        suffix = suffix[:keep_suffix]
        prefix = prefix[len(prefix) - (room - keep_suffix) :] if room > keep_suffix else []
    if fim is None:
        return [*bos, *prefix], cut
    pre, suf, mid = fim
    return [*bos, pre, *prefix, suf, *suffix, mid], cut


def complete_plain(plain: PlainModel, task: sf.Task, max_tokens: int) -> Answer:
    """Return the model's greedy FIM answer for the task (to its end-of-text or the cap)."""
    engine = plain.engine
    started = time.perf_counter()
    prompt, cut = plain_ids(
        engine.tokenize(task.prefix()),
        engine.tokenize(task.suffix()),
        plain.fim,
        plain.bos,
        engine.n_ctx - max_tokens,
    )
    text, common, written, first = greedy(engine, prompt, max_tokens)
    done = time.perf_counter()
    return {
        "suggestion": text,
        "completion": text,
        "latency_ms": round((done - started) * 1000, 2),
        "ttft_ms": round((first - started) * 1000, 2),
        "prompt_tokens": len(prompt),
        "prompt_cut": cut,
        "reused_tokens": common,
        "output_tokens": written,
    }


def complete_split(plain: PlainModel, task: sf.Task) -> Answer:
    """Return :func:`complete_plain` with the cap of the task's split."""
    return complete_plain(plain, task, PLAIN_MAX_TOKENS[task.split])


# -- through the server ----------------------------------------------------------------------


def offset_at(text: str, line: int, character: int) -> int:
    """Return the string offset of an LSP position (UTF-16 column) in ``text``."""
    start = 0
    for _ in range(line):
        found = text.find("\n", start)
        if found < 0:
            return len(text)
        start = found + 1
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    units = 0
    for i in range(start, end):
        if units >= character:
            return i
        units += 2 if ord(text[i]) > 0xFFFF else 1
    return end


def apply_item(
    task: sf.Task, text: str, edit_range: list[int] | None
) -> tuple[str, str | None, bool]:
    """Apply an inline item as an editor does: ``text`` over ``edit_range`` (start line,
    character, end line, character; None: at the cursor) in the blanked program.

    Returns the program, the completion where the mask was (None when the edit changed
    text before the cursor) and whether it removed text right of the cursor that it did
    not write back (a half-eaten suffix).
    """
    blank = task.blanked()
    cursor = len(task.prefix())
    if edit_range is None:
        start = end = cursor
    else:
        start = offset_at(blank, edit_range[0], edit_range[1])
        end = offset_at(blank, edit_range[2], edit_range[3])
    if start < cursor and text.startswith(blank[start:cursor]):  # the range rewrites the
        text, start = text[cursor - start :], cursor  # line's start as it was: the same edit
    program = blank[:start] + text + blank[end:]
    prefix, suffix = task.prefix(), task.suffix()
    if program.startswith(prefix) and program.endswith(suffix):
        return program, program[len(prefix) : len(program) - len(suffix)], False
    if program.startswith(prefix):  # the edit removed suffix text it did not write back
        return program, blank[cursor:start] + text, True
    return program, None, False


async def _serve(
    tasks: Sequence[sf.Task],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[sf.Task, Answer], None],
    trigger: str,
) -> dict[str, Any]:
    # The index wants one file to scan; the tasks' files come and go one at a time.
    files = {"placeholder.py": "pass\n"}
    async with scratch_server("safim", model, settings, files) as server:
        client, root = server.client, server.root
        last_id = ""
        for task in tasks:
            path = root / task.file_name
            uri = path.as_uri()
            blank = task.blanked()
            line, character = task.cursor()
            path.write_text(blank, encoding="utf-8")
            try:
                open_document(client, uri, blank, LANGUAGE_IDS.get(task.lang, task.lang))
                text, edit_range, client_ms, last = await inline_item(
                    client, uri, line, character, trigger=trigger
                )
            finally:
                path.unlink(missing_ok=True)  # gone before didClose: the index forgets it
            close_document(client, uri)
            program, completion, eaten = apply_item(task, text, edit_range)
            answer: Answer = {
                "suggestion": text,
                "range": edit_range,
                "program": program,
                "completion": completion,
                "suffix_eaten": eaten,
                "client_ms": round(client_ms, 2),
            }
            last_id = add_outcome(answer, last, last_id, client_ms)
            on_answer(task, answer)
    return server.session


def run_server(
    tasks: Sequence[sf.Task],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[sf.Task, Answer], None],
    trigger: str = "automatic",
) -> dict[str, Any]:
    """Answer every task through ``lsp-assist serve`` with one ``trigger`` inline request
    each; return the session (load, settings)."""
    return asyncio.run(_serve(tasks, model, settings, on_answer, trigger))


# -- the whole run ---------------------------------------------------------------------------


def previous_run(
    out: Path | None,
    model: Path,
    seed: int,
    settings: dict[str, Any] | None = None,
    trigger: str = "automatic",
) -> dict[str, Any]:
    """Return the results.json of an earlier run in ``out`` with the same model, seed,
    ``--setting`` values and ``--trigger`` (a run from before it: automatic) ({} when there
    is none: resume only what was asked the same way, no automatic and invoked answers
    in one table)."""
    if out is None or not (out / "results.json").is_file():
        return {}
    try:
        old: dict[str, Any] = json.loads((out / "results.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    meta = old.get("meta", {})
    same = (
        meta.get("model"),
        meta.get("seed"),
        meta.get("settings", {}),
        meta.get("trigger", "automatic"),
    )
    if same != (str(model), seed, dict(settings or {}), trigger):
        return {}
    return old


def previous_records(
    out: Path | None,
    model: Path,
    seed: int,
    settings: dict[str, Any] | None = None,
    trigger: str = "automatic",
) -> dict[str, dict[str, Any]]:
    """Return the records of an earlier run in ``out`` asked the same way (resume)."""
    old = previous_run(out, model, seed, settings, trigger)
    return {str(r["task"]): r for r in old.get("records", [])}


def run_safim(config: SafimConfig, command_line: str) -> dict[str, Any]:
    """Sample the tasks, run the arms asked for, score every answer, return the result."""
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    check_trigger(config.trigger)
    folder = sf.data_dir(config.data)
    everything = sf.load_tasks(folder, config.splits, config.languages)
    tasks = sf.sample_tasks(everything, config.tasks, config.seed)
    label, quantization = model_label(config.model)
    settings, _ = parse_settings(config.settings)
    earlier = previous_run(config.out, config.model, config.seed, config.settings, config.trigger)
    old = {str(r["task"]): r for r in earlier.get("records", [])}
    records: dict[str, dict[str, Any]] = {}
    for task in tasks:
        kept = old.get(task.id)
        records[task.id] = {
            "task": task.id,
            "split": task.split,
            "lang": task.lang,
            "task_id": task.task_id,
            "ground_truth": task.ground_truth,
            "reference_parse_errors": sf.parse_errors(task.lang, task.filled(task.ground_truth)),
            "arms": dict(kept.get("arms", {})) if kept else {},
        }
    todo = {arm: [t for t in tasks if arm not in records[t.id]["arms"]] for arm in config.arms}
    progress = Progress(sum(len(v) for v in todo.values()), sys.stderr)
    resumed = sum(len(tasks) - len(v) for v in todo.values())
    progress.note(
        f"SAFIM: {len(tasks)} of {len(everything)} tasks ({config.tasks or 'all'} per split x "
        f"language, seed {config.seed}); arms {', '.join(config.arms)}; {label}"
        + (f"; {resumed} answers kept from {config.out}" if resumed else "")
    )
    scored: dict[str, dict[str, Any]] = {}

    def score_once(task: sf.Task, completion: str | None, program: str) -> dict[str, Any]:
        key = sf.program_key(task, program) + ("" if completion is not None else ":none")
        if key not in scored:
            ref = records[task.id]["reference_parse_errors"]
            scored[key] = sf.score(task, completion, program, config.timeout_s, ref)
        return dict(scored[key])

    def derive_from_plain(task: sf.Task) -> None:
        """Score the plain answer cut at its first line and by SAFIM's truncation."""
        arms = records[task.id]["arms"]
        plain = arms["plain"]
        completion = plain.get("completion")
        line = sf.first_line(str(completion))
        arms["plain_line"] = {
            "latency_ms": plain.get("latency_ms"),
            **score_once(task, line, task.filled(line)),
        }
        ref = records[task.id]["reference_parse_errors"]
        cut = sf.safim_truncate(task, str(completion or ""), ref)
        arms["plain_trunc"] = {
            "latency_ms": plain.get("latency_ms"),
            "completion": cut,
            **score_once(task, cut, task.filled(cut)),
        }

    # An answer kept from a run before a derived arm existed gets it now, not a gap.
    for task in tasks:
        kept_arms = records[task.id]["arms"]
        if "plain" in kept_arms and not {"plain_line", "plain_trunc"} <= kept_arms.keys():
            derive_from_plain(task)

    meta: dict[str, Any] = {
        **run_meta(command_line, config.model, label, quantization),
        "data": str(folder),
        "tasks": config.tasks,
        "seed": config.seed,
        "settings": dict(config.settings),
        "splits": list(config.splits),
        "languages": list(config.languages),
        "sampled": len(tasks),
        "available": len(everything),
        "timeout_s": config.timeout_s,
        "plain_max_tokens": "/".join(f"{k} {v}" for k, v in PLAIN_MAX_TOKENS.items()),
        "server_settings": shown_settings(config.settings),
        "trigger": config.trigger,
        "runtimes": {lang: sf.runtime_available(lang) for lang in config.languages},
        "load_start": round(load_start, 2),
    }
    sessions: dict[str, dict[str, Any]] = dict(earlier.get("sessions", {}))
    if earlier:
        meta["resumed_from"] = {k: earlier["meta"].get(k) for k in ("date", "commit", "command")}

    def result() -> dict[str, Any]:
        meta["load_end"] = round(os.getloadavg()[0], 2)
        meta["wall_min"] = round((time.perf_counter() - started) / 60, 2)
        rows = list(records.values())
        return {"meta": meta, "sessions": sessions, "cells": sf.cells(rows), "records": rows}

    answered = 0

    def keep(arm: str) -> Callable[[sf.Task, Answer], None]:
        def on_answer(task: sf.Task, answer: Answer) -> None:
            nonlocal answered
            completion = answer.get("completion")
            program = str(answer.pop("program", "") or task.filled(str(completion or "")))
            answer.update(score_once(task, completion, program))
            arms = records[task.id]["arms"]
            arms[arm] = answer
            if arm == "plain":
                derive_from_plain(task)
            progress.step(f"{arm} {task.split} {task.lang}")
            answered += 1
            if config.out is not None and answered % SAVE_EVERY == 0:
                sf.write_outputs(config.out, result())

        return on_answer

    for arm in config.arms:
        pending = todo[arm]
        if not pending:
            continue
        if arm == "plain":
            threads = settings.model.threads or machine_cpus()
            sessions[arm] = run_plain(
                pending,
                config.model,
                threads=threads,
                n_ctx=settings.model.context_length,
                answer=complete_split,
                on_answer=keep(arm),
            )
        else:
            sessions[arm] = run_server(
                pending, config.model, dict(config.settings), keep(arm), config.trigger
            )
        progress.note(f"arm {arm}: {sessions[arm]['wall_s']:.0f} s")
        if config.out is not None:
            sf.write_outputs(config.out, result())
    progress.close()
    return result()


def resolve_model(given: str) -> Path:
    """Return the GGUF of ``--model``: a file, a preset name, or '' for the default preset."""
    from lsp_assist.backends import resolve_model_path

    named = {"modelPath": given} if Path(given).expanduser().is_file() else {"model": given}
    model = resolve_model_path(parse_settings(named if given else {})[0].model).resolve()
    if not model.is_file():
        raise sf.SafimError(f"no model file {model} (--model)")
    return model


def names(value: str, allowed: Sequence[str], flag: str) -> tuple[str, ...]:
    """Return a comma-separated ``value`` as names from ``allowed`` (ValueError otherwise)."""
    picked = tuple(v.strip() for v in value.split(",") if v.strip())
    if not picked or set(picked) - set(allowed):
        raise ValueError(f"{flag}: expected a subset of {','.join(allowed)}, not {value!r}")
    return tuple(name for name in allowed if name in picked)
