"""Token healing: generation constrained to begin with text cut from the prompt's end.

A prompt that ends inside a word or a run of spaces ends on a token the model rarely
saw there: the typed indentation ``"    "`` is one token, but the model was trained on
``"   "`` + ``" out"``, so after it Qwen2.5-Coder answers nothing or a space too many.
The context engine therefore cuts the typed part's last pre-token (``"    "``,
``" ret"``, ``"("``) from the prompt (``AssembledPrompt.healed``) and the decode loop
makes the generation write it back: until the forced text is covered, only tokens
whose bytes agree with it (a prefix of it, or starting with it) may be chosen, the
likeliest of them first. The forced bytes are not part of the result's text: what
comes back is exactly what follows the cursor, as without healing.

:class:`PieceIndex` finds the agreeing tokens of a vocabulary in O(log V + matches)
(its pieces sorted once per model); :class:`ForcedPrefix` is one request's state.
"""

from __future__ import annotations

import bisect
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import numpy as np

PieceOf = Callable[[int], bytes]
_WHITE = frozenset({b" ", b"\t", b"\n", b"\r"})


class PieceIndex:
    """The pieces of a vocabulary, sorted, to find the tokens agreeing with some bytes."""

    def __init__(self, n_vocab: int, piece: PieceOf, usable: Callable[[int], bool]) -> None:
        by_piece: dict[bytes, int] = {}
        pairs: list[tuple[bytes, int]] = []
        for token in range(n_vocab):
            if not usable(token):
                continue
            text = piece(token)
            if not text:
                continue
            pairs.append((text, token))
            by_piece.setdefault(text, token)
        pairs.sort()
        self._sorted = [text for text, _ in pairs]
        self._ids = np.array([token for _, token in pairs], dtype=np.int64)
        self._exact = by_piece

    def compatible(self, forced: bytes) -> Any:
        """Return the ids (numpy array) whose piece is a prefix of ``forced`` or extends it.

        A piece that extends it with more white space is left out: the forced text is the
        end of what the user typed (their indentation, the space after ``=``), and a model
        allowed a longer run of spaces there took it and wrote nothing but spaces after.
        """
        if not forced:
            return self._ids
        found = [
            self._exact[forced[:k]] for k in range(1, len(forced)) if forced[:k] in self._exact
        ]
        n = len(forced)
        hi = bisect.bisect_left(self._sorted, forced)
        while hi < len(self._sorted) and self._sorted[hi].startswith(forced):
            piece = self._sorted[hi]
            if len(piece) == n or piece[n : n + 1] not in _WHITE:
                found.append(int(self._ids[hi]))
            hi += 1
        return np.array(found, dtype=np.int64)


HEALING_INDEXES = 2
"""Vocabularies whose :class:`PieceIndex` the process keeps (least recently used dropped):
the model loaded and the one before it, for a switch back. One traced ~7 MB for
SmolLM2's 49,152 tokens (~20 MB for Qwen2.5's 151,936); a model settings change would
otherwise keep each for good."""

_INDEXES: OrderedDict[str, PieceIndex] = OrderedDict()
_INDEX_LOCK = threading.Lock()


def piece_index(
    key: str, n_vocab: int, piece: PieceOf, usable: Callable[[int], bool]
) -> PieceIndex:
    """Return the :class:`PieceIndex` of the vocabulary ``key`` names, built on first use."""
    with _INDEX_LOCK:
        found = _INDEXES.get(key)
        if found is None:
            found = _INDEXES[key] = PieceIndex(n_vocab, piece, usable)
            while len(_INDEXES) > max(1, HEALING_INDEXES):
                _INDEXES.popitem(last=False)
        _INDEXES.move_to_end(key)
        return found


def piece_indexes() -> int:
    """Return how many vocabularies' piece indexes the process holds."""
    with _INDEX_LOCK:
        return len(_INDEXES)


class ForcedPrefix:
    """One generation's forced text: which tokens may come next, and what they cover."""

    def __init__(self, text: str, index: PieceIndex) -> None:
        self.remaining = text.encode("utf-8")
        self._index = index

    @property
    def active(self) -> bool:
        """True while part of the forced text is still to be written."""
        return bool(self.remaining)

    def allowed(self) -> Any:
        """Return the ids (numpy array) that may come next."""
        return self._index.compatible(self.remaining)

    def best(self, logits: Any, n: int) -> list[int]:
        """Return the ``n`` likeliest tokens agreeing with the rest of the forced text."""
        ids = self._index.compatible(self.remaining)
        order = np.argsort(-logits[ids], kind="stable")[:n]
        return [int(ids[i]) for i in order]

    def choose(self, logits: Any) -> int | None:
        """Return the likeliest token agreeing with the rest of the forced text (None: none)."""
        ids = self._index.compatible(self.remaining)
        if len(ids) == 0:
            return None
        return int(ids[int(np.argmax(logits[ids]))])

    def consume(self, piece: bytes) -> bytes:
        """Account for one generated token's bytes; return the part past the forced text."""
        if not self.remaining:
            return piece
        n = min(len(piece), len(self.remaining))
        self.remaining = self.remaining[n:]
        return piece[n:]
