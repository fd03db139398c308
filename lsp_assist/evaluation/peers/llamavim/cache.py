"""llama.vim's result cache (``g:cache_data``): raw responses by context hash, LRU, and
``s:fim_try_hint``'s lookup, which also finds an answer the user has typed through and
shows its rest. The keys are ``context``'s hashes; the client is ``client.py``.
"""

from __future__ import annotations

import json
from collections import OrderedDict

from lsp_assist.evaluation.peers.llamavim.context import LocalContext, context_hash

MAX_CACHE_KEYS = 250
"""``max_cache_keys``: entries of the result cache (LRU)."""
CACHE_WALK_BACK = 128
"""``s:fim_try_hint``: characters to walk back for a cached answer typed through."""


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
        cached = cache.get(context_hash(pm[: -(i + 1)], "", ctx.suffix))
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
