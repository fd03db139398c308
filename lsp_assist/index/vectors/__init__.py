"""Vector retrieval's index side (``layerVector``): definitions as embedding vectors.

A package of four modules, lowest first:

- ``chunks``: :class:`ChunkSpan`, :class:`VectorHit`, :func:`chunk_file` (one chunk
  per definition, the text embedded for it);
- ``store``: :class:`VectorStore`, the vectors in the workspace's SQLite cache;
- ``ann``: :class:`Hnsw`, the approximate (HNSW) index over the matrix's rows;
- ``index``: :class:`VectorIndex` (the matrix, search, the background worker) and the
  protocols it reads through, :class:`Embedding` and :class:`VectorSource`.

Loading an embedding model is not the index's business: ``serving/vectors_wiring.py``
hands :class:`VectorIndex` a factory for one.
"""

from lsp_assist.index.vectors.ann import Hnsw
from lsp_assist.index.vectors.chunks import MAX_LINES, ChunkSpan, Matrix, VectorHit, chunk_file
from lsp_assist.index.vectors.index import (
    Embedding,
    Progress,
    VectorIndex,
    VectorSource,
    VectorStats,
)
from lsp_assist.index.vectors.store import VectorStore

__all__ = [
    "MAX_LINES",
    "ChunkSpan",
    "Embedding",
    "Hnsw",
    "Matrix",
    "Progress",
    "VectorHit",
    "VectorIndex",
    "VectorSource",
    "VectorStats",
    "VectorStore",
    "chunk_file",
]
