"""llama.vim's ring buffer of extra context (``s:ring_chunks``, ``s:ring_queued``,
``s:pick_chunk``, ``s:chunk_sim``): chunks of whole lines picked from the buffers,
near-duplicates evicted, queued then moved into the ring; sent as ``input_extra``. The
client is ``client.py``, which picks and moves them on llama.vim's events and timers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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
SIM_EVICT_FIM = 0.5
"""``llama#fim``: ring chunks more similar than this to the cursor's surroundings go."""
SIM_EVICT_PICK = 0.9
"""``s:pick_chunk``: chunks more similar than this to a new chunk go (or it is dropped)."""

_NOT_WORD = re.compile(r"[^0-9A-Za-z_]+")  # Vim's \W


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
