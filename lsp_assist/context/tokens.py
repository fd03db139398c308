"""Token counting for the context engine: a per-chunk cache and a model-free tokenizer.

Prompts are assembled from chunks (a definition, a summary line, the editing zone
before the cursor line, the typed part of the cursor line ...). Each chunk is
tokenized on its own with the model's vocabulary and the prompt's token list is the
concatenation of its chunks' tokens, so the budget is counted exactly and the tokens
of unchanged chunks are byte-identical from one keystroke to the next.

The model's own tokenizer is a backend or a vocabulary-only load
(:class:`lsp_assist.backends.vocab.Vocabulary`): this package never imports llama_cpp.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import OrderedDict

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


class ApproxTokenizer:
    """A model-free tokenizer (words, spaces and punctuation as tokens) for tests and fallbacks.

    Token ids are stable CRC32 hashes; counts are close to a code BPE's (~4 chars/token).
    Special tokens given to the constructor are parsed when ``special`` is true.
    """

    _PIECE = re.compile(r"[A-Za-z_]{1,6}|\d{1,3}|\s{1,4}|[^\sA-Za-z_\d]")

    def __init__(self, special_tokens: dict[str, int] | None = None) -> None:
        self.special_tokens = dict(special_tokens or {})
        if self.special_tokens:
            alternatives = sorted(self.special_tokens, key=len, reverse=True)
            self._split: re.Pattern[str] | None = re.compile(
                "(" + "|".join(re.escape(s) for s in alternatives) + ")"
            )
        else:
            self._split = None

    def _plain(self, text: str) -> list[int]:
        return [1000 + zlib.crc32(p.encode()) % 50_000 for p in self._PIECE.findall(text)]

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids (no BOS)."""
        if not special or self._split is None:
            return self._plain(text)
        out: list[int] = []
        for part in self._split.split(text):
            if part in self.special_tokens:
                out.append(self.special_tokens[part])
            elif part:
                out.extend(self._plain(part))
        return out
