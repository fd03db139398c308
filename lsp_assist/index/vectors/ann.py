"""The approximate index: an HNSW graph over the vector matrix's rows (hnswlib).

Owns :class:`Hnsw`, the wrapper :class:`~lsp_assist.index.vectors.index.VectorIndex`
searches through above ``ANN_MIN_CHUNKS`` live chunks (keys: the matrix rows; its
candidates are scored exactly against the matrix by the caller), and the constants that
size and tune it. hnswlib is imported when a graph is first built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from lsp_assist.index.vectors.chunks import Matrix

ANN_THREADS = 1
"""Threads of a build: the worker's one (a request keeps the other core)."""
ANN_CONNECTIVITY = 16
"""Links per node (HNSW's M)."""
ANN_EXPANSION_ADD = 128
"""Candidates kept while a row is added (ef_construction)."""
ANN_EXPANSION_SEARCH = 64
"""Candidates kept while searching (ef), raised to the count asked for."""


class Hnsw:
    """hnswlib's HNSW graph over unit rows (inner product = cosine), keyed by matrix row.

    hnswlib (not usearch: its extension carries and exports its own libstdc++, after which
    llama.cpp fails to load BPE vocabularies, docs/decisions.md) marks removed keys deleted
    and reuses their slots for new rows; the caller rebuilds once many are deleted.
    """

    def __init__(self, dim: int, capacity: int) -> None:
        import hnswlib  # type: ignore[import-untyped]  # no stubs, no py.typed

        self.dim = dim
        self._index: Any = hnswlib.Index(space="ip", dim=dim)
        self._index.init_index(
            max_elements=capacity,
            ef_construction=ANN_EXPANSION_ADD,
            M=ANN_CONNECTIVITY,
            allow_replace_deleted=True,
        )
        self._index.set_ef(ANN_EXPANSION_SEARCH)
        self._index.set_num_threads(ANN_THREADS)
        self._keys: set[int] = set()

    def __len__(self) -> int:
        return len(self._keys)

    def add(self, keys: npt.NDArray[np.int64], vectors: Matrix) -> None:
        """Add rows under their keys (growing the graph's capacity as needed)."""
        if len(keys) == 0:
            return
        need = len(self._keys) + len(keys)
        if need > self._index.get_max_elements():
            self._index.resize_index(max(need, 2 * self._index.get_max_elements()))
        self._index.add_items(vectors, keys, num_threads=ANN_THREADS, replace_deleted=True)
        self._keys.update(int(k) for k in keys)

    def remove(self, keys: Iterable[int]) -> None:
        """Mark rows deleted (they are no longer returned)."""
        for key in keys:
            if int(key) in self._keys:
                self._index.mark_deleted(int(key))
                self._keys.discard(int(key))

    def search(self, query: Matrix, count: int) -> npt.NDArray[np.int64]:
        """Return the keys of about the ``count`` nearest rows, nearest first."""
        count = min(count, len(self._keys))
        if count <= 0:
            return np.zeros(0, dtype=np.int64)
        self._index.set_ef(max(ANN_EXPANSION_SEARCH, count))
        labels, _distances = self._index.knn_query(query.reshape(1, -1), k=count)
        return np.asarray(labels[0], dtype=np.int64)

    @property
    def memory_bytes(self) -> int:
        """An estimate: the vectors plus two layers of links per slot."""
        slots = int(self._index.get_max_elements())
        return slots * (self.dim * 4 + ANN_CONNECTIVITY * 2 * 4 + 16)
