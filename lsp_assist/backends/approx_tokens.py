"""The model-free tokenizer: counts close to a code BPE's, and reversible.

One implementation for every place that has no vocabulary: the remote backend's
``estimate`` mode (a server without tokenizer endpoints) and the tests of the context
engine. Text is cut into words of up to 6 letters, numbers of up to 3 digits, runs of
up to 4 whitespace characters and single other characters (every character falls in one
class, so the pieces joined give the text back). Each piece's UTF-8 bytes plus a marker
byte are read as one little-endian integer: the id encodes its piece, so
:meth:`ApproxTokenizer.detokenize` is exact, ids are stable across runs, and every
plain id is at least 256 (clear of the small ids of special tokens).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

_MARKER = b"\x01"
"""Appended to a piece's bytes so that its leading zero bytes survive the encoding."""


class ApproxTokenizer:
    """A tokenizer without a model (see the module doc); ``special_tokens`` by text.

    Special tokens given to the constructor are parsed when ``special`` is true and
    written back by :meth:`detokenize`.
    """

    _PIECE = re.compile(r"[A-Za-z_]{1,6}|\d{1,3}|\s{1,4}|[^\sA-Za-z_\d]")

    def __init__(self, special_tokens: dict[str, int] | None = None) -> None:
        self.special_tokens = dict(special_tokens or {})
        self._special_text = {tok: text for text, tok in self.special_tokens.items()}
        if self.special_tokens:
            alternatives = sorted(self.special_tokens, key=len, reverse=True)
            self._split: re.Pattern[str] | None = re.compile(
                "(" + "|".join(re.escape(s) for s in alternatives) + ")"
            )
        else:
            self._split = None

    def _plain(self, text: str) -> list[int]:
        return [
            int.from_bytes(p.encode("utf-8", errors="surrogatepass") + _MARKER, "little")
            for p in self._PIECE.findall(text)
        ]

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

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens`` (ids of 0 or less are skipped)."""
        parts = []
        for tok in tokens:
            special = self._special_text.get(tok)
            if special is not None:
                parts.append(special)
                continue
            if tok <= 0:
                continue
            raw = int(tok).to_bytes((int(tok).bit_length() + 7) // 8, "little")
            parts.append(raw[:-1].decode("utf-8", errors="replace"))
        return "".join(parts)
