"""Store: the persistent per-workspace index cache (SQLite).

Owns the database file ``<cache_dir>/index.sqlite3``: one row per file keyed by its
path, with size, mtime (ns) and a BLAKE2 content hash, the language, the summary and
the symbols and imports as one ``marshal`` blob. The schema version and a fingerprint
of the query files are stored in ``meta``; when either differs the cache is dropped.
sqlite3 errors are mapped to :class:`~lsp_assist.errors.IndexError_`.
"""

from __future__ import annotations

import logging
import marshal
import sqlite3
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_assist.errors import IndexError_
from lsp_assist.index.extract import SYMBOL_SETTERS
from lsp_assist.index.model import FileEntry, Import, Symbol

logger = logging.getLogger(__name__)

SCHEMA_VERSION = "1"
DB_NAME = "index.sqlite3"


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One persisted row: the key fields and the undecoded payload."""

    path: str
    size: int
    mtime_ns: int
    content_hash: str
    language: str
    summary: str
    payload: bytes


def encode_entry(entry: FileEntry) -> bytes:
    """Return the marshal blob of an entry's symbols and imports."""
    symbols = [
        (s.name, s.kind, s.start_line, s.end_line, s.parent, s.signature, s.doc)
        for s in entry.symbols
    ]
    imports = [(i.module, i.names, i.line, i.level) for i in entry.imports]
    return marshal.dumps((symbols, imports))


def decode_entry(row: StoredFile, path: Path) -> FileEntry:
    """Return the FileEntry of a persisted row (symbols point at ``path``)."""
    symbols_raw, imports_raw = marshal.loads(row.payload)
    new = Symbol.__new__
    set_name, set_kind, set_path, set_start, set_end, set_parent, set_sig, set_doc = SYMBOL_SETTERS
    symbols: list[Symbol] = []
    append = symbols.append
    for name, kind, start, end, parent, signature, doc in symbols_raw:
        sym = new(Symbol)
        set_name(sym, name)
        set_kind(sym, kind)
        set_path(sym, path)
        set_start(sym, start)
        set_end(sym, end)
        set_parent(sym, parent)
        set_sig(sym, signature)
        set_doc(sym, doc)
        append(sym)
    imports = [Import(module=m, names=tuple(n), line=ln, level=lv) for m, n, ln, lv in imports_raw]
    return FileEntry(
        path=path,
        language=row.language,
        symbols=symbols,
        imports=imports,
        summary=row.summary,
        size=row.size,
        mtime=row.mtime_ns / 1e9,
        content_hash=row.content_hash,
    )


class IndexStore:
    """The SQLite file of one workspace (thread-safe; one connection, one lock)."""

    def __init__(self, cache_dir: Path, fingerprint: str) -> None:
        self.path = cache_dir / DB_NAME
        self._lock = threading.Lock()
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
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
                " mtime_ns INTEGER, hash TEXT, language TEXT, summary TEXT, payload BLOB)"
            )
        except (sqlite3.Error, OSError) as exc:
            raise IndexError_(f"cannot open the index cache {self.path}: {exc}") from exc

    def load(self) -> dict[str, StoredFile]:
        """Return every persisted row by path."""
        try:
            with self._lock:
                rows = self._db.execute(
                    "SELECT path, size, mtime_ns, hash, language, summary, payload FROM files"
                ).fetchall()
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot read the index cache {self.path}: {exc}") from exc
        return {r[0]: StoredFile(*r) for r in rows}

    def save(self, rows: list[tuple[Any, ...]], deleted: list[str]) -> None:
        """Write rows (path, size, mtime_ns, hash, language, summary, payload) in one go."""
        if not rows and not deleted:
            return
        try:
            with self._lock:
                self._db.execute("BEGIN")
                try:
                    if deleted:
                        self._db.executemany(
                            "DELETE FROM files WHERE path=?", [(p,) for p in deleted]
                        )
                    if rows:
                        self._db.executemany(
                            "INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?)", rows
                        )
                    self._db.execute("COMMIT")
                except BaseException:
                    self._db.execute("ROLLBACK")
                    raise
        except sqlite3.Error as exc:
            raise IndexError_(f"cannot write the index cache {self.path}: {exc}") from exc

    def close(self) -> None:
        """Close the database."""
        with self._lock:
            try:
                self._db.close()
            except sqlite3.Error as exc:  # pragma: no cover - close rarely fails
                logger.debug("closing %s: %s", self.path, exc)
