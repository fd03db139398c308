"""The vector cache: each file's chunks and vectors in the workspace's SQLite database.

Owns :class:`VectorStore`: the vectors in the per-workspace cache (``index.sqlite3``,
beside the symbols of ``index/store.py``): one row per file and model, keyed by the
index's content hash, with its chunks and their vectors (float16).
"""

from __future__ import annotations

import contextlib
import logging
import marshal
import sqlite3
import threading
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lsp_assist.errors import IndexError_
from lsp_assist.index.store import DB_NAME, connect, transaction
from lsp_assist.index.vectors.chunks import ChunkSpan, Matrix

Stored = tuple[str, list[ChunkSpan], npt.NDArray[np.float16]]
"""A file's row in the cache: its content hash, its chunks, their float16 vectors."""

logger = logging.getLogger(__name__)


class VectorStore:
    """The vectors of one workspace and model in ``<cache_dir>/index.sqlite3`` (thread-safe)."""

    def __init__(self, cache_dir: Path, model_id: str) -> None:
        self.path = cache_dir / DB_NAME
        self.model_id = model_id
        self._lock = threading.Lock()
        try:
            self._db = connect(self.path)
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (model TEXT, path TEXT, file_key TEXT,"
                " chunks BLOB, vectors BLOB, PRIMARY KEY (model, path))"
            )
        except (sqlite3.Error, OSError) as exc:
            raise IndexError_(f"cannot open the vector cache {self.path}: {exc}") from exc

    def load(self) -> dict[str, Stored]:
        """Return every stored file of this model: path -> (file key, chunks, vectors)."""
        out: dict[str, Stored] = {}
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT path, file_key, chunks, vectors FROM vectors WHERE model=?",
                    (self.model_id,),
                ).fetchall()
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot read the vector cache {self.path}: {exc}") from exc
        for path, file_key, chunks_blob, vectors_blob in rows:
            try:
                spans = [ChunkSpan(*t) for t in marshal.loads(chunks_blob)]
                vectors = np.frombuffer(vectors_blob, dtype=np.float16).reshape(len(spans), -1)
            except (ValueError, TypeError, EOFError) as exc:
                logger.warning("vector cache row %s does not decode (%s): re-embedding", path, exc)
                continue
            out[path] = (file_key, spans, vectors)
        return out

    def save(
        self, rows: Iterable[tuple[str, str, list[ChunkSpan], Matrix]], deleted: Iterable[str]
    ) -> None:
        """Write (path, file key, chunks, vectors) rows and delete paths, in one transaction."""
        data = [
            (
                self.model_id,
                path,
                file_key,
                marshal.dumps([(s.start_line, s.end_line, s.label, s.kind, s.key) for s in spans]),
                np.ascontiguousarray(vectors, dtype=np.float16).tobytes(),
            )
            for path, file_key, spans, vectors in rows
        ]
        gone = [(self.model_id, p) for p in deleted]
        if not data and not gone:
            return
        try:
            with transaction(self._db, self._lock) as db:
                db.executemany("DELETE FROM vectors WHERE model=? AND path=?", gone)
                db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?, ?, ?, ?)", data)
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot write the vector cache {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._db.close()
