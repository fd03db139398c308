"""Store: the persistent per-workspace index cache (SQLite).

Owns the database file ``<cache_dir>/index.sqlite3``: one row per file keyed by its
path, with size, mtime (ns) and a BLAKE2 content hash, the language, the summary and
the two blobs of a :class:`~lsp_assist.index.packed.PackedEntry` (symbols compressed,
imports) with the symbol count: a row is a packed entry as the index holds it. The
schema version and a fingerprint of the query files are stored in ``meta``; when
either differs the cache is dropped.
sqlite3 errors are mapped to :class:`~lsp_assist.errors.IndexError_`. It also owns how
a cache database is opened (:func:`connect`) and written (:func:`transaction`), for the
other tables of the same file (the vectors of ``index/vectors/store.py``).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

from lsp_assist.errors import IndexError_
from lsp_assist.index.packed import PackedEntry

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "2"
DB_NAME = "index.sqlite3"


def connect(path: Path) -> sqlite3.Connection:
    """Open a cache database (its folder made): WAL, autocommit, one write per transaction."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    return db


@contextlib.contextmanager
def transaction(db: sqlite3.Connection, lock: threading.Lock) -> Iterator[sqlite3.Connection]:
    """Hold ``lock`` and run the block as one transaction (rolled back when it raises)."""
    with lock:
        db.execute("BEGIN")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise


class IndexStore:
    """The SQLite file of one workspace (thread-safe; one connection, one lock)."""

    def __init__(self, cache_dir: Path, fingerprint: str) -> None:
        self.path = cache_dir / DB_NAME
        self._lock = threading.Lock()
        try:
            self._db = connect(self.path)
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            key = f"{SCHEMA_VERSION}:{fingerprint}"
            row = self._db.execute("SELECT value FROM meta WHERE key='version'").fetchone()
            if row is None or row[0] != key:
                if row is not None:
                    logger.info(
                        "index cache %s is stale (%s != %s); rebuilding", self.path, row[0], key
                    )
                self._db.execute("DROP TABLE IF EXISTS files")
                self._db.execute(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES ('version', ?)", (key,)
                )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER,"
                " mtime_ns INTEGER, hash TEXT, language TEXT, summary TEXT, symbols BLOB,"
                " imports BLOB, symbol_count INTEGER)"
            )
        except (sqlite3.Error, OSError) as exc:
            raise IndexError_(f"cannot open the index cache {self.path}: {exc}") from exc

    def load(self) -> dict[str, PackedEntry]:
        """Return every persisted entry by path."""
        try:
            with self._lock:
                cursor = self._db.execute(
                    "SELECT path, language, summary, size, mtime_ns, hash, symbols, imports,"
                    " symbol_count FROM files"
                )
                return {r[0]: PackedEntry(*r[1:]) for r in cursor}
        except (sqlite3.Error, TypeError) as exc:
            raise IndexError_(f"cannot read the index cache {self.path}: {exc}") from exc

    def save(self, rows: list[tuple[str, PackedEntry]], deleted: list[str]) -> None:
        """Write (path, entry) rows and delete paths, in one transaction."""
        if not rows and not deleted:
            return
        try:
            with transaction(self._db, self._lock) as db:
                db.executemany("DELETE FROM files WHERE path=?", [(p,) for p in deleted])
                db.executemany(
                    "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [
                        (
                            path,
                            e.size,
                            e.mtime_ns,
                            e.content_hash,
                            e.language,
                            e.summary,
                            e.symbols_blob,
                            e.imports_blob,
                            e.symbol_count,
                        )
                        for path, e in rows
                    ],
                )
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot write the index cache {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error as exc:  # pragma: no cover - close rarely fails
                logger.debug("closing %s: %s", self.path, exc)
