"""Token counting for the context engine: a per-chunk cache and a vocabulary-only tokenizer.

Prompts are assembled from chunks (a definition, a summary line, the editing zone
before the cursor line, the typed part of the cursor line ...). Each chunk is
tokenized on its own with the model's vocabulary and the prompt's token list is the
concatenation of its chunks' tokens, so the budget is counted exactly and the tokens
of unchanged chunks are byte-identical from one keystroke to the next.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sys
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsp_assist.backends.base import ModelInfo
from lsp_assist.context.model import TokenCounter
from lsp_assist.errors import ModelLoadError

log = logging.getLogger(__name__)

# Special token texts worth knowing about (FIM, repository-level, chat markers).
KNOWN_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<|file_separator|>",
    "<|endoftext|>",
    "<fim_prefix>",
    "<fim_suffix>",
    "<fim_middle>",
    "<fim_pad>",
    "<repo_name>",
    "<reponame>",
    "<file_sep>",
    "<filename>",
    "<gh_stars>",
    "▁<PRE>",
    "▁<SUF>",
    "▁<MID>",
    "▁<EOT>",
    "<PRE>",
    "<SUF>",
    "<MID>",
    "<EOT>",
    "<｜fim▁begin｜>",
    "<｜fim▁hole｜>",
    "<｜fim▁end｜>",
    "[PREFIX]",
    "[SUFFIX]",
    "[MIDDLE]",
    "<|im_start|>",
    "<|im_end|>",
    "<bos>",
    "<eos>",
    "<s>",
    "</s>",
    "<start_of_turn>",
    "<end_of_turn>",
)


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """Silence llama.cpp's C-level stderr chatter (a context warning) during a load."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        yield
        return
    sys.stderr.flush()
    saved = os.dup(fd)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), fd)
            yield
    finally:
        os.dup2(saved, fd)
        os.close(saved)


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


class VocabTokenizer:
    """The model's own tokenizer from a vocabulary-only load of a GGUF (no weights)."""

    def __init__(self, path: str | Path) -> None:
        try:
            import llama_cpp
        except ImportError as exc:  # pragma: no cover - depends on the build
            raise ModelLoadError("llama-cpp-python is not installed") from exc
        self.path = str(path)
        if not Path(self.path).is_file():
            raise ModelLoadError(f"{self.path}: no such model file")
        try:
            with _quiet_stderr():
                self.llm: Any = llama_cpp.Llama(
                    model_path=self.path, vocab_only=True, verbose=False
                )
        except (ValueError, RuntimeError, OSError) as exc:
            raise ModelLoadError(f"{self.path}: cannot load the vocabulary: {exc}") from exc
        self._llama_cpp = llama_cpp
        self._info: ModelInfo | None = None
        self._vocab: Any = llama_cpp.llama_model_get_vocab(self.llm.model)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids (no BOS).

        Calls ``llama_tokenize`` with an output buffer sized to the text (a token covers
        at least one byte): ``Llama.tokenize`` allocates and zeroes one the size of the
        model's training context (32k tokens for Gemma 3) at every call.
        """
        if not text:
            return []
        data = text.encode("utf-8")
        lc = self._llama_cpp
        size = len(data) + 8
        buf = (lc.llama_token * size)()
        n = int(lc.llama_tokenize(self._vocab, data, len(data), buf, size, False, special))
        if n < 0:  # more tokens than bytes: not expected, but llama.cpp says how many
            size = -n
            buf = (lc.llama_token * size)()
            n = int(lc.llama_tokenize(self._vocab, data, len(data), buf, size, False, special))
            if n < 0:
                raise ModelLoadError(f"{self.path}: tokenization failed ({n})")
        return list(buf[:n])

    def detokenize(self, tokens: list[int]) -> str:
        """Return the text of ``tokens``."""
        data: bytes = self.llm.detokenize(tokens, special=True)
        return data.decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        """Return the vocabulary text of one token id."""
        lc = self._llama_cpp
        vocab = lc.llama_model_get_vocab(self.llm.model)
        raw = lc.llama_vocab_get_text(vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    def info(self) -> ModelInfo:
        """Return the model metadata the engine needs (FIM ids, special tokens, BOS)."""
        if self._info is not None:
            return self._info
        lc = self._llama_cpp
        llm = self.llm
        vocab = lc.llama_model_get_vocab(llm.model)

        def opt(value: int) -> int | None:
            return int(value) if value is not None and int(value) >= 0 else None

        specials: dict[str, int] = {}
        for text in KNOWN_SPECIAL_TOKENS:
            ids = self.tokenize(text, special=True)
            if len(ids) == 1 and self.token_text(ids[0]) == text:
                plain = self.tokenize(text, special=False)
                if plain != ids:
                    specials[text] = ids[0]
        meta: dict[str, str] = dict(getattr(llm, "metadata", {}) or {})
        arch = meta.get("general.architecture", "")
        ctx_train = 0
        try:
            ctx_train = int(meta.get(f"{arch}.context_length", "0") or 0)
        except ValueError:
            ctx_train = 0
        bos = opt(lc.llama_vocab_bos(vocab))
        self._info = ModelInfo(
            path=self.path,
            name=meta.get("general.name", Path(self.path).stem),
            architecture=arch,
            vocab_size=int(lc.llama_vocab_n_tokens(vocab)),
            context_length_train=ctx_train,
            bos_id=bos,
            eos_id=opt(lc.llama_vocab_eos(vocab)),
            fim_prefix_id=opt(lc.llama_vocab_fim_pre(vocab)),
            fim_suffix_id=opt(lc.llama_vocab_fim_suf(vocab)),
            fim_middle_id=opt(lc.llama_vocab_fim_mid(vocab)),
            special_tokens=specials,
        )
        return self._info
