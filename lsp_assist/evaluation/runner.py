"""The two commands, ``lsp-assist bench`` and ``lsp-assist eval``: set up, run the rows, sum up.

A bench prepares the workspace copy and its tasks (workspace.py), runs each row of the
table over every task (rows.py: the server with settings switched, server_row.py; or
the peer, peers/llmls_row.py), then summarises the records (metrics.py). An eval runs the hole
tasks once, through the server with the user's own settings.
"""

from __future__ import annotations

import asyncio
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.config import parse_settings
from lsp_assist.evaluation.peers.llmls_row import run_peer
from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.rows import CAPS, ROW_NAMES, RowSpec, default_rows
from lsp_assist.evaluation.server_row import ServerRow
from lsp_assist.evaluation.tasks import HOLE_KINDS, Task
from lsp_assist.evaluation.workspace import STDLIB_EXCLUDE, Workspace, prepare_workspace

__all__ = [
    "ROW_NAMES",
    "STDLIB_EXCLUDE",
    "BenchConfig",
    "keystrokes",
    "run_bench",
    "run_eval",
    "run_rows",
    "split_tasks",
]
"""The commands' names (ROW_NAMES and STDLIB_EXCLUDE too: cli/bench_cmd.py reads them here)."""


@dataclass(slots=True)
class BenchConfig:
    """What ``lsp-assist bench`` was asked for."""

    workspace: Path
    model: str
    model2: str = ""
    cross_file: int = 8
    in_file: int = 4
    typing: int = 1
    seed: int = 14
    rows: list[str] | None = None
    exclude: list[str] = field(default_factory=list)
    open_files: int = 2
    peer_window: int = 1024
    settings: dict[str, Any] = field(default_factory=dict)
    """Settings every row gets on top of its own (``--setting``; the peer takes
    ``maxTokens``, ``threads`` and ``contextLength`` from them)."""
    scratch: Path | None = None
    keep: bool = False


async def run_rows(
    config: BenchConfig,
    workspace: Workspace,
    tasks: Sequence[Task],
    specs: Sequence[RowSpec],
    progress: Progress,
    on_row: Callable[[RowSpec, dict[str, Any]], None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Run each row over every task; return the records and what each row's session said."""
    records: list[dict[str, Any]] = []
    sessions: dict[str, dict[str, Any]] = {}
    settings, _ = parse_settings(config.settings)
    for spec in specs:
        started = time.perf_counter()
        spec.settings = {**spec.settings, **config.settings} if not spec.peer else {}
        if spec.peer:
            rows, load_s = await asyncio.to_thread(
                run_peer,
                spec,
                workspace,
                tasks,
                spec.model or config.model,
                window=config.peer_window,
                max_tokens=settings.completion.max_tokens,
                n_ctx=settings.model.context_length,
                threads=settings.model.threads or _threads(),
                progress=progress,
            )
            session: dict[str, Any] = {"load_s": round(load_s, 2)}
        else:
            row = ServerRow(
                spec,
                workspace,
                config.model,
                open_files=config.open_files,
                seed=config.seed,
                progress=progress,
            )
            rows = await row.run(tasks)
            layered = spec.settings.get("strategy", "layered") == "layered"
            session = {
                "load_s": round(row.load_s, 2),
                "budget": row.budget if layered else {},
                "messages": row.messages,
                "settings": row.options(),
            }
        session["wall_s"] = round(time.perf_counter() - started, 1)
        sessions[spec.name] = session
        records += rows
        if on_row is not None:
            on_row(spec, session)
    return records, sessions


def _threads() -> int:
    from lsp_assist.config import machine_cpus

    return machine_cpus()


def split_tasks(total: int) -> tuple[int, int]:
    """Return (cross-file, in-file) counts for ``total`` hole tasks: two thirds cross-file."""
    cross = math.ceil(total * 2 / 3)
    return cross, max(0, total - cross)


# -- the two commands ---------------------------------------------------------------------


def _meta(
    command: str,
    workspace: Workspace,
    tasks: Sequence[Task],
    model: str,
    seed: int,
    load_start: float,
    started: float,
) -> dict[str, Any]:
    from lsp_assist.evaluation import report

    typing = [t for t in tasks if t.kind == "typing"]
    return {
        "command": command,
        "date": report.now(),
        "machine": report.machine(),
        "commit": report.commit(),
        "workspace": str(workspace.source),
        "files": len(workspace.files),
        "index_s": round(workspace.index_s, 1),
        "model": model,
        "model_name": Path(model).name if model else "embedded",
        "seed": seed,
        "tasks": {
            "cross_file": sum(1 for t in tasks if t.kind == "cross_file"),
            "in_file": sum(1 for t in tasks if t.kind == "in_file"),
            "typing": len(typing),
            "keystrokes": sum(keystrokes(t) for t in typing),
        },
        "caps": ", ".join(f"{k} {v:,}" for k, v in CAPS.items()),
        "load_start": round(load_start, 2),
        "load_end": round(os.getloadavg()[0], 2),
        "wall_min": round((time.perf_counter() - started) / 60, 2),
    }


def keystrokes(task: Task) -> int:
    """Return the requests a typing task sends: one per character, one before the first."""
    return len(task.target.rstrip()) - task.indent + 1


def run_bench(config: BenchConfig, command: str) -> dict[str, Any]:
    """Run ``lsp-assist bench``: prepare, run every row, summarise; return the result."""
    from lsp_assist.evaluation.metrics import summarize_rows

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    progress_out = sys.stderr
    progress_out.write(f"copying and indexing {config.workspace} ...\n")
    workspace, tasks = prepare_workspace(
        config.workspace,
        config.exclude,
        cross_file=config.cross_file,
        in_file=config.in_file,
        typing=config.typing,
        seed=config.seed,
        scratch=config.scratch,
    )
    try:
        settings, _ = parse_settings({})
        specs = default_rows(settings, config.model2)
        if config.rows:
            specs = [s for s in specs if s.name in config.rows]
        units = sum(1 for t in tasks if t.kind in HOLE_KINDS)
        units += sum(keystrokes(t) for t in tasks if t.kind == "typing")
        progress = Progress(units * len(specs), progress_out)
        progress.note(
            f"{len(workspace.files)} files indexed in {workspace.index_s:.1f} s; "
            f"{len(tasks)} tasks ({units} requests) x {len(specs)} rows"
        )

        def done(spec: RowSpec, session: dict[str, Any]) -> None:
            progress.note(f"row {spec.name}: {session['wall_s']:.0f} s")

        records, sessions = asyncio.run(
            run_rows(config, workspace, tasks, specs, progress, on_row=done)
        )
        progress.close()
    finally:
        if not config.keep:
            workspace.cleanup()
    rows = [
        {"name": s.name, "label": s.label, "note": s.note, "session": sessions.get(s.name, {})}
        for s in specs
    ]
    summarize_rows(rows, records)
    meta = _meta(command, workspace, tasks, config.model, config.seed, load_start, started)
    meta["settings"] = dict(config.settings)
    return {
        "meta": meta,
        "rows": rows,
        "tasks": [t.to_json() for t in tasks],
        "records": records,
    }


_OWN_KEYS = ("cacheDir", "logPrompts", "metrics", "watch")
"""Settings the eval sets itself (its metrics log is read back; the copy is not watched)."""


def run_eval(
    source: Path,
    values: dict[str, Any],
    *,
    cross_file: int,
    in_file: int,
    seed: int,
    exclude: Sequence[str],
    command: str,
) -> dict[str, Any]:
    """Run ``lsp-assist eval``: hole tasks through the server with the user's settings."""
    from lsp_assist.evaluation.metrics import summarize, summarize_eval

    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    sys.stderr.write(f"copying and indexing {source} ...\n")
    user = {k: v for k, v in values.items() if k not in _OWN_KEYS}
    given = list(user.get("excludeGlobs") or [])
    workspace, tasks = prepare_workspace(
        source,
        [*exclude, *given],
        cross_file=cross_file,
        in_file=in_file,
        typing=0,
        seed=seed,
    )
    try:
        progress = Progress(len(tasks))
        spec = RowSpec("eval", "your settings", {**user, "excludeGlobs": workspace.exclude})
        row = ServerRow(
            spec, workspace, "", open_files=2, seed=seed, keep_env=True, progress=progress
        )
        records = asyncio.run(row.run(tasks))
        progress.close()
    finally:
        workspace.cleanup()
    model = str(user.get("modelPath", ""))
    return {
        "meta": _meta(command, workspace, tasks, model, seed, load_start, started),
        "settings": user,
        "summary": summarize_eval(records),
        "row": summarize(records),
        "tasks": [t.to_json() for t in tasks],
        "records": records,
    }
