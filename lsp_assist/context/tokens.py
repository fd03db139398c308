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
from lsp_assist.context.model import TokenCounter


class CachedCounter:
    """Wraps a :class:`TokenCounter` with an LRU cache of token ids per chunk of text."""

    def __init__(self, tokenizer: TokenCounter, *, max_entries: int = 20_000) -> None:
        self.tokenizer = tokenizer
        self.max_entries = max_entries
        self._plain: OrderedDict[str, tuple[int, ...]] = OrderedDict()
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
            self._plain[text] = ids
            if len(self._plain) > self.max_entries:
                self._plain.popitem(last=False)
        return ids

    def special(self, text: str) -> tuple[int, ...]:
        """Return the token ids of ``text`` with special tokens parsed (format markers)."""
        found = self._special.get(text)
        if found is None:
            found = tuple(self.tokenizer.tokenize(text, special=True))
            self._special[text] = found
        return found

    def count(self, text: str) -> int:
        """Return the number of tokens of ``text``."""
        return len(self.tokens(text))

    def clear(self) -> None:
        """Drop every cached chunk."""
        with self._lock:
            self._plain.clear()
            self._special.clear()
