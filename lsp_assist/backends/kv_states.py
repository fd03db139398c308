"""Saved per-file KV states: an LRU with a byte cap and a system-memory threshold.

The local backend keeps one live llama.cpp sequence. When a request comes for another
file (another ``cache_key``), the live sequence is serialised here under the old key and
the new key's saved state, if any, is restored, so switching back to a recently used
file does not re-evaluate its prompt. States are dropped least recently used first when
the byte cap would be exceeded or when system memory use is above the threshold.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass

logger = logging.getLogger(__name__)


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """Return the length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    if list(a[:n]) == list(b[:n]):
        return n
    lo, step = 0, 256
    # coarse scan with slice comparisons (C speed), then refine one token at a time
    while lo + step <= n and list(a[lo : lo + step]) == list(b[lo : lo + step]):
        lo += step
    while lo < n and a[lo] == b[lo]:
        lo += 1
    return lo


def system_memory_fraction() -> float:
    """Return the fraction of system memory in use (0.0 when psutil is unavailable)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        return 0.0
    return float(psutil.virtual_memory().percent) / 100.0


@dataclass
class KVState:
    """One saved sequence: the tokens it holds and llama.cpp's serialised state."""

    tokens: list[int]
    data: Sized
    """The serialised state: bytes, or the ctypes uint8 array llama.cpp wrote into."""

    @property
    def nbytes(self) -> int:
        """Size of the serialised state in bytes."""
        return len(self.data)


class KVStateCache:
    """LRU of saved KV states, capped in bytes and by system memory use."""

    def __init__(
        self,
        max_bytes: int,
        *,
        memory_threshold: float = 0.9,
        memory_probe: Callable[[], float] = system_memory_fraction,
    ) -> None:
        self.max_bytes = max_bytes
        self.memory_threshold = memory_threshold
        self._memory_probe = memory_probe
        self._states: OrderedDict[str, KVState] = OrderedDict()
        self.bytes = 0
        self.saves = 0
        self.restores = 0
        self.evictions = 0
        self.memory_evictions = 0
        self.rejected = 0

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def keys(self) -> list[str]:
        """Return the keys, least recently used first."""
        return list(self._states)

    def put(self, key: str, state: KVState) -> bool:
        """Store ``state`` under ``key``, evicting LRU entries; return False if it cannot fit."""
        self.discard(key)
        if state.nbytes > self.max_bytes:
            self.rejected += 1
            logger.debug("KV state for %s (%d bytes) exceeds the cap", key, state.nbytes)
            return False
        while self._states and self.bytes + state.nbytes > self.max_bytes:
            self._evict_oldest()
            self.evictions += 1
        self.trim_for_memory()
        if self.memory_threshold < 1.0 and self._memory_probe() >= self.memory_threshold:
            self.rejected += 1
            logger.info(
                "system memory above %.0f%%: KV state not saved", 100 * self.memory_threshold
            )
            return False
        self._states[key] = state
        self.bytes += state.nbytes
        self.saves += 1
        return True

    def pop(self, key: str) -> KVState | None:
        """Remove and return the state saved under ``key``."""
        state = self._states.pop(key, None)
        if state is not None:
            self.bytes -= state.nbytes
            self.restores += 1
        return state

    def peek(self, key: str) -> KVState | None:
        """Return the state under ``key`` without changing the LRU order."""
        return self._states.get(key)

    def discard(self, key: str) -> None:
        """Drop the state under ``key`` if present."""
        state = self._states.pop(key, None)
        if state is not None:
            self.bytes -= state.nbytes

    def best_match(self, tokens: Sequence[int]) -> tuple[str, int] | None:
        """Return the key whose saved tokens share the longest prefix with ``tokens``."""
        best: tuple[str, int] | None = None
        for key, state in self._states.items():
            n = common_prefix_len(state.tokens, tokens)
            if n > 0 and (best is None or n > best[1]):
                best = (key, n)
        return best

    def trim_for_memory(self) -> int:
        """Drop LRU states while system memory use is above the threshold; return the count."""
        dropped = 0
        if self.memory_threshold >= 1.0:
            return 0
        while self._states and self._memory_probe() >= self.memory_threshold:
            self._evict_oldest()
            self.memory_evictions += 1
            dropped += 1
        return dropped

    def clear(self) -> None:
        """Drop every state."""
        self._states.clear()
        self.bytes = 0

    def _evict_oldest(self) -> None:
        key, state = self._states.popitem(last=False)
        self.bytes -= state.nbytes
        logger.debug("evicted KV state for %s (%d bytes)", key, state.nbytes)

    def stats(self) -> dict[str, object]:
        """Counters for metrics."""
        return {
            "kv_states": len(self._states),
            "kv_state_bytes": self.bytes,
            "kv_state_cap_bytes": self.max_bytes,
            "kv_state_saves": self.saves,
            "kv_state_restores": self.restores,
            "kv_state_evictions": self.evictions,
            "kv_state_memory_evictions": self.memory_evictions,
            "kv_state_rejected": self.rejected,
        }
