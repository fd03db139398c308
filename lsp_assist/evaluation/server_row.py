"""A row through the real server: one ``lsp-assist serve`` session over stdio.

:class:`ServerRow` starts the server with the row's settings as
initializationOptions (the code path an editor drives) and replays every task. A hole
task blanks its line on disk, opens ``open_files`` other files of the same folder and
the blanked buffer (didOpen, so the index holds the buffer), asks for an inline
completion at the indentation, restores the file and closes the buffers. A typing task
opens the blanked line and retypes it, one didChange and one automatic inline request
per keystroke, waiting for each answer. The server logs every request with
``logPrompts`` on; its metrics log, joined by request id, gives each record its prompt,
token counts and the parts of its time from arrival.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Sequence
from typing import Any

from lsp_assist.evaluation.client import (
    close_document,
    inline_request,
    line_edit,
    open_document,
    start_server,
    stop_server,
    wait_loaded,
)
from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.rows import RowSpec, finish_hole, task_record
from lsp_assist.evaluation.tasks import HOLE_KINDS, Task, blank_line
from lsp_assist.evaluation.workspace import Workspace, blanked_bytes, siblings

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
"""The metrics log's fields copied into each record (joined by request id)."""


def clean_env(keep_settings: bool) -> dict[str, str]:
    """Return the server's environment: ours, without LSP_ASSIST_* unless ``keep_settings``."""
    env = dict(os.environ)
    if not keep_settings:
        env = {k: v for k, v in env.items() if not k.startswith("LSP_ASSIST_")}
    return env


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
        record = {**task_record(self.spec.name, task), **answer}
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
                record = {**task_record(self.spec.name, task), **answer}
                record["column"] = k + 1
                record["first_at_line"] = k == task.indent
                self.records.append(record)
                self._step()
        finally:
            self._write(task, original)
        close_document(self.client, uri)

    def _join_metrics(self) -> None:
        from lsp_assist.telemetry import METRICS_FILE, read_records

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
                finish_hole(record, task, self.workspace.text(task.path), prompt)


def _language(rel: str) -> str:
    from lsp_assist.documents import language_for_path

    return language_for_path(rel) or ""
