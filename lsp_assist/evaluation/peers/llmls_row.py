"""The peer row: llm-ls's prompt sent to llama-cpp-python's OpenAI-compatible server.

llm-ls (and lsp-ai's default file store, the same idea) builds its prompt from the
current buffer only: a sliding window of whole lines around the cursor, counted with
the model's tokenizer, up to ``context_window`` tokens; with FIM tokens it takes a line
before and a line after in turn (``<prefix>before<suffix>after<middle>``, 3 tokens kept
for the markers), without them only the lines before the cursor. No index, no other
file. :func:`window_prompt` is that algorithm (llm-ls ``build_prompt``); it holds no
pygls and no model.

:class:`PeerServer` runs ``python -m llama_cpp.server`` on 127.0.0.1 with the same GGUF
and threads, and streams ``/v1/completions`` from it, as a user of those tools on this
model would run it. llama-cpp-python reuses the longest common token prefix with its
previous request; with ``--verbose`` it prints how many tokens it reused, which is
where the peer's KV reuse figure comes from.

:func:`run_peer` is the row itself: every task's prompt built by
:func:`window_prompt` and sent to that server, a hole task once, a typing task once per
keystroke (the line retyped a character at a time), scored as the server rows are.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO, Any

from lsp_assist.errors import BackendError
from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.rows import RowSpec, finish_hole, task_record
from lsp_assist.evaluation.tasks import HOLE_KINDS, Task, blank_line
from lsp_assist.evaluation.workspace import Workspace

DEFAULT_WINDOW = 1024
"""llm.nvim's default ``context_window`` (tokens)."""
PREFIX_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit, remaining (\d+) prompt")


def _lines_with_breaks(text: str) -> list[str]:
    """Split ``text`` into lines that keep their line break (as a rope's line iterator)."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def window_prompt(
    text: str,
    line: int,
    column: int,
    count: Callable[[str], int],
    window: int = DEFAULT_WINDOW,
    fim: tuple[str, str, str] | None = None,
) -> str:
    """Return llm-ls's prompt for a cursor: whole lines around it within ``window`` tokens.

    ``count`` gives a line's tokens; ``fim`` is (prefix, suffix, middle) marker texts for
    a fill-in-the-middle model, None for prefix only.
    """
    lines = _lines_with_breaks(text)
    line = max(0, min(line, len(lines) - 1))
    current = lines[line]
    column = max(0, min(column, len(current.rstrip("\n"))))
    before_lines = [current[:column], *reversed(lines[:line])]
    after_lines = [current[column:], *lines[line + 1 :]] if fim is not None else []
    remaining = window - 3 if fim is not None else window
    before: list[str] = []
    after: list[str] = []

    def take(piece: str, into: list[str]) -> bool:
        nonlocal remaining
        tokens = count(piece)
        if tokens > remaining:
            return False
        remaining -= tokens
        into.append(piece)
        return True

    for i in range(max(len(before_lines), len(after_lines))):
        if i < len(before_lines) and not take(before_lines[i], before):
            break
        if i < len(after_lines) and not take(after_lines[i], after):
            break
    if fim is None:
        return "".join(reversed(before))
    prefix, suffix, middle = fim
    return f"{prefix}{''.join(reversed(before))}{suffix}{''.join(after)}{middle}"


@dataclass(slots=True)
class PeerResult:
    """One completion from the peer server and what it cost."""

    text: str = ""
    ttft_ms: float = 0.0
    """From the request's start (the prompt build included) to the first streamed text."""
    latency_ms: float = 0.0
    """From the request's start to the end of the stream."""
    output_tokens: int = 0
    reused_tokens: int = 0
    """Prompt tokens llama-cpp-python took from its KV cache (its verbose log)."""
    evaluated_tokens: int | None = None
    """Prompt tokens it evaluated (its verbose log; None when it printed nothing)."""
    error: str = ""


def free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PeerServer:
    """``python -m llama_cpp.server`` in a subprocess on 127.0.0.1, and a client for it."""

    def __init__(self, model: str, *, n_ctx: int, threads: int, max_tokens: int) -> None:
        self.model = model
        self.n_ctx = n_ctx
        self.threads = threads
        self.max_tokens = max_tokens
        self.port = 0
        self._process: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[str] = queue.Queue()
        self._tail: list[str] = []

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 600.0) -> float:
        """Start the server and wait until it answers; return the seconds that took."""
        import httpx

        started = time.perf_counter()
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            self.model,
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.threads),
            "--n_threads_batch",
            str(self.threads),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--verbose",
            "True",
        ]
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        except OSError as exc:
            raise BackendError(f"could not start llama_cpp.server: {exc}") from exc
        assert self._process.stderr is not None
        threading.Thread(target=self._read, args=(self._process.stderr,), daemon=True).start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                tail = "".join(self._tail[-15:])
                raise BackendError(f"llama_cpp.server exited ({self._process.returncode}):\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/v1/models", timeout=2.0).status_code == 200:
                    return time.perf_counter() - started
            time.sleep(0.25)
        self.close()
        raise BackendError(f"llama_cpp.server did not answer within {timeout:.0f} s")

    def _read(self, stream: IO[bytes]) -> None:
        for raw in iter(stream.readline, b""):
            line = raw.decode("utf-8", "replace")
            self._lines.put(line)
            self._tail = [*self._tail[-40:], line]

    def drain_log(self) -> list[str]:
        """Return the server's output lines since the last call."""
        out: list[str] = []
        while True:
            try:
                out.append(self._lines.get_nowait())
            except queue.Empty:
                return out

    def complete(self, prompt: str, started: float) -> PeerResult:
        """Stream one greedy completion of ``prompt``; times count from ``started``."""
        import httpx

        self.drain_log()
        result = PeerResult()
        body: dict[str, Any] = {
            "prompt": prompt,
            "max_tokens": self.max_tokens,
            "temperature": 0.0,
            "stream": True,
        }
        pieces: list[str] = []
        try:
            with httpx.stream(
                "POST", f"{self.url}/v1/completions", json=body, timeout=600.0
            ) as response:
                response.raise_for_status()
                for line in response.iter_lines():
                    if not line.startswith("data: ") or line == "data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    text = str(chunk["choices"][0].get("text") or "")
                    if not text:
                        continue
                    if not pieces:
                        result.ttft_ms = (time.perf_counter() - started) * 1000
                    pieces.append(text)
        except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
            result.error = f"peer server: {exc}"
        result.latency_ms = (time.perf_counter() - started) * 1000
        result.text = "".join(pieces)
        result.output_tokens = len(pieces)
        time.sleep(0.02)  # the log line of this request is printed before its first token
        for line in self.drain_log():
            match = PREFIX_HIT.search(line)
            if match:
                result.reused_tokens = int(match.group(1))
                result.evaluated_tokens = int(match.group(2))
        return result

    def close(self) -> None:
        """Stop the server process."""
        process = self._process
        self._process = None
        if process is None:
            return
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


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
    from lsp_assist.backends import Vocabulary

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
            **task_record(spec.name, task),
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
                finish_hole(record, task, text, prompt)
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
