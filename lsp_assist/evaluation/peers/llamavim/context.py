"""llama.vim's prompt (``s:fim_ctx_local`` and the request bodies of ``llama#fim`` and
``s:ring_update``): the lines around the cursor as sent and as hashed, the keys a response
is cached under, and the ``/infill`` bodies. Pure functions; the client is
``client.py``, whose docstring maps each default here to its llama.vim name.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
TOP_K = 40
TOP_P = 0.90
SAMPLERS: tuple[str, ...] = ("top_k", "top_p", "infill")
ID_SLOT = 0
HASH_TRIMS = 3
"""``llama#fim``: more hashes with the first 1..3 prefix lines dropped."""
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


_HASH_SEP = "\u00ce"  # 'Î', llama.vim's separator between prefix+middle and suffix
_BLANK = re.compile(r"[ \t]*")  # Vim's '^\s*$' (\s is space and tab)
_LEAD = re.compile(r"[ \t]*")
_FIRST_LINE = re.compile(r"^[^\n]*\n")


def buffer_lines(text: str, keep_last_empty: bool = False) -> list[str]:
    """The buffer's lines as Vim holds them: a final line break ends the last line.

    ``keep_last_empty`` keeps the empty line after a final line break (the cursor is on it).
    """
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "" and not keep_last_empty:
        lines.pop()
    return lines


def getline(lines: Sequence[str], index: int) -> str:
    """Vim's ``getline`` with a 0-based index: "" outside the buffer."""
    return lines[index] if 0 <= index < len(lines) else ""


def is_blank(text: str) -> bool:
    """Vim's ``text =~ '^\\s*$'``: only spaces and tabs, or nothing."""
    return _BLANK.fullmatch(text) is not None


def leading(text: str) -> int:
    """The length of ``text``'s leading spaces and tabs (its indentation, a tab counting 1)."""
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
        line_cur = getline(lines, y)
        line_cur_prefix = line_cur[:x]
        line_cur_suffix = line_cur[x:]
        lines_prefix = list(lines[max(0, y - n_prefix) : max(0, y)])
        lines_suffix = list(lines[y + 1 : suffix_end])
        if is_blank(line_cur):
            # a whitespace-only line is sent as empty: the model writes the indentation
            indent = 0
            line_cur_prefix = ""
            line_cur_suffix = ""
        else:
            indent = leading(line_cur)
    else:
        line_cur = getline(lines, y) + prev[0] if len(prev) == 1 else prev[-1]
        line_cur_prefix = line_cur
        line_cur_suffix = ""
        lines_prefix = list(lines[max(0, y - n_prefix + len(prev) - 1) : max(0, y)])
        if len(prev) > 1:
            lines_prefix.append(getline(lines, y) + prev[0])
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
