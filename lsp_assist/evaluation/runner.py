"""Running the tasks: each row through the real server over stdio, or the peer.

A bench copies the workspace's indexable files to a temporary folder (the server runs
on the copy, so a task can blank its line on disk; the user's files are never
written), indexes the copy once (the servers then start from that SQLite cache), and
chooses the tasks (tasks.py). Each row then starts ``lsp-assist serve`` with its
settings as initializationOptions, the same code path an editor drives, and for
every hole task: blanks the line on disk, opens ``open_files`` other files of the same
folder and the blanked buffer (didOpen, so the index holds the buffer), asks for an
inline completion at the indentation, restores the file and closes the buffers. A
typing task opens the blanked line and retypes it, one didChange and one automatic
inline request per keystroke, waiting for each answer. The server logs every request
with ``logPrompts`` on; its metrics log, joined by request id, gives each record its
prompt, token counts and the parts of its time from arrival.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from lsp_assist.config import IndexSettings, Settings, parse_settings
from lsp_assist.evaluation.client import (
    close_document,
    inline_request,
    line_edit,
    open_document,
    start_server,
    stop_server,
    wait_loaded,
)
from lsp_assist.evaluation.metrics import score, suggestion_parses
from lsp_assist.evaluation.tasks import (
    HOLE_KINDS,
    Task,
    blank_line,
    copy_workspace,
    generate_tasks,
    prompt_leaks,
)

CAPS = {"promptTimeoutMs": 600_000, "generationTimeoutMs": 120_000}
"""Time caps every bench row runs with: each request answers, however slow the prompt
(a 4,000-token baseline prompt takes minutes on a 2-core CPU shared with other work)."""
STDLIB_EXCLUDE = [
    "**/test/**",
    "**/tests/**",
    "idlelib/**",
    "lib2to3/**",
    "turtledemo/**",
    "ensurepip/**",
    "site-packages/**",
    "dist-packages/**",
]
"""What the default workspace (the installed standard library) leaves out."""
ROW_NAMES = ("baseline", "layered", "retrieval", "speculative", "model2", "peer")
"""The rows ``--rows`` can pick, in the table's order (model2 only with ``--model2``)."""
_METRIC_KEYS = (
    "request_id",
    "strategy",
    "prompt_tokens",
    "reused_tokens",
    "output_tokens",
    "drafting",
    "draft_proposed",
    "draft_accepted",
    "debounce_ms",
    "queue_ms",
    "context_ms",
    "prefill_ms",
    "decode_ms",
    "ttft_ms",
    "engine_ms",
    "latency_ms",
    "whole_ms",
    "answered_early",
    "cancelled",
    "cache_hit",
    "error",
)


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


@dataclass(slots=True)
class Workspace:
    """The copy the servers run on and what the tasks read from it."""

    source: Path
    root: Path
    """The copy (under ``scratch``)."""
    scratch: Path
    cache_dir: Path
    exclude: list[str]
    originals: dict[str, bytes] = field(default_factory=dict)
    """Task files' bytes as they were, by workspace-relative path."""
    files: list[str] = field(default_factory=list)
    """Every copied file, workspace-relative, sorted."""
    index_s: float = 0.0

    def text(self, rel: str) -> str:
        """Return a task file's original text."""
        return self.originals[rel].decode("utf-8", "replace")

    def options(self) -> dict[str, Any]:
        """Return the settings every server on this workspace gets."""
        return {
            "cacheDir": str(self.cache_dir),
            "excludeGlobs": list(self.exclude),
            "watch": False,
            "metrics": True,
            "logPrompts": True,
        }

    def cleanup(self) -> None:
        """Delete the copy and its caches."""
        shutil.rmtree(self.scratch, ignore_errors=True)


class Progress:
    """A progress bar on stderr (when stderr is not a terminal: a line per tenth done or
    per minute)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._tty = self.stream.isatty()
        self._last_tenth = -1
        self._last_line = time.monotonic()
        self.label = ""

    def step(self, label: str = "", count: int = 1) -> None:
        """Count ``count`` units of work done under ``label``."""
        self.done = min(self.total, self.done + count)
        self.label = label or self.label
        self.show()

    def show(self) -> None:
        """Draw the bar."""
        share = self.done / self.total
        elapsed = time.monotonic() - self.started
        eta = elapsed / share - elapsed if share > 0 else 0.0
        bar = "#" * int(share * 30)
        text = (
            f"[{bar:<30}] {self.done}/{self.total} {self.label:<28} "
            f"{elapsed / 60:4.1f} min, ~{eta / 60:.1f} min left"
        )
        if self._tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif int(share * 10) != self._last_tenth or time.monotonic() - self._last_line > 60:
            self._last_tenth = int(share * 10)
            self._last_line = time.monotonic()
            self.stream.write(text + "\n")
            self.stream.flush()

    def note(self, message: str) -> None:
        """Print a message above the bar."""
        self.stream.write(("\n" if self._tty else "") + message + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()


# -- set-up ---------------------------------------------------------------------------


def prepare_workspace(
    source: Path,
    exclude: Sequence[str],
    *,
    cross_file: int,
    in_file: int,
    typing: int,
    seed: int,
    scratch: Path | None = None,
) -> tuple[Workspace, list[Task]]:
    """Copy ``source``'s indexable files, index the copy, choose the tasks."""
    from lsp_assist.config import workspace_cache_dir
    from lsp_assist.index.files import FileRules
    from lsp_assist.index.workspace import WorkspaceIndex

    source = source.resolve()
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    # a fresh folder of our own, even inside a folder the user named: cleanup removes it whole
    scratch = Path(tempfile.mkdtemp(prefix="lsp-assist-bench-", dir=scratch))
    root = scratch / "workspace" / (source.name or "root")
    cache_dir = scratch / "cache"
    index_settings = IndexSettings(exclude_globs=list(exclude), watch=False)
    found = FileRules([source], index_settings).walk()
    copy_workspace([f.path for f in found], source, root)
    started = time.perf_counter()
    settings, _ = parse_settings({"cacheDir": str(cache_dir)})
    index = WorkspaceIndex(
        [root], index_settings, cache_dir=workspace_cache_dir(settings, root.resolve())
    )
    try:
        index.scan()
        tasks = generate_tasks(
            index, cross_file=cross_file, in_file=in_file, typing=typing, seed=seed
        )
        files = sorted(index.relative(p) for p in index.files())
    finally:
        index.stop()
    workspace = Workspace(
        source=source,
        root=root.resolve(),
        scratch=scratch,
        cache_dir=cache_dir,
        exclude=list(exclude),
        files=files,
        index_s=time.perf_counter() - started,
    )
    for task in tasks:
        workspace.originals.setdefault(task.path, (workspace.root / task.path).read_bytes())
    return workspace, tasks


def blanked_bytes(original: bytes, task: Task) -> bytes:
    """Return the file's bytes with the task's line cut to its indentation."""
    lines = original.split(b"\n")
    raw = lines[task.line]
    lines[task.line] = raw[: task.indent] + (b"\r" if raw.endswith(b"\r") else b"")
    return b"\n".join(lines)


def siblings(workspace: Workspace, task: Task, count: int, seed: int) -> list[str]:
    """Return ``count`` other files of the task's folder (seeded): the editor's other tabs."""
    folder = task.path.rsplit("/", 1)[0] if "/" in task.path else ""
    same = [
        f
        for f in workspace.files
        if f != task.path and (f.rsplit("/", 1)[0] if "/" in f else "") == folder
    ]
    rng = random.Random(f"{seed}:{task.id}")
    return rng.sample(same, min(count, len(same)))


def clean_env(keep_settings: bool) -> dict[str, str]:
    """Return the server's environment: ours, without LSP_ASSIST_* unless ``keep_settings``."""
    env = dict(os.environ)
    if not keep_settings:
        env = {k: v for k, v in env.items() if not k.startswith("LSP_ASSIST_")}
    return env


# -- server rows ------------------------------------------------------------------------


def _record(row: str, task: Task) -> dict[str, Any]:
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


def _finish_hole(record: dict[str, Any], task: Task, original: str, prompt: str | None) -> None:
    """Add the scores, the definition check and the leak check to a hole task's record."""
    suggestion = str(record.get("suggestion", ""))
    record.update(score(task, suggestion))
    record["parses"] = suggestion_parses(task, original, suggestion)
    if prompt is not None:
        record["prompt"] = prompt
        record["leaked"] = prompt_leaks(prompt, task.target)
        if task.kind == "cross_file":
            record["carries_definition"] = any(n in prompt for n in task.needles)


class ServerRow:
    """One server session: the row's settings, its tasks, its records."""

    def __init__(
        self,
        spec: RowSpec,
        workspace: Workspace,
        model: str,
        *,
        open_files: int,
        seed: int,
        keep_env: bool = False,
        progress: Progress | None = None,
    ) -> None:
        self.spec = spec
        self.workspace = workspace
        self.model = spec.model or model
        self.open_files = open_files
        self.seed = seed
        self.keep_env = keep_env
        self.progress = progress
        self.client: Any = None
        self.records: list[dict[str, Any]] = []
        self.messages: list[str] = []
        self.load_s = 0.0
        self.budget: dict[str, Any] = {}
        self._last_id = ""
        self._tasks: dict[str, Task] = {}

    def options(self) -> dict[str, Any]:
        """Return the initializationOptions of this row."""
        options = {**self.workspace.options(), **self.spec.settings}
        if self.model:
            options["modelPath"] = self.model
        return options

    async def run(self, tasks: Sequence[Task]) -> list[dict[str, Any]]:
        """Start the server, run every task, stop it, join the metrics log."""
        started = time.perf_counter()
        self._tasks = {t.id: t for t in tasks}
        self.client, _ = await start_server(
            f"bench-{self.spec.name}",
            self.workspace.root,
            self.options(),
            env=clean_env(self.keep_env),
            on_message=self.messages.append,
        )
        try:
            status = await wait_loaded(self.client)
            self.budget = dict(status.get("budget", {}))
            self.load_s = time.perf_counter() - started
            for task in tasks:
                if task.kind in HOLE_KINDS:
                    await self._hole(task)
                else:
                    await self._typing(task)
        finally:
            with contextlib.suppress(Exception):
                await stop_server(self.client)
        self._join_metrics()
        return self.records

    def _step(self, count: int = 1) -> None:
        if self.progress is not None:
            self.progress.step(self.spec.name, count)

    async def _ask(self, uri: str, line: int, column: int, *, automatic: bool) -> dict[str, Any]:
        suggestion, client_ms, last = await inline_request(
            self.client, uri, line, column, automatic=automatic
        )
        request_id = str(last.get("request_id", ""))
        if not request_id or request_id == self._last_id:
            # skipped before the engine recorded anything (status still shows the last one)
            return {"suggestion": suggestion, "client_ms": client_ms, "skipped": "no outcome"}
        self._last_id = request_id
        return {
            "suggestion": suggestion,
            "client_ms": round(client_ms, 2),
            "request_id": request_id,
            "skipped": str(last.get("skipped", "")),
        }

    def _write(self, task: Task, data: bytes) -> None:
        (self.workspace.root / task.path).write_bytes(data)

    async def _hole(self, task: Task) -> None:
        original = self.workspace.originals[task.path]
        text = self.workspace.text(task.path)
        others = siblings(self.workspace, task, self.open_files, self.seed)
        uri = (self.workspace.root / task.path).as_uri()
        self._write(task, blanked_bytes(original, task))
        try:
            for rel in others:
                path = self.workspace.root / rel
                body = path.read_text(encoding="utf-8", errors="replace")
                open_document(self.client, path.as_uri(), body, _language(rel))
            blank = blank_line(text, task.line, task.indent)
            open_document(self.client, uri, blank, task.language)
            answer = await self._ask(uri, task.line, task.indent, automatic=False)
        finally:
            self._write(task, original)  # before didClose: the index rereads the disk
        close_document(self.client, uri)
        for rel in others:
            close_document(self.client, (self.workspace.root / rel).as_uri())
        record = {**_record(self.spec.name, task), **answer}
        self.records.append(record)
        self._step()

    async def _typing(self, task: Task) -> None:
        original = self.workspace.originals[task.path]
        text = self.workspace.text(task.path)
        uri = (self.workspace.root / task.path).as_uri()
        target = task.target.rstrip()
        self._write(task, blanked_bytes(original, task))
        try:
            open_document(self.client, uri, blank_line(text, task.line, task.indent), task.language)
            version = 1
            for k in range(task.indent, len(target) + 1):
                if k > task.indent:
                    version += 1
                    self.client.text_document_did_change(
                        line_edit(uri, version, task.line, k - 1, k - 1, target[k - 1])
                    )
                answer = await self._ask(uri, task.line, k, automatic=True)
                record = {**_record(self.spec.name, task), **answer}
                record["column"] = k + 1
                record["first_at_line"] = k == task.indent
                self.records.append(record)
                self._step()
        finally:
            self._write(task, original)
        close_document(self.client, uri)

    def _join_metrics(self) -> None:
        from lsp_assist.telemetry.metrics import METRICS_FILE, read_records

        dirs = sorted({p.parent for p in self.workspace.cache_dir.rglob(METRICS_FILE + "*")})
        by_id = {r.request_id: r for r in read_records(dirs)} if dirs else {}
        tasks = self._tasks
        for record in self.records:
            logged = by_id.get(str(record.get("request_id", "")))
            prompt: str | None = None
            if logged is not None:
                for key in _METRIC_KEYS:
                    value = getattr(logged, key)
                    record[key] = round(value, 2) if isinstance(value, float) else value
                record["layer_tokens"] = dict(logged.layer_tokens)
                record["new_tokens"] = (
                    0 if logged.cache_hit else (logged.prompt_tokens - logged.reused_tokens)
                )
                prompt = logged.prompt
            else:
                record.setdefault("new_tokens", 0)
            task = tasks[record["task"]]
            if task.kind in HOLE_KINDS:
                _finish_hole(record, task, self.workspace.text(task.path), prompt)


def _language(rel: str) -> str:
    from lsp_assist.documents.document import language_for_path

    return language_for_path(rel) or ""


# -- the peer ------------------------------------------------------------------------------


def run_peer(
    spec: RowSpec,
    workspace: Workspace,
    tasks: Sequence[Task],
    model: str,
    *,
    window: int,
    max_tokens: int,
    n_ctx: int,
    threads: int,
    progress: Progress | None = None,
) -> tuple[list[dict[str, Any]], float]:
    """Run the tasks against llama_cpp.server with llm-ls's prompt; return records, load s."""
    from lsp_assist.backends.vocab import Vocabulary
    from lsp_assist.evaluation.peer import PeerServer, window_prompt

    vocab = Vocabulary(model)
    info = vocab.info()
    fim = None
    if info.has_fim:
        ids = (info.fim_prefix_id, info.fim_suffix_id, info.fim_middle_id)
        fim = tuple(vocab.token_text(int(i)) for i in ids if i is not None)
    bos = 1 if info.bos_id is not None else 0
    line_tokens: dict[str, int] = {}

    def count(text: str) -> int:
        if text not in line_tokens:
            line_tokens[text] = len(vocab.tokenize(text))
        return line_tokens[text]

    server = PeerServer(model, n_ctx=n_ctx, threads=threads, max_tokens=max_tokens)
    load_s = server.start()
    records: list[dict[str, Any]] = []

    def ask(task: Task, text: str, line: int, column: int) -> dict[str, Any]:
        started = time.perf_counter()
        prompt = window_prompt(text, line, column, count, window, fim)  # type: ignore[arg-type]
        result = server.complete(prompt, started)
        prompt_tokens = len(vocab.tokenize(prompt, special=True)) + bos
        # llm-ls keeps the first line of a single-line completion
        suggestion = result.text.split("\n", 1)[0]
        new = result.evaluated_tokens if result.evaluated_tokens is not None else prompt_tokens
        return {
            **_record(spec.name, task),
            "suggestion": suggestion,
            "prompt": prompt,
            "prompt_tokens": prompt_tokens,
            "reused_tokens": result.reused_tokens,
            "new_tokens": new,
            "output_tokens": result.output_tokens,
            "ttft_ms": round(result.ttft_ms, 2),
            "latency_ms": round(result.latency_ms, 2),
            "error": result.error,
        }

    try:
        for task in tasks:
            text = workspace.text(task.path)
            if task.kind in HOLE_KINDS:
                blank = blank_line(text, task.line, task.indent)
                record = ask(task, blank, task.line, task.indent)
                prompt = str(record.pop("prompt"))
                _finish_hole(record, task, text, prompt)
                records.append(record)
                if progress is not None:
                    progress.step(spec.name)
                continue
            lines = text.split("\n")
            target = task.target.rstrip()
            for k in range(task.indent, len(target) + 1):
                lines[task.line] = target[:k]
                record = ask(task, "\n".join(lines), task.line, k)
                record.pop("prompt")
                record["column"] = k + 1
                record["first_at_line"] = k == task.indent
                records.append(record)
                if progress is not None:
                    progress.step(spec.name)
    finally:
        server.close()
        vocab.close()
    return records, load_s


# -- rows -------------------------------------------------------------------------------------


def default_rows(settings: Settings, model2: str = "") -> list[RowSpec]:
    """Return the table's rows: baseline, layered, + retrieval and budget, + drafting, ..."""
    from lsp_assist.serving.adaptive_budget import budget_cap

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
            "the default context: related definitions and similar code, the adaptive "
            "budget; drafting off",
        ),
        RowSpec(
            "speculative",
            "+ speculative drafting",
            {"strategy": "layered", "draft": "prompt-lookup", **CAPS},
            "the defaults: the row above with prompt-lookup drafting",
        ),
    ]
    if model2:
        rows.append(
            RowSpec(
                "model2",
                f"+ drafting, {Path(model2).name}",
                {"strategy": "layered", "draft": "prompt-lookup", **CAPS},
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
