"""Workspace index: the live symbol index of the workspace folders and open buffers.

Owns :class:`WorkspaceIndex`, which ties the index's modules together: the scan (cold,
or warm from the SQLite cache), the open buffers (reparsed by ``incremental``), reading
texts and trees through the LRU (``cache``), and applying watcher batches (``events``);
the entries and name table live in ``symbols``, the import graph in ``graph``, the
foreground gate in ``gate``. All public methods are thread-safe; lookups work while a
background scan runs.

The index's lock is its own: it guards the buffers, the file sets and the listeners,
and is held across installing an entry in the table and the graph (each guards
itself with a private lock taken under it, never the other way round). The
listeners are told after it is released (:meth:`WorkspaceIndex._changing`), so a
listener may take its own locks or query the index from any thread.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.config import Bounded, IndexSettings
from lsp_assist.documents.document import ByteEdit, language_for_path
from lsp_assist.errors import IndexError_
from lsp_assist.index.cache import CachedFile, FileCache
from lsp_assist.index.events import Watcher, plan_events
from lsp_assist.index.extract import Extraction, extract, summarize
from lsp_assist.index.files import FileRules, FoundFile, is_binary
from lsp_assist.index.gate import ForegroundGate
from lsp_assist.index.graph import ImportGraph
from lsp_assist.index.incremental import Buffer, edited, new_buffer
from lsp_assist.index.languages import parse, queries_fingerprint
from lsp_assist.index.model import FileEntry, Import, Symbol
from lsp_assist.index.packed import PackedEntry, imports_of, names_of, pack
from lsp_assist.index.store import DB_NAME, IndexStore
from lsp_assist.index.symbols import Stored, SymbolTable

logger = logging.getLogger(__name__)

Progress = Callable[[int, int], None]

SAVE_BATCH = 500
"""Rows written to the SQLite cache per transaction while a scan runs."""


@dataclass(kw_only=True)
class IndexStats:
    """What one scan did."""

    files: int = 0
    symbols: int = 0
    bytes: int = 0
    seconds: float = 0.0
    parsed: int = 0
    """Files actually parsed by this run."""
    skipped_unchanged: int = 0
    """Files whose size+mtime or content hash matched the index or the persistent cache."""
    removed: int = 0
    languages: dict[str, int] = field(default_factory=dict)


def content_hash(data: bytes) -> str:
    """Return the content hash the index uses (BLAKE2b, 128 bits, hex)."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _abspath(path: Path | str) -> Path:
    return Path(os.path.abspath(path))


def _open_store(cache_dir: Path) -> IndexStore | None:
    """Open the SQLite cache; a corrupt file is deleted and recreated once."""
    fingerprint = queries_fingerprint()
    try:
        return IndexStore(cache_dir, fingerprint)
    except IndexError_ as exc:
        logger.warning("index cache unusable (%s); recreating it", exc)
    for suffix in ("", "-wal", "-shm"):
        with contextlib.suppress(OSError):
            (cache_dir / (DB_NAME + suffix)).unlink()
    try:
        return IndexStore(cache_dir, fingerprint)
    except IndexError_ as exc:
        logger.warning("index persistence disabled: %s", exc)
        return None


class WorkspaceIndex:
    """The symbol index of one or more workspace folders (satisfies ``IndexLookup``)."""

    def __init__(
        self,
        roots: list[Path],
        settings: IndexSettings | None = None,
        *,
        cache_dir: Path | None = None,
    ) -> None:
        self.settings = settings or IndexSettings()
        self.roots = [Path(r).resolve() for r in roots]
        self.rules = FileRules(self.roots, self.settings)
        self._lock = threading.RLock()
        self._scan_lock = threading.Lock()
        self._edit_lock = threading.Lock()
        self._stopped = False
        self._table = SymbolTable()
        self._stat: dict[Path, tuple[int, int]] = {}
        """(size, mtime_ns) on disk of files an open buffer shadows (packed entries hold
        their own)."""
        self._disk_files: set[Path] = set()
        self._buffers: dict[Path, Buffer] = {}
        self._cache = FileCache(self.settings.file_cache_mb * 1024 * 1024)
        self._gate = ForegroundGate()
        self._graph = ImportGraph(self.roots, self._table, self._gate, self._is_stopped)
        self._progress = (0, 0)
        self._store: IndexStore | None = None
        self._persisted: dict[str, PackedEntry] | None = None
        if cache_dir is not None and self.settings.persist:
            self._store = _open_store(Path(cache_dir))
        self._watcher: Watcher | None = None
        self._listeners: list[Callable[[Path], None]] = []
        self._changed: list[Path] = []
        """Paths installed under the lock, told to the listeners once it is released."""
        self._depth = 0
        """How deep the thread holding the lock is in :meth:`_changing` blocks."""

    def _norm(self, path: Path | str) -> Path:
        """Return the absolute form of ``path``; through symlinks only to reach a root."""
        absolute = _abspath(path)
        if self.rules.root_of(absolute) is None:
            try:
                resolved = absolute.resolve()
            except (OSError, RuntimeError):
                return absolute
            if self.rules.root_of(resolved) is not None:
                return resolved
        return absolute

    # ------------------------------------------------------------------ properties
    @property
    def progress(self) -> tuple[int, int]:
        """(files done, files total) of the current or last scan."""
        return self._progress

    @property
    def paused_s(self) -> float:
        """Seconds background work has waited for foreground requests, in all."""
        return self._gate.paused_s

    def bounds(self, *, documents: int) -> dict[str, Bounded]:
        """The file cache and the symbol table's caches; the open buffers against ``documents``."""
        held = Bounded(len(self._buffers), documents, "documents", "open documents")
        return {**self._cache.bounds(), **self._table.bounds(), "index.buffers": held}

    def files(self) -> list[Path]:
        """Return the indexed workspace files (open buffers outside the roots excluded)."""
        with self._lock:
            return sorted(self._disk_files | {p for p in self._buffers if self.rules.root_of(p)})

    def holds(self, path: Path) -> bool:
        """True when :meth:`files` lists ``path`` (without listing them all)."""
        path = self._norm(path)
        with self._lock:
            return path in self._disk_files or (
                path in self._buffers and self.rules.root_of(path) is not None
            )

    def relative(self, path: Path) -> str:
        """Return the workspace-relative display path (root name first with several roots)."""
        path = self._norm(path)
        root = self.rules.root_of(path)
        if root is None:
            return str(path)
        rel = path.relative_to(root).as_posix()
        return f"{root.name}/{rel}" if len(self.roots) > 1 else rel

    def is_denied(self, path: Path) -> bool:
        """True when a file must never be indexed nor read into a prompt (secrets)."""
        return self._denied(self._norm(path))

    def _denied(self, path: Path) -> bool:
        """The deny rules on the path and, through symlinks, on the file it really is."""
        if self.rules.is_denied(path):
            return True
        try:
            real = path.resolve()
        except (OSError, RuntimeError):
            return False
        return real != path and self.rules.is_denied(real)

    # ------------------------------------------------------------------ foreground gate
    @contextlib.contextmanager
    def foreground(self) -> Iterator[None]:
        """Hold off the scan and the graph rebuild while a request is served (nests).

        Background work looks at the gate between two files and waits while any holder
        is inside, at most ``gate.MAX_YIELD_S`` at a time (so it always makes progress)."""
        with self._gate.hold():
            yield

    def yield_to_foreground(self, stopped: Callable[[], bool] | None = None) -> None:
        """Wait while a request holds the foreground gate (background work calls this).

        At most ``gate.MAX_YIELD_S``; it ends early once the index stops or ``stopped()``
        (the caller's own stop) is true, when the gate is next released or the wait ends."""
        if stopped is None:
            self._gate.wait(self._is_stopped)
        else:
            self._gate.wait(lambda: self._stopped or stopped())

    def _is_stopped(self) -> bool:
        return self._stopped

    # ------------------------------------------------------------------ lookups
    def file(self, path: Path) -> FileEntry | None:
        """Return the entry of ``path`` (open buffer state if open) or None."""
        return self._table.entry(self._norm(path))

    def lookup(self, name: str) -> list[Symbol]:
        """Return every symbol named exactly ``name``."""
        return self._table.lookup(name)

    def lookup_prefix(self, prefix: str, limit: int = 50) -> list[Symbol]:
        """Return symbols whose name starts with ``prefix`` (at most ``limit``)."""
        return self._table.lookup_prefix(prefix, limit)

    def symbols_of(self, path: Path) -> list[Symbol]:
        """Return all symbols of one file."""
        entry = self.file(path)
        return list(entry.symbols) if entry is not None else []

    def resolve_import(self, from_path: Path, imp: Import) -> Path | None:
        """Return the workspace file an import of ``from_path`` resolves to, or None."""
        return self._graph.resolve(self._norm(from_path), imp)

    def importers_of(self, path: Path) -> list[Path]:
        """Return the files that import ``path``.

        Without background work (the CLI, a plain ``scan()``) an out-of-date graph is
        rebuilt here; once ``start_background_scan`` ran, the graph a background thread
        last finished is answered at once, however stale."""
        return self._graph.importers_of(self._norm(path))

    def wait_graph(self, timeout: float) -> bool:
        """Wait for a running graph rebuild to end; True when the graph is exact."""
        return self._graph.wait(timeout)

    # ------------------------------------------------------------------ text and trees
    def _read_allowed(self, path: Path) -> bool:
        return not self.rules.is_denied(path) and self.rules.root_of(path) is not None

    def _load(self, path: Path, with_tree: bool) -> CachedFile | None:
        if not self._read_allowed(path):
            return None
        try:
            st = path.stat()
        except OSError:
            self._cache.discard(path)
            return None
        cached = self._cache.get(path)
        if (
            cached is not None
            and cached.stamp == (st.st_size, st.st_mtime_ns)
            and (cached.tree is not None or not with_tree)
        ):
            return cached
        try:
            if not self.rules.inside(path) or st.st_size > self.settings.max_file_bytes:
                return None
            src = path.read_bytes()
        except OSError:
            return None
        if is_binary(src):
            return None
        tree = None
        lang = language_for_path(path)
        if with_tree and lang is not None:
            tree = parse(lang, src)
        item = CachedFile(
            src=src, tree=tree, text=None, content_hash="", stamp=(st.st_size, st.st_mtime_ns)
        )
        self._cache.put(path, item)
        return item

    def _read(self, path: Path, with_tree: bool) -> tuple[Path, Buffer | CachedFile | None]:
        """Return the normalised path and its open buffer, else its cached or loaded
        state (None when denied or unreadable)."""
        path = self._norm(path)
        if self._denied(path):
            return path, None
        with self._lock:
            buf = self._buffers.get(path)
        if buf is not None:
            return path, buf
        return path, self._load(path, with_tree)

    def text_of(self, path: Path) -> str | None:
        """Return the text of a file (open buffer first, then the LRU cache, then disk)."""
        path, item = self._read(path, with_tree=False)
        if item is None:
            return None
        if isinstance(item, Buffer):
            return item.text
        if item.text is None:
            text = item.src.decode("utf-8", "replace")
            self._cache.update_text(path, text)
            return text
        return item.text

    def tree_of(self, path: Path) -> Tree | None:
        """Return the syntax tree of a file (open buffer, else LRU-cached, else parsed)."""
        _, item = self._read(path, with_tree=True)
        return item.tree if item is not None else None

    def tree_for(self, path: Path, text: str) -> Tree | None:
        """Return the syntax tree of ``path`` only if it was parsed from ``text``, else None.

        For a reader on another thread holding a snapshot: the open buffer's text and
        tree are read together, so an edit made meanwhile never pairs a newer tree with
        older text.
        """
        norm = self._norm(path)
        with self._lock:
            buf = self._buffers.get(norm)
            if buf is not None:
                return buf.tree if buf.text is text or buf.text == text else None
        return self.tree_of(norm) if self.text_of(norm) == text else None

    # ------------------------------------------------------------------ index mutation
    @contextlib.contextmanager
    def _changing(self) -> Iterator[None]:
        """Hold the index lock to install entries; the listeners are told once it is released."""
        changed: list[Path] = []
        listeners: list[Callable[[Path], None]] = []
        try:
            with self._lock:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                    if self._depth == 0:
                        changed, self._changed = self._changed, []
                        listeners = self._listeners
        finally:
            for path in changed:
                for listener in listeners:
                    listener(path)

    def _install(self, path: Path, stored: Stored | None, names: set[str] | None = None) -> None:
        """Replace the entry of ``path`` (None removes it) and follow it in the import
        graph; the caller is in a :meth:`_changing` block. ``names``: the distinct symbol
        names of ``stored`` when the caller has them."""
        old = self._table.install(path, stored, names)
        self._graph.installed(path, old, stored)
        same = (
            old is not None
            and stored is not None
            and bool(old.content_hash)
            and old.content_hash == stored.content_hash
        )
        if self._listeners and not same:
            self._changed.append(path)

    def on_change(self, listener: Callable[[Path], None]) -> Callable[[], None]:
        """Call ``listener(path)`` whenever a file's content in the index changes or goes.

        Called on the changing thread (a watcher batch, a buffer edit once re-extracted,
        a scan, a deletion) after the index lock is released: it may take locks of its
        own and query the index; it should be quick (a buffer edit runs on the event
        loop). Returns the function that unsubscribes it."""
        with self._lock:
            self._listeners = [*self._listeners, listener]

        def remove() -> None:
            with self._lock:
                self._listeners = [f for f in self._listeners if f is not listener]

        return remove

    def _index_file(self, found: FoundFile, src: bytes, digest: str) -> FileEntry:
        """Parse one disk file (its tree is not cached: a scan reads every file once)."""
        tree = parse(found.language, src)
        ext = extract(found.language, tree, src, found.path)
        entry = _entry_from(found.path, found.language, src, tree, ext)
        entry.mtime = found.mtime_ns / 1e9
        entry.content_hash = digest
        return entry

    def _refresh_found(
        self, found: FoundFile, rows: list[tuple[str, PackedEntry]], stats: IndexStats
    ) -> None:
        """Bring one disk file up to date (parse only when its content changed)."""
        path = found.path
        key = (found.size, found.mtime_ns)
        with self._lock:
            self._disk_files.add(path)
            if path in self._buffers:
                self._stat[path] = key
                stats.skipped_unchanged += 1
                return
            current = self._table.get(path)
            if isinstance(current, PackedEntry) and (current.size, current.mtime_ns) == key:
                stats.skipped_unchanged += 1
                return
        row = self._persisted.pop(str(path), None) if self._persisted is not None else None
        row_names = _row_names(row, path) if row is not None else None
        if row is not None and row_names is None:
            row = None
        if row is not None and (row.size, row.mtime_ns) == key:
            with self._changing():
                if path not in self._buffers:
                    self._install(path, row, row_names)
            stats.skipped_unchanged += 1
            return
        try:
            src = found.path.read_bytes()
        except OSError as exc:
            logger.debug("cannot read %s: %s", path, exc)
            self._forget(path)
            return
        if is_binary(src) or len(src) > self.settings.max_file_bytes:
            self._forget(path)
            return
        digest = content_hash(src)
        reuse: PackedEntry | None = None
        if current is not None and current.content_hash == digest:
            base = current if isinstance(current, PackedEntry) else pack(current, 0)
            reuse = base.with_stamp(len(src), found.mtime_ns)
        elif row is not None and row.content_hash == digest:
            reuse = row.with_stamp(len(src), found.mtime_ns)
        if reuse is not None:
            with self._changing():
                if path not in self._buffers:
                    self._install(path, reuse)
            rows.append((str(path), reuse))
            stats.skipped_unchanged += 1
            return
        entry = self._index_file(found, src, digest)
        packed = pack(entry, found.mtime_ns)
        with self._changing():
            if path not in self._buffers:
                self._install(path, packed, {s.name for s in entry.symbols})
        rows.append((str(path), packed))
        stats.parsed += 1

    def _forget(self, path: Path) -> bool:
        """Drop a disk file from the index (open buffers keep their entry)."""
        self._cache.discard(path)
        with self._changing():
            known = path in self._disk_files or path in self._stat
            self._disk_files.discard(path)
            self._stat.pop(path, None)
            if path not in self._buffers:
                if path in self._table:
                    known = True
                self._install(path, None)
        return known

    # ------------------------------------------------------------------ scanning
    def scan(self, progress: Progress | None = None) -> IndexStats:
        """Scan the roots: parse new or changed files, drop vanished ones (blocking)."""
        with self._scan_lock:
            self._graph.scan_started()
            try:
                return self._scan(progress)
            finally:
                self._graph.scan_ended()

    def _scan(self, progress: Progress | None) -> IndexStats:
        started = time.perf_counter()
        stats = IndexStats()
        found = self.rules.walk()
        total = len(found)
        self._progress = (0, total)
        if progress is not None:
            progress(0, total)
        if self._store is not None and self._persisted is None:
            try:
                self._persisted = self._store.load()
            except IndexError_ as exc:
                logger.warning("ignoring the index cache: %s", exc)
                self._persisted = {}
        rows: list[tuple[str, PackedEntry]] = []
        step = max(1, total // 100)
        seen: set[Path] = set()
        for done, item in enumerate(found, 1):
            self.yield_to_foreground()
            if self._stopped:
                break
            seen.add(item.path)
            try:
                self._refresh_found(item, rows, stats)
            except IndexError_ as exc:
                logger.warning("skipping %s: %s", item.path, exc)
            if len(rows) >= SAVE_BATCH:
                self._save(rows, [])
                rows.clear()
            if done % step == 0 or done == total:
                self._progress = (done, total)
                if progress is not None:
                    progress(done, total)
        deleted: list[str] = []
        vanished: list[Path] = []
        if not self._stopped:
            with self._lock:
                vanished = [p for p in self._disk_files if p not in seen]
            for path in vanished:
                self._forget(path)
                deleted.append(str(path))
            if self._persisted:
                deleted.extend(self._persisted)
                self._persisted.clear()
        stats.removed = len(vanished)
        self._save(rows, deleted)
        with self._lock:
            for item in found:
                entry = self._table.get(item.path)
                if entry is None:
                    continue
                stats.files += 1
                stats.symbols += (
                    entry.symbol_count if isinstance(entry, PackedEntry) else len(entry.symbols)
                )
                stats.bytes += entry.size
                stats.languages[entry.language] = stats.languages.get(entry.language, 0) + 1
        stats.seconds = time.perf_counter() - started
        logger.info(
            "indexed %d files (%d parsed, %d unchanged) in %.2fs",
            stats.files,
            stats.parsed,
            stats.skipped_unchanged,
            stats.seconds,
        )
        return stats

    def _save(self, rows: list[tuple[str, PackedEntry]], deleted: list[str]) -> None:
        if self._store is None:
            return
        try:
            self._store.save(rows, deleted)
        except IndexError_ as exc:
            logger.warning("index cache not written: %s", exc)

    def start_background_scan(self, progress: Progress | None = None) -> threading.Thread:
        """Run :meth:`scan` in a daemon thread and return it (lookups work meanwhile).

        From then on the import graph is rebuilt on a thread of its own after the scan and
        after file-set changes, never on the thread of a lookup."""
        self._graph.start_background()

        def run() -> None:
            try:
                self.scan(progress)
            except (IndexError_, OSError):
                logger.exception("background index scan failed")

        thread = threading.Thread(target=run, name="index-scan", daemon=True)
        thread.start()
        return thread

    # ------------------------------------------------------------------ watching
    def start_watching(self) -> bool:
        """Start the file watcher; False (and periodic rescans) if it cannot start."""
        if not self.settings.watch or self._watcher is not None:
            return self._watcher is not None and self._watcher.observing
        self._watcher = Watcher(self.roots, self._apply_events, self.scan)
        return self._watcher.start()

    def _apply_events(self, batch: dict[Path, bool]) -> None:
        """Apply one debounced batch of watcher events (a rescan, or the files it names)."""
        plan = plan_events(batch, self._norm, self.rules, self._holds_files_under)
        if plan.rescan:
            self.scan()
            return
        rows: list[tuple[str, PackedEntry]] = []
        deleted: list[str] = []
        stats = IndexStats()
        with self._scan_lock:
            for path in plan.files:
                found = self.rules.eligible(path)
                if found is None:
                    if self._forget(path):
                        deleted.append(str(path))
                    continue
                try:
                    self._refresh_found(found, rows, stats)
                except IndexError_ as exc:
                    logger.warning("skipping %s: %s", path, exc)
            self._save(rows, deleted)

    def _holds_files_under(self, path: Path) -> bool:
        with self._lock:
            return any(p.is_relative_to(path) for p in self._disk_files)

    def stop(self) -> None:
        """Stop the watcher or poller and close the persistent cache."""
        self._stopped = True
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        with self._scan_lock:
            if self._store is not None:
                self._store.close()
                self._store = None

    # ------------------------------------------------------------------ open buffers
    def open_buffer(self, path: Path, text: str) -> None:
        """Index an open buffer's text (it replaces the disk state until closed)."""
        path = self._norm(path)
        lang = language_for_path(path)
        if lang is None or self._denied(path):
            return
        buf = new_buffer(path, lang, text)
        entry = _buffer_entry(path, buf)
        with self._changing():
            self._buffers[path] = buf
            self._install_buffer_entry(path, entry)

    def edit_buffer(self, path: Path, text: str, edit: ByteEdit) -> None:
        """Apply one edit incrementally; ``text`` is the full new text."""
        path = self._norm(path)
        with self._edit_lock:
            with self._lock:
                buf = self._buffers.get(path)
            if buf is None:
                self.open_buffer(path, text)
                return
            new = edited(buf, path, text, edit)
            entry = _buffer_entry(path, new)
            with self._changing():
                if self._buffers.get(path) is not buf:
                    return  # closed or reopened meanwhile
                self._buffers[path] = new
                self._install_buffer_entry(path, entry)

    def _install_buffer_entry(self, path: Path, entry: FileEntry) -> None:
        """Install an open buffer's entry (the disk file's mtime kept); in :meth:`_changing`."""
        disk = self._table.get(path)
        if disk is not None:
            entry.mtime = disk.mtime
        self._install(path, entry)

    def close_buffer(self, path: Path) -> None:
        """Forget an open buffer; the disk state of the file is indexed again."""
        path = self._norm(path)
        with self._lock:
            buf = self._buffers.pop(path, None)
            if buf is None:
                return
            self._stat.pop(path, None)
        self._cache.discard(path)
        found = self.rules.eligible(path)
        if found is None:
            with self._changing():
                self._install(path, None)
                self._disk_files.discard(path)
            return
        # Replacing the entry in place (rather than removing it first) keeps the import
        # graph: only this file's edges are re-resolved, not the whole workspace's. No
        # scan lock: a didClose must not wait for a running scan.
        rows: list[tuple[str, PackedEntry]] = []
        try:
            self._refresh_found(found, rows, IndexStats())
        except IndexError_ as exc:
            logger.warning("skipping %s: %s", path, exc)
        self._save(rows, [])


def _entry_from(path: Path, lang: str, src: bytes, tree: Tree, ext: Extraction) -> FileEntry:
    return FileEntry(
        path=path,
        language=lang,
        symbols=list(ext.symbols),
        imports=list(ext.imports),
        summary=summarize(lang, tree, src, ext.symbols, ext.imports),
        size=len(src),
    )


def _buffer_entry(path: Path, buf: Buffer) -> FileEntry:
    entry = _entry_from(path, buf.language, buf.src, buf.tree, buf.ext)
    entry.content_hash = content_hash(buf.src)
    return entry


def _row_names(row: PackedEntry, path: Path) -> set[str] | None:
    """Return the symbol names of a cached row, None when its blob is damaged."""
    try:
        names = names_of(row)
        imports_of(row)
    except (zlib.error, ValueError, EOFError, TypeError) as exc:
        logger.warning("index cache row of %s unusable (%s); parsing the file", path, exc)
        return None
    return names
