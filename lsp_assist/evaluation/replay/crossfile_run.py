"""Running the cross-file line benchmark: each package's copy, each row's server, the result.

For each package (a folder of code published after the models were trained) the copy the
servers run on is made and indexed once (workspace.py) and its lines chosen
(crossfile.choose_tasks). Each row is one ``lsp-assist serve`` over stdio on that copy with
the row's settings as initializationOptions: ``plain`` the replay's plain FIM of the
file, ``default`` nothing more, ``oracle`` every task's definitions pinned at its line
(``relatedPins``: the related layer renders them as it renders any definition). For each
task the file on disk and the buffer (didOpen) are the file up to the line with its
indentation, and one automatic inline request goes at the indentation; the file is
restored before didClose. Every row also gets :data:`BENCH_SETTINGS` and ``--setting``.
The servers' metrics log (``logPrompts``) gives each answer its prompt: whether it holds
the needed definition, whether it leaked the line. docs/evaluation.md, "Cross-file lines".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.documents import language_for_path
from lsp_assist.evaluation.client import (
    close_document,
    inline_request,
    open_document,
    start_server,
    stop_server,
    wait_loaded,
)
from lsp_assist.evaluation.infill.harness import add_outcome, model_label, run_meta
from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.replay import crossfile as cf
from lsp_assist.evaluation.rows import CAPS
from lsp_assist.evaluation.server_row import clean_env
from lsp_assist.evaluation.tasks import prompt_leaks
from lsp_assist.evaluation.workspace import Workspace, prepare_workspace

BENCH_SETTINGS: dict[str, Any] = {"answerAfterMs": 0, "contextBudget": 1024, **CAPS}
"""What every row sets: the whole suggestion in one answer, the budget given (the default's
1,024: the rows do not differ by a prompt speed measured under another load), and time
caps that let every request answer on a loaded CPU."""
_WRAPPERS = frozenset({"src", "package", "lib", "dist"})
"""Folder names that do not name a package (its name is the folder above)."""


@dataclass
class CrossfileConfig:
    """What ``lsp-assist bench --crossfile`` was asked for."""

    packages: list[tuple[str, Path]]
    """(name, folder) of each package."""
    model: Path
    tasks: int = cf.DEFAULT_TASKS
    """Lines per package."""
    seed: int = 14
    rows: tuple[str, ...] = cf.ROW_NAMES
    settings: dict[str, Any] = field(default_factory=dict)
    """``--setting`` values: every row gets them, after :data:`BENCH_SETTINGS`."""
    scratch: Path | None = None
    keep: bool = False
    out: Path | None = None
    """Where results.json and table.md are written after each row (None: not here)."""


def package_name(folder: Path) -> str:
    """Return a package's name from its folder (``.../tanstack-db/package/src`` ->
    ``tanstack-db``)."""
    folder = folder.resolve()
    while folder.name in _WRAPPERS and folder.parent != folder:
        folder = folder.parent
    return folder.name or "package"


def parse_package(text: str) -> tuple[str, Path]:
    """Return ``[NAME=]DIR`` as (name, folder)."""
    name, _, folder = text.rpartition("=")
    path = Path(folder).expanduser()
    return (name or package_name(path)), path


def prepare(
    name: str, folder: Path, count: int, seed: int, scratch: Path | None
) -> tuple[Workspace, list[cf.CrossTask]]:
    """Copy and index one package and choose its lines."""
    chosen: list[cf.CrossTask] = []

    def choose(index: Any) -> None:
        chosen.extend(cf.choose_tasks(index, name, count, seed))

    workspace, _ = prepare_workspace(
        folder, [], cross_file=0, in_file=0, typing=0, seed=seed, scratch=scratch, on_index=choose
    )
    for task in chosen:
        rel = task.task.path
        workspace.originals.setdefault(rel, (workspace.root / rel).read_bytes())
    return workspace, chosen


async def serve_row(
    workspace: Workspace,
    tasks: Sequence[cf.CrossTask],
    row: str,
    options: dict[str, Any],
    on_answer: Callable[[cf.CrossTask, dict[str, Any]], None],
) -> dict[str, Any]:
    """Run one row's server over ``tasks``; return its session (load, budget, messages)."""
    started = time.perf_counter()
    messages: list[str] = []
    client, _ = await start_server(
        f"bench-crossfile-{row}",
        workspace.root,
        options,
        env=clean_env(False),
        on_message=messages.append,
    )
    session: dict[str, Any] = {}
    try:
        status = await wait_loaded(client)
        session.update(load_s=round(time.perf_counter() - started, 2), budget=status.get("budget"))
        last_id = ""
        for task in tasks:
            answer, last_id = await _ask(client, workspace, task, last_id)
            on_answer(task, answer)
    finally:
        with contextlib.suppress(Exception):
            await stop_server(client)
    session.update(messages=messages, wall_s=round(time.perf_counter() - started, 1))
    return session


async def _ask(
    client: Any, workspace: Workspace, task: cf.CrossTask, last_id: str
) -> tuple[dict[str, Any], str]:
    """Serve one line: the file cut at it, on disk and as the buffer; one automatic request."""
    rel = task.task.path
    path = workspace.root / rel
    original = workspace.originals[rel]
    buffer = task.buffer(original.decode("utf-8", "replace"))
    uri = path.as_uri()
    path.write_text(buffer, encoding="utf-8")  # the disk says what the buffer says
    try:
        open_document(client, uri, buffer, task.task.language)
        suggestion, client_ms, last = await inline_request(
            client, uri, task.task.line, task.task.indent, automatic=True
        )
    finally:
        path.write_bytes(original)  # before didClose: the index rereads the disk
    close_document(client, uri)
    answer: dict[str, Any] = {"suggestion": suggestion, "client_ms": round(client_ms, 2)}
    return answer, add_outcome(answer, last, last_id, client_ms)


def join_prompts(cache_dir: Path, records: Sequence[dict[str, Any]]) -> None:
    """Give each record its request's logged prompt and tokens per layer (``logPrompts``)."""
    from lsp_assist.telemetry import METRICS_FILE, read_records

    dirs = sorted({p.parent for p in cache_dir.rglob(METRICS_FILE + "*")})
    logged = {r.request_id: r for r in read_records(dirs)} if dirs else {}
    for record in records:
        found = logged.get(str(record.get("request_id", "")))
        if found is not None:
            record["layer_tokens"] = dict(found.layer_tokens)
            if found.prompt is not None:
                record["prompt"] = found.prompt


def finish(record: dict[str, Any], task: cf.CrossTask) -> None:
    """Add the definition check and the leak check of a record's prompt."""
    prompt = record.get("prompt")
    if isinstance(prompt, str):
        record["carries_definition"] = cf.carries(task, prompt)
        record["leaked"] = prompt_leaks(prompt, task.task.target)


def row_options(
    workspace: Workspace, row: str, tasks: Sequence[cf.CrossTask], config: CrossfileConfig
) -> dict[str, Any]:
    """Return a row's initializationOptions: the copy's, the bench's, the row's, --setting."""
    return {
        **workspace.options(),
        **BENCH_SETTINGS,
        **cf.row_settings(row, tasks),
        **config.settings,
        "modelPath": str(config.model),
    }


def run_row(
    workspace: Workspace,
    tasks: Sequence[cf.CrossTask],
    row: str,
    config: CrossfileConfig,
    progress: Progress,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Run one row over one package's lines; return its scored records and its session."""
    records: list[dict[str, Any]] = []

    def keep(task: cf.CrossTask, answer: dict[str, Any]) -> None:
        score = cf.score_answer(task, str(answer["suggestion"]))
        records.append({**_where(row, task), **answer, **score})
        progress.step(f"{task.package} {row}")

    options = row_options(workspace, row, tasks, config)
    session = asyncio.run(serve_row(workspace, tasks, row, options, keep))
    join_prompts(workspace.cache_dir, records)
    by_id = {t.id: t for t in tasks}
    for record in records:
        finish(record, by_id[record["task"]])
    return records, session


def run_crossfile(config: CrossfileConfig, command: str) -> dict[str, Any]:
    """Run every row over every package's lines; return the result (written to ``config.out``
    after each row when given)."""
    started = time.perf_counter()
    label, quantization = model_label(config.model)
    meta: dict[str, Any] = {
        **run_meta(command, config.model, label, quantization),
        "seed": config.seed,
        "rows": list(config.rows),
        "settings": ", ".join(f"{k} {v}" for k, v in {**BENCH_SETTINGS, **config.settings}.items()),
        "load_start": round(os.getloadavg()[0], 2),
        "packages": {},
    }
    prepared = [
        (name, *prepare(name, folder, config.tasks, config.seed, config.scratch))
        for name, folder in config.packages
    ]
    tasks = [task for _, _, chosen in prepared for task in chosen]
    records: list[dict[str, Any]] = []
    sessions: list[dict[str, Any]] = []
    progress = Progress(len(tasks) * len(config.rows), sys.stderr)
    result = {"meta": meta, "tasks": [t.to_json() for t in tasks], "sessions": sessions}
    try:
        for (name, folder), (_, workspace, chosen) in zip(config.packages, prepared, strict=True):
            meta["packages"][name] = _package_meta(folder, workspace, chosen)
            progress.note(f"{name}: {len(chosen)} lines from {len(workspace.files)} files")
            for row in config.rows:
                mine, session = run_row(workspace, chosen, row, config, progress)
                records += mine
                sessions.append({"package": name, "row": row, **session})
                _write(config.out, result, records, meta, started)
    finally:
        progress.close()
        if not config.keep:
            for _, workspace, _ in prepared:
                workspace.cleanup()
    return _write(None, result, records, meta, started)


def _where(row: str, task: cf.CrossTask) -> dict[str, Any]:
    return {
        "row": row,
        "package": task.package,
        "task": task.id,
        "path": task.task.path,
        "line": task.task.line + 1,
        "language": task.task.language,
        "target": task.task.expected,
        "names": list(task.names),
    }


def _package_meta(
    folder: Path, workspace: Workspace, chosen: Sequence[cf.CrossTask]
) -> dict[str, Any]:
    languages = [language_for_path(f) or "" for f in workspace.files]
    common = max(set(languages), key=languages.count) if languages else ""
    return {
        "source": str(folder),
        "files": len(workspace.files),
        "language": common,
        "tasks": len(chosen),
        "index_s": round(workspace.index_s, 1),
    }


def _write(
    out: Path | None,
    result: dict[str, Any],
    records: list[dict[str, Any]],
    meta: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    meta["load_end"] = round(os.getloadavg()[0], 2)
    meta["wall_min"] = round((time.perf_counter() - started) / 60, 2)
    result["records"] = records
    result["summary"] = cf.summarize(records, meta["rows"])
    if out is not None:
        write_outputs(out, result)
    return result


def write_outputs(out: Path, result: dict[str, Any]) -> tuple[Path, Path]:
    """Write results.json and table.md to ``out``; return their paths."""
    from lsp_assist.evaluation import report

    out.mkdir(parents=True, exist_ok=True)
    data, text = out / "results.json", out / "table.md"
    report.write_json(data, result)
    text.write_text(cf.table(result), encoding="utf-8")
    return text, data


def from_json(path: Path, out: Path) -> dict[str, Any]:
    """Recompute the figures of a results.json from its records; write the outputs again."""
    import json

    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    result["summary"] = cf.summarize(result["records"], result["meta"]["rows"])
    write_outputs(out, result)
    return result
