"""llm-ls's completion client (llm.nvim on llm-ls) against llama.cpp's ``llama-server``.

The acceptance replay's llm-ls peer (``suggester.py``): what a user of Hugging Face's
llm.nvim with its language server llm-ls gets on the same model, keys and pace, with
llm-ls's ``llamacpp`` backend talking to the same ``llama-server`` the llama.vim row
starts (``peers/llamavim/server.py``, the flags of llama.cpp's FIM presets). Written from
llm.nvim **ce69731** (``lua/llm/completion.lua``, ``lua/llm/config.lua``) and llm-ls
**1c52b94** (``crates/llm-ls/src/main.rs``, ``backend.rs``; 0.5.3 and 9 commits, the
version llm.nvim pins is 0.5.3), read, not copied.

Defaults a user has (llm.nvim's ``default_config``; ``backend = "llamacpp"`` has no default
request body there, so llm-ls sends only ``prompt``, ``model`` and ``stream``):

==================  ====================================  ===============================
constant            llm.nvim / llm-ls                     value
==================  ====================================  ===============================
``DEBOUNCE_MS``     ``debounce_ms``                       150
``CONTEXT_WINDOW``  ``context_window`` (no tokenizer)     1024 **bytes**
(none)              sampling: not sent                    llama-server's defaults
(none)              ``max_tokens``: not sent              until the model ends (n_predict -1)
``STREAM``          ``build_body``                        false
==================  ====================================  ===============================

Without a ``tokenizer`` (llm.nvim's default) llm-ls's ``build_prompt`` counts each line's
``String::len()``: bytes, so the window holds about a third as many tokens as 1024
tokens would. The FIM markers are the model's own (a user of llm.nvim on Qwen2.5-Coder
sets ``fim`` to them). The server samples with its defaults; a fixed ``seed`` (the
request's and the server's ``--seed``) makes a replay repeatable: that is the one thing
added.

What it does, event by event:

- **A key in insert mode** (``CursorMovedI`` → ``M.schedule``): ``M.reject`` clears the
  suggestion shown, stops the debounce timer and cancels the request out
  (``client.cancel_request``: ``$/cancelRequest``; llm-ls, on tower-lsp, drops the
  request's future, and with it the HTTP request: the connection closes). Then a new
  timer: ``debounce_ms`` later, still in insert mode, ``llm-ls/getCompletions``.
- **llm-ls** (``get_completions``): ``should_complete`` decides the completion type from
  the tree-sitter node at the cursor (:func:`completion_type`): *empty* (no request; the
  character right of the cursor is not whitespace), *single line* (the answer cut at its
  first line break) or *multi line*. The prompt is ``build_prompt``
  (:func:`~lsp_assist.evaluation.peers.llmls_row.window_prompt`: whole lines around the cursor,
  one above and one below in turn, within ``context_window`` - 3 bytes, in
  ``<prefix>above<suffix>below<middle>``), POSTed to ``/v1/completions`` (``build_url``
  of the ``llamacpp`` backend) with ``stream`` false.
- **The response** (``M.lsp_suggest``'s callback) is drawn at the position the request
  was for, line by line; Tab inserts it at the cursor (``utils.insert_at``: nothing right
  of the cursor is replaced). A cancelled request's response never reaches the client.
- **The server** (``llama-server``, one slot): it checks once a second whether a
  request's connection is still open and cancels the task when it is not, so a
  cancelled request holds the model for up to a second.

Simplified for a replay (no Vim): no UI, no accept/reject telemetry requests (llm-ls
only logs them), ``rest`` does nothing (llm.nvim has no cursor-hold handler), positions
are characters (llm-ls hands characters to tree-sitter as its columns; equal on ASCII),
HTTP over the standard library in a thread per request.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsp_assist.evaluation.suggester import Answer, AnswerCallback

if TYPE_CHECKING:
    from lsp_assist.evaluation.peers.llamavim.server import LlamaServer

LLM_NVIM_COMMIT = "ce69731"
"""The llm.nvim commit this follows (github.com/huggingface/llm.nvim)."""
LLM_LS_COMMIT = "1c52b94"
"""The llm-ls commit this follows (github.com/huggingface/llm-ls)."""
DEBOUNCE_MS = 150
"""``debounce_ms``: the request goes out this long after the last key."""
CONTEXT_WINDOW = 1024
"""``context_window``: the prompt's size, in bytes without a ``tokenizer`` (the default),
the three FIM markers counted as one each."""
STREAM = False
"""llm-ls's ``build_body`` for the ``llamacpp`` backend (as for ``openai`` and ``ollama``)."""
HTTP_TIMEOUT_S = 600.0
"""A request's socket timeout (a queued request waits for the ones before it)."""
START_TIMEOUT_S = 600.0
"""How long ``llama-server`` may take to load the model and answer ``/health``."""

EMPTY, SINGLE_LINE, MULTI_LINE = "empty", "single_line", "multi_line"


def utf8_bytes(line: str) -> int:
    """A line's size as llm-ls counts it without a tokenizer (Rust's ``String::len()``)."""
    return len(line.encode("utf-8"))


def _line_starts(text: str) -> list[int]:
    starts = [0]
    starts += [i + 1 for i, c in enumerate(text) if c == "\n"]
    return starts


def completion_type(text: str, tree: Any, row: int, column: int) -> str:
    """Return llm-ls's ``should_complete`` for the cursor: empty, single_line or multi_line.

    ``tree`` is the document's tree-sitter tree (None for a language without a grammar).
    """
    if not text:
        return EMPTY
    starts = _line_starts(text)

    def position_idx(r: int, c: int) -> int:
        # get_position_idx: the line's first character + min(col, the line's length - 1)
        r_line = min(r, len(starts) - 1)
        end = starts[r_line + 1] if r_line + 1 < len(starts) else len(text)
        return starts[min(r, len(starts) - 1)] + min(c, max(0, end - starts[r_line] - 1))

    if tree is not None:
        root = tree.root_node
        node = root.descendant_for_point_range((row, column), (row, column + 1))
        if node is not None:
            if node == root:
                return MULTI_LINE
            start = position_idx(node.start_point[0], node.start_point[1])
            end = max(0, position_idx(node.end_point[0], node.end_point[1]) - 1)
            last = len(text) - 1
            if not text[min(start, last)].isspace():
                start += 1
            if not text[min(end, last)].isspace():
                end -= 1
            if start >= end:
                return SINGLE_LINE
            if not text[start:end].strip():
                return MULTI_LINE
    index = starts[min(row, len(starts) - 1)] + column
    next_char = text[index] if index < len(text) else "\n"
    return SINGLE_LINE if next_char.isspace() else EMPTY


@dataclass
class _Request:
    """One ``getCompletions`` out: its HTTP connection, closed when cancelled."""

    version: int
    kind: str
    sent: float
    cancelled: bool = False
    conn: http.client.HTTPConnection | None = field(default=None, repr=False)

    def cancel(self) -> None:
        """Close the connection (llm-ls dropping the request's future)."""
        self.cancelled = True
        conn = self.conn
        if conn is not None and conn.sock is not None:
            with contextlib.suppress(OSError):
                conn.sock.shutdown(socket.SHUT_RDWR)


class LlmLsSuggester:
    """llm.nvim and llm-ls (:class:`~lsp_assist.evaluation.suggester.Suggester`) on a
    ``llama-server`` it starts. State lives on the event loop of :meth:`start`; HTTP
    runs in threads and comes back with ``call_soon_threadsafe``."""

    label = "llm-ls"

    def __init__(self, *, model_path: Path, threads: int, seed: int) -> None:
        self.model_path = model_path
        self.threads = threads
        self.seed = seed
        self.debounce_s = DEBOUNCE_MS / 1000
        self.window = CONTEXT_WINDOW
        self.max_tokens: int | None = None
        """A cap on each answer's tokens; None (a user's llm.nvim) sends none."""
        self.url = ""
        self.stats: dict[str, int] = {
            "keys": 0,
            "requests": 0,
            "cancelled": 0,
            "skipped_empty": 0,
            "responses": 0,
            "empty_answers": 0,
            "failed": 0,
            "shown": 0,
            "reused_tokens": 0,
            "evaluated_tokens": 0,
            "predicted_tokens": 0,
        }
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: LlamaServer | None = None
        self._fim: tuple[str, str, str] | None = None
        self._vocab: Any = None
        self._timer: asyncio.TimerHandle | None = None
        self._request: _Request | None = None
        self._threads: set[threading.Thread] = set()
        self._stopped = False

    # --- the Suggester protocol -----------------------------------------------------------

    async def start(self, workspace: Path) -> None:
        """Load the tokenizer and start ``llama_cpp.server``; return when it answers."""
        self._loop = asyncio.get_running_loop()
        self._stopped = False
        await asyncio.to_thread(self._launch)

    async def open(self, path: Path, text: str, version: int) -> None:
        """Nothing to do: each request carries its buffer's text (``key``)."""

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        await asyncio.sleep(seconds)  # llm.nvim does nothing while the cursor rests

    def key(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        """``CursorMovedI``: reject what is shown and out, then ask after the debounce."""
        self.stats["keys"] += 1
        self._reject()
        if self._loop is None or self._stopped:
            return
        self._timer = self._loop.call_later(
            self.debounce_s, self._suggest, path, text, line, column, version, on_answer
        )

    async def close_file(self, path: Path, text: str) -> None:
        self._reject()

    async def stop(self) -> None:
        """Cancel what is out, stop the server, wait for the requests' threads."""
        self._stopped = True
        self._reject()
        server, self._server = self._server, None
        if server is not None:
            await server.stop()
        for thread in list(self._threads):
            await asyncio.to_thread(thread.join, 5)
        vocab, self._vocab = self._vocab, None
        if vocab is not None:
            vocab.close()

    # --- llm.nvim and llm-ls --------------------------------------------------------------

    def _launch(self) -> None:
        from lsp_assist.backends import Vocabulary
        from lsp_assist.evaluation.peers.llamavim.server import PRESET_CTX, LlamaServer

        vocab = Vocabulary(str(self.model_path))
        self._vocab = vocab
        info = vocab.info()
        if info.has_fim:
            ids = (info.fim_prefix_id, info.fim_suffix_id, info.fim_middle_id)
            marks = tuple(vocab.token_text(int(i)) for i in ids if i is not None)
            if len(marks) == 3:
                self._fim = (marks[0], marks[1], marks[2])
        server = LlamaServer()
        server.start(
            self.model_path,
            threads=self.threads,
            seed=self.seed,
            ctx_size=PRESET_CTX,
            timeout_s=START_TIMEOUT_S,
            log_path=None,
        )
        self._server = server
        self.url = server.url

    def _reject(self) -> None:
        """``M.reject``: stop the debounce timer and cancel the request out."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        request, self._request = self._request, None
        if request is not None:
            self.stats["cancelled"] += 1
            request.cancel()

    def _suggest(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        """``M.lsp_suggest`` and llm-ls's ``get_completions``."""
        from lsp_assist.documents import language_for_path

        self._timer = None
        if self._stopped:
            return
        tree = None
        language = language_for_path(path)
        if language is not None:
            from lsp_assist.errors import IndexError_
            from lsp_assist.index import parse

            with contextlib.suppress(IndexError_):
                tree = parse(language, text.encode("utf-8"))
        kind = completion_type(text, tree, line, column)
        if kind == EMPTY:
            self.stats["skipped_empty"] += 1
            return
        from lsp_assist.evaluation.peers.llmls_row import window_prompt

        prompt = window_prompt(text, line, column, utf8_bytes, self.window, self._fim)
        request = _Request(version=version, kind=kind, sent=time.perf_counter())
        self._request = request
        self.stats["requests"] += 1
        self._post(self._body(prompt), request, lambda raw: self._done(request, raw, on_answer))

    def _body(self, prompt: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "prompt": prompt,
            "model": str(self.model_path),
            "stream": STREAM,
            "seed": self.seed,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def _done(self, request: _Request, raw: str | None, on_answer: AnswerCallback) -> None:
        """The response (on the loop): drawn unless its request was cancelled."""
        if self._request is request:
            self._request = None
        if request.cancelled or self._stopped:
            return
        if raw is None:
            self.stats["failed"] += 1
            return
        try:
            body = json.loads(raw)
            text = str(body["choices"][0]["text"])
        except (ValueError, KeyError, IndexError, TypeError):
            self.stats["failed"] += 1
            return
        self._count_timings(body.get("timings"))
        self.stats["responses"] += 1
        if request.kind == SINGLE_LINE:
            text = text.split("\n", 1)[0]
        if not text:
            self.stats["empty_answers"] += 1
            return
        self.stats["shown"] += 1
        on_answer(Answer(version=request.version, text=text, arrived=time.perf_counter()))

    def _count_timings(self, timings: Any) -> None:
        """Add a response's ``timings`` (prompt tokens from the KV cache and evaluated,
        tokens generated) to the stats; a cancelled request's are never read."""
        if not isinstance(timings, dict):
            return
        for stat, key in (
            ("reused_tokens", "cache_n"),
            ("evaluated_tokens", "prompt_n"),
            ("predicted_tokens", "predicted_n"),
        ):
            value = timings.get(key)
            if isinstance(value, int):
                self.stats[stat] += value

    def _post(
        self, body: dict[str, Any], request: _Request, done: Callable[[str | None], None]
    ) -> None:
        """POST ``body`` to ``/v1/completions`` in a thread; ``done(raw or None)`` on the loop."""
        payload = json.dumps(body).encode("utf-8")
        host, port = self.url.removeprefix("http://").rsplit(":", 1)
        loop = self._loop

        def run() -> None:
            raw: str | None = None
            conn = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT_S)
            request.conn = conn
            try:
                if not request.cancelled:
                    conn.request(
                        "POST",
                        "/v1/completions",
                        body=payload,
                        headers={"Content-Type": "application/json"},
                    )
                    if request.cancelled:  # cancelled while connecting: close it now
                        request.cancel()
                    response = conn.getresponse()
                    data = response.read().decode("utf-8", errors="replace")
                    raw = data if response.status == 200 else None
            except (OSError, http.client.HTTPException, ValueError):
                raw = None
            finally:
                conn.close()
                self._threads.discard(threading.current_thread())
            if loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(done, raw)

        thread = threading.Thread(target=run, name="llmls-http", daemon=True)
        self._threads.add(thread)
        thread.start()
