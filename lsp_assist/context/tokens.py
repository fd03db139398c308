"""Token counting for the context engine: a per-chunk cache of token ids.

Prompts are assembled from chunks (a definition, a summary line, the editing zone
before the cursor line, the typed part of the cursor line ...). Each chunk is
tokenized on its own with the model's vocabulary and the prompt's token list is the
concatenation of its chunks' tokens, so the budget is counted exactly and the tokens
of unchanged chunks are byte-identical from one keystroke to the next.

The model's own tokenizer is a backend or a vocabulary-only load
(:class:`lsp_assist.backends.vocab.Vocabulary`): this package never imports llama_cpp.
The model-free one is :class:`lsp_assist.backends.approx_tokens.ApproxTokenizer`
(part of the backend contract), re-exported here for older callers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from lsp_assist.backends.base import ApproxTokenizer as ApproxTokenizer
from lsp_assist.config import Bounded
from lsp_assist.context.model import TokenCounter

TOKEN_CACHE_CHUNKS = 20_000
"""Chunks whose token ids :class:`CachedCounter` keeps (least recently used dropped)."""
TOKEN_CACHE_TOKENS = 500_000
"""Token ids the chunks it keeps may hold in all: ~44 bytes each (an int object and its
slot, and the chunk's text), ~22 MB. Without it 20,000 editing-zone chunks of a long day
(a new one at each line) could hold 20 million."""
SPECIAL_CHUNKS = 64
"""Texts with special tokens (the format's markers) whose ids are kept (emptied when full)."""


class CachedCounter:
    """Wraps a :class:`TokenCounter` with an LRU cache of token ids per chunk of text."""

    def __init__(
        self,
        tokenizer: TokenCounter,
        *,
        max_entries: int | None = None,
        max_tokens: int | None = None,
    ) -> None:
        self.tokenizer = tokenizer
        self.max_entries = TOKEN_CACHE_CHUNKS if max_entries is None else max_entries
        self.max_tokens = TOKEN_CACHE_TOKENS if max_tokens is None else max_tokens
        self._plain: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._plain_tokens = 0
        self._special: dict[str, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def tokens(self, text: str) -> tuple[int, ...]:
        """Return the token ids of ``text`` (special tokens not parsed), cached."""
        if not text:
            return ()
        with self._lock:
            found = self._plain.get(text)
            if found is not None:
                self._plain.move_to_end(text)
                self.hits += 1
                return found
        ids = tuple(self.tokenizer.tokenize(text, special=False))
        with self._lock:
            self.misses += 1
            if len(ids) > self.max_tokens:
                return ids
            old = self._plain.pop(text, None)
            if old is not None:
                self._plain_tokens -= len(old)
            self._plain[text] = ids
            self._plain_tokens += len(ids)
            while len(self._plain) > self.max_entries or self._plain_tokens > self.max_tokens:
                _, dropped = self._plain.popitem(last=False)
                self._plain_tokens -= len(dropped)
        return ids

    def special(self, text: str) -> tuple[int, ...]:
        """Return the token ids of ``text`` with special tokens parsed (format markers)."""
        found = self._special.get(text)
        if found is None:
            found = tuple(self.tokenizer.tokenize(text, special=True))
            if len(self._special) >= SPECIAL_CHUNKS:
                self._special.clear()
            self._special[text] = found
        return found

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        return len(self.tokens(text))

    def clear(self) -> None:
        """Drop every cached chunk."""
        with self._lock:
            self._plain.clear()
            self._plain_tokens = 0
            self._special.clear()

    def bounds(self) -> dict[str, Bounded]:
        """The chunks kept and their token ids against their bounds."""
        with self._lock:
            chunks, ids = len(self._plain), self._plain_tokens
        where = "context/tokens.py {}"
        return {
            "tokens.chunks": Bounded(
                chunks, self.max_entries, "chunks", where.format("TOKEN_CACHE_CHUNKS")
            ),
            "tokens.ids": Bounded(
                ids, self.max_tokens, "tokens", where.format("TOKEN_CACHE_TOKENS")
            ),
            "tokens.special": Bounded(
                len(self._special), SPECIAL_CHUNKS, "chunks", where.format("SPECIAL_CHUNKS")
            ),
        }
