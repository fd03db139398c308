"""The vector index: the workspace's chunks as one matrix, searched and kept current.

Owns :class:`VectorIndex`: a background thread that embeds what changed (only the
chunks whose embedded text is new), a contiguous float32 matrix of every live chunk,
and :meth:`VectorIndex.search` (cosine, a threshold, best first): brute force below
``ANN_MIN_CHUNKS`` live chunks, the approximate index (``ann``) over the same rows
above it, built and kept current on the worker (keys: the matrix rows), its candidates
scored exactly; brute force while it is being built. Also the protocols it
reads through: :class:`Embedding` (the model) and :class:`VectorSource` (the index).

Changes arrive as events: the source calls the vector index for each file whose content
changed or went (``VectorSource.on_change``; ``WorkspaceIndex`` collects them where it
changes entries, ``_install``, and calls it once its lock is released). The worker
waits for ``quiet_s`` without a new one (at most ``max_delay_s`` after the first),
then looks at those files only; no periodic full pass, which would find nothing the
events did not say at the cost of a look over every file (a second at 50,000 files).
A source that cannot report changes (``on_change`` returns None) is looked over
every ``poll_s`` (30 s) instead. Between batches of ``BATCH`` chunks the worker yields
to a request being served (``VectorSource.yield_to_foreground``: the index's
foreground gate).

The embedding model is whatever the caller's factory returns (``dim`` and
``embed(texts) -> (n, dim) float32``, L2-normalised), loaded on the worker thread; the
serving layer passes :class:`lsp_assist.backends.embedding.Embedder`
(``serving/vectors_wiring.py``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from lsp_assist.errors import IndexError_, LspAssistError
from lsp_assist.index.model import FileEntry
from lsp_assist.index.vectors.ann import Hnsw
from lsp_assist.index.vectors.chunks import ChunkSpan, Matrix, VectorHit, chunk_file, text_key
from lsp_assist.index.vectors.store import Stored, VectorStore

logger = logging.getLogger(__name__)

BATCH = 4
"""Chunks per embedding call on the worker thread (then it yields to the foreground): the
packaged model's sequences per ``llama_decode``, so a request waits behind one at most."""
SAVE_BATCH = 200
"""Files per SQLite transaction."""
QUIET_S = 0.5
"""Changes are embedded once none came for this long (typing: every pause) ..."""
MAX_DELAY_S = 3.0
"""... or this long after the first of them (typing without a pause)."""
POLL_S = 30.0
"""A source that cannot report changes is looked over this often."""
ANN_MIN_CHUNKS = 50_000
"""Live chunks from which search goes through the approximate index. Brute force's P99
passes 20 ms at about 75,000 chunks on this 2-core VM (docs/performance.md, "At 50,000
files"); 50,000 (P99 8.5 ms there) leaves room for a busier machine."""
ANN_DROP_FRACTION = 0.8
"""Below this fraction of the threshold the approximate index is dropped (hysteresis)."""
ANN_REBUILD_REMOVED = 0.5
"""The index is rebuilt once the keys removed from it exceed this fraction of its live ones
(HNSW removal leaves holes in the graph)."""
ANN_BUILD_BATCH = 20_000
"""Rows added per call while building (then the worker yields to the foreground)."""
ANN_CANDIDATES = 64
"""Neighbours first asked of the approximate index (then x4 while all of them pass)."""
ANN_MAX_CANDIDATES = 4096
"""The most neighbours one search asks the approximate index for."""
Progress = Callable[[int, int, int], None]
"""Called as files are embedded: (files done, files to embed, chunks embedded so far)."""


class Embedding(Protocol):
    """What the vector index needs from an embedding model."""

    @property
    def dim(self) -> int:
        """Vector size."""
        ...

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Return one L2-normalised float32 row per text."""
        ...


class VectorSource(Protocol):
    """The index the vector index reads and follows (``WorkspaceIndex`` is one)."""

    def files(self) -> list[Path]:
        """The indexed workspace files."""
        ...

    def holds(self, path: Path) -> bool:
        """True when :meth:`files` lists ``path`` (without listing them all)."""
        ...

    def file(self, path: Path) -> FileEntry | None:
        """The entry of one file."""
        ...

    def text_of(self, path: Path) -> str | None:
        """The text of one file."""
        ...

    def relative(self, path: Path) -> str:
        """The display path."""
        ...

    def is_denied(self, path: Path) -> bool:
        """True for secrets."""
        ...

    def on_change(self, listener: Callable[[Path], None]) -> Callable[[], None] | None:
        """Call ``listener(path)`` as a file's content changes or goes; return how to stop.

        The listener only notes the path (``WorkspaceIndex`` calls it with its lock
        released; another source may hold its own). A
        source that cannot report its changes returns None: it is looked over every
        ``poll_s`` instead."""
        ...

    def yield_to_foreground(self, stopped: Callable[[], bool]) -> None:
        """Wait while a request is being served (bounded; returns once ``stopped()``)."""
        ...


@dataclass(slots=True)
class VectorStats:
    """What the vector index holds and has done."""

    files: int = 0
    chunks: int = 0
    embedded: int = 0
    """Chunks embedded by this process (not from the cache, not reused)."""
    reused: int = 0
    """Chunks whose vector was kept (same embedded text) or read from the cache."""
    embed_seconds: float = 0.0
    syncs: int = 0
    pending: int = 0
    """Files still to embed in the pass under way."""
    missing: int = 0
    """Chunks a pass without embedding (``sync(embed=False)``) found without a vector."""
    matrix_bytes: int = 0
    error: str = ""
    model_seconds: float = 0.0
    sweep_seconds: float = 0.0
    """The last full pass's look at every file (embedding not counted)."""
    ann_chunks: int = 0
    """Keys in the approximate index (0: none; search is brute force)."""
    ann_builds: int = 0
    ann_build_seconds: float = 0.0
    """The last build of the approximate index."""
    ann_bytes: int = 0


_Plan = tuple[list[tuple[ChunkSpan, str]], dict[str, Matrix], list[int]]
"""A file's chunks (span, embedded text), the vectors known by key, the missing indexes."""


@dataclass(slots=True)
class _File:
    key: str
    rows: list[int] = field(default_factory=list)


def _file_key(source: VectorSource, path: Path) -> str | None:
    """The content hash the index has for ``path`` (open buffers: a hash of their text)."""
    entry = source.file(path)
    if entry is None:
        return None
    if entry.content_hash:
        return entry.content_hash
    text = source.text_of(path)
    return None if text is None else text_key(text)


def _lower_priority() -> None:
    """Run this thread (and llama.cpp's work on it) behind the foreground's."""
    with contextlib.suppress(AttributeError, OSError, PermissionError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)


class VectorIndex:
    """The workspace's chunks as a contiguous float32 matrix, kept current in the background.

    ``start()`` starts the worker: it loads the model, installs what the cache holds
    for unchanged files, embeds the rest, then waits for changes (:meth:`notify`, which
    a source reporting its changes calls itself) and embeds what changed, debounced.
    :meth:`search` never waits for the worker.
    """

    def __init__(
        self,
        source: VectorSource,
        embedding: Callable[[], Embedding],
        *,
        model_id: str,
        cache_dir: Path | None = None,
        poll_s: float | None = None,
        quiet_s: float = QUIET_S,
        max_delay_s: float = MAX_DELAY_S,
        max_chunks: int = 1_000_000,
        ann_min_chunks: int | None = None,
    ) -> None:
        self.source = source
        self.model_id = model_id
        self._factory = embedding
        self.model: Embedding | None = None
        self._query_model: Embedding | None = None
        self.quiet_s = quiet_s
        self.max_delay_s = max_delay_s
        self.max_chunks = max_chunks
        self.ann_min_chunks = ANN_MIN_CHUNKS if ann_min_chunks is None else ann_min_chunks
        """Live chunks from which search uses the approximate index."""
        self._store: VectorStore | None = None
        if cache_dir is not None:
            try:
                self._store = VectorStore(Path(cache_dir), model_id)
            except IndexError_ as exc:
                logger.warning("%s; vectors are not persisted", exc)
        self._lock = threading.Lock()
        """The matrix and the file table (held by a search)."""
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._n = 0
        self._alive = np.zeros(0, dtype=bool)
        self._refs: list[tuple[Path, ChunkSpan] | None] = []
        self._files: dict[Path, _File] = {}
        self._ann: Hnsw | None = None
        """The approximate index over the live rows (keys: rows), None below the threshold
        and while one is being built; changed under ``_lock`` only."""
        self._ann_removed = 0
        self._version = 0
        """Counts changes to the rows (a build started before one is not installed)."""
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pending_lock = threading.Lock()
        """What changed (``_dirty``, ``_full``): never held while anything else is taken,
        since the listener may run under a source's own lock."""
        self._dirty: set[Path] = set()
        self._full = True
        self._thread: threading.Thread | None = None
        self._unsubscribe = source.on_change(self._changed)
        self.poll_s = poll_s if poll_s is not None or self._unsubscribe else POLL_S
        """Seconds between full passes (None: never; the source reports its changes)."""
        self.ready = threading.Event()
        """Set after the first full pass (the model loaded, every file embedded)."""
        self.stats = VectorStats()

    # -- worker ------------------------------------------------------------------------

    def start(self, after: threading.Thread | None = None) -> threading.Thread:
        """Start the worker thread (after ``after``, e.g. the index's background scan)."""

        def run() -> None:
            _lower_priority()
            if after is not None:
                after.join()
            try:
                self._ensure_model()
                while not self._stop.is_set():
                    self.sync()
                    self.ready.set()
                    self._wait_for_changes()
            except LspAssistError as exc:
                self.stats.error = str(exc)
                logger.warning("vector index stopped: %s", exc)
            finally:
                self.ready.set()

        self._thread = threading.Thread(target=run, name="lsp-assist-vectors", daemon=True)
        self._thread.start()
        return self._thread

    def _wait_for_changes(self) -> None:
        """Return once changes came and settled (or a poll is due, or the index stops)."""
        poll = self.poll_s
        if poll is not None:  # looking over a large tree costs: at most 2% of the time
            poll = max(poll, 50 * self.stats.sweep_seconds)
        told = self._wake.wait(poll)
        if self._stop.is_set():
            return
        if not told:  # nobody said what changed: look at every file
            with self._pending_lock:
                self._full = True
            return
        first = time.monotonic()
        while True:  # debounce: until quiet_s without news, at most max_delay_s in all
            self._wake.clear()
            left = first + self.max_delay_s - time.monotonic()
            if left <= 0 or not self._wake.wait(min(self.quiet_s, left)) or self._stop.is_set():
                return

    def _changed(self, path: Path) -> None:
        """The source's listener: one file's content changed or went."""
        with self._pending_lock:
            self._dirty.add(path)
        self._wake.set()

    def notify(self, paths: Iterable[Path] | None = None) -> None:
        """Say that ``paths`` (None: anything) changed; the worker looks soon."""
        with self._pending_lock:
            if paths is None:
                self._full = True
            else:
                self._dirty.update(paths)
        self._wake.set()

    def stop(self) -> None:
        """Stop the worker and close the cache."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self._stop.set()
        self._wake.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        if self._store is not None:
            self._store.close()
        # what the factory made is the index's: the query context first (it shares the
        # weights of the other)
        closed: list[object] = []
        for model in (self._query_model, self.model):
            close = getattr(model, "close", None)
            if callable(close) and not any(model is c for c in closed):
                close()
                closed.append(model)
        self._query_model = self.model = None

    def _ensure_model(self) -> Embedding:
        if self.model is None:
            started = time.perf_counter()
            model = self._factory()
            # queries get a context of their own where the model offers one: a query
            # never waits behind a background batch
            fork = getattr(model, "fork", None)
            self._query_model = fork() if callable(fork) else model
            self.model = model
            self.stats.model_seconds = time.perf_counter() - started
        return self.model

    def sync(self, *, embed: bool = True, progress: Progress | None = None) -> VectorStats:
        """Embed what changed since the last pass (everything on a full pass); blocking.

        ``embed=False`` installs only what the cache holds and counts the chunks left
        without a vector (``stats.missing``); those files are looked at again next pass.
        ``progress`` is told as each file is embedded."""
        model = self._ensure_model()
        with self._pending_lock:
            full, dirty = self._full, self._dirty
            self._full, self._dirty = False, set()
        denied = self.source.is_denied  # a path resolved: only for the files looked at
        if full:
            listed = {p for p in self.source.files() if not denied(p)}
            gone = [p for p in self._files if p not in listed]
        else:
            holds = self.source.holds  # not files(): it lists them all, 0.2 s at 50k
            listed = {p for p in dirty if holds(p) and not denied(p)}
            gone = [p for p in dirty if p not in listed]
        paths = sorted(listed)
        stored = self._store.load() if self._store is not None and self.stats.syncs == 0 else {}
        began = time.perf_counter()
        todo: list[tuple[Path, str]] = []
        for path in paths:
            key = _file_key(self.source, path)
            if key is None:
                gone.append(path)
                continue
            known = self._files.get(path)
            if known is not None and known.key == key:
                continue
            cached = stored.get(str(path))
            if cached is not None and cached[0] == key and cached[2].shape[1:] == (model.dim,):
                self._install(path, key, cached[1], cached[2].astype(np.float32))
                self.stats.reused += len(cached[1])
                continue
            todo.append((path, key))
        if full:
            self.stats.sweep_seconds = time.perf_counter() - began
        self._remove(gone)
        if self._store is not None and gone:
            self._store.save([], [str(p) for p in gone])
        if not embed:
            plans = (self._plan(path, stored.get(str(path))) for path, _ in todo)
            self.stats.missing = sum(len(plan[2]) for plan in plans if plan is not None)
            self.stats.pending = len(todo)
            if todo:  # still to embed: the next pass looks at them again
                self.notify(path for path, _ in todo)
            self.stats.syncs += 1
            self._maintain_ann()
            return self.stats
        self.stats.pending = len(todo)
        rows: list[tuple[str, str, list[ChunkSpan], Matrix]] = []
        for done, (path, key) in enumerate(todo, 1):
            if self._stop.is_set():
                break
            finished = self._embed_file(model, path, key, stored.get(str(path)))
            self.stats.pending -= 1
            if progress is not None:
                progress(done, len(todo), self.stats.embedded)
            if finished is not None and self._store is not None:
                rows.append((str(path), key, finished[0], finished[1]))
                if len(rows) >= SAVE_BATCH:
                    self._store.save(rows, [])
                    rows = []
        if self._store is not None and rows:
            self._store.save(rows, [])
        self.stats.missing = 0
        self.stats.syncs += 1
        self._maintain_ann()
        return self.stats

    def _plan(self, path: Path, cached: Stored | None) -> _Plan | None:
        """Return a file's chunks, the vectors known for their keys, and which are missing."""
        text = self.source.text_of(path)
        entry = self.source.file(path)
        if text is None or entry is None:
            return None
        chunks = chunk_file(self.source.relative(path), entry.symbols, text)
        known: dict[str, Matrix] = {}
        with self._lock:
            old = self._files.get(path)
            if old is not None:
                for row in old.rows:
                    ref = self._refs[row]
                    if ref is not None:
                        known[ref[1].key] = self._matrix[row].copy()
        if cached is not None:
            for span, vec in zip(cached[1], cached[2], strict=False):
                known.setdefault(span.key, vec.astype(np.float32))
        missing = [i for i, (span, _) in enumerate(chunks) if span.key not in known]
        return chunks, known, missing

    def _embed_file(
        self,
        model: Embedding,
        path: Path,
        key: str,
        cached: Stored | None,
    ) -> tuple[list[ChunkSpan], Matrix] | None:
        plan = self._plan(path, cached)
        if plan is None:
            self._remove([path])
            return None
        chunks, known, missing = plan
        vectors = np.zeros((len(chunks), model.dim), dtype=np.float32)
        for i, (span, _) in enumerate(chunks):
            if span.key in known:
                vectors[i] = known[span.key]
        self.stats.reused += len(chunks) - len(missing)
        for start in range(0, len(missing), BATCH):
            self._wait_foreground()
            group = missing[start : start + BATCH]
            began = time.perf_counter()
            vectors[group] = model.embed([chunks[i][1] for i in group])
            self.stats.embed_seconds += time.perf_counter() - began
            self.stats.embedded += len(group)
        spans = [span for span, _ in chunks]
        self._install(path, key, spans, vectors)
        return spans, vectors

    def _wait_foreground(self) -> None:
        """Let a request being served go first (the source's gate: bounded, ends on stop)."""
        self.source.yield_to_foreground(self._stop.is_set)

    # -- the matrix --------------------------------------------------------------------

    def _remove(self, paths: Iterable[Path]) -> None:
        with self._lock:
            for path in paths:
                old = self._files.pop(path, None)
                if old is None:
                    continue
                for row in old.rows:
                    self._alive[row] = False
                    self._refs[row] = None
                self._ann_forget(old.rows)
            self._update_counts()

    def _install(self, path: Path, key: str, spans: list[ChunkSpan], vectors: Matrix) -> None:
        with self._lock:
            old = self._files.pop(path, None)
            if old is not None:
                for row in old.rows:
                    self._alive[row] = False
                    self._refs[row] = None
                self._ann_forget(old.rows)
            n = len(spans)
            if self.stats.chunks + n > self.max_chunks:
                logger.warning("vector index full (%d chunks): %s left out", self.max_chunks, path)
                self._files[path] = _File(key, [])  # not tried again until it changes
                self._update_counts()
                return
            self._reserve(n, vectors.shape[1] if n else self._matrix.shape[1])
            rows = list(range(self._n, self._n + n))
            if n:
                self._matrix[self._n : self._n + n] = vectors
                self._alive[self._n : self._n + n] = True
                self._refs.extend((path, span) for span in spans)
                if self._ann is not None:
                    self._ann.add(np.asarray(rows, dtype=np.int64), vectors)
                self._n += n
            self._files[path] = _File(key, rows)
            self._update_counts()

    def _reserve(self, n: int, dim: int) -> None:
        """Make room for ``n`` more rows: compact when a quarter is dead, else grow x2."""
        if self._matrix.shape[1] != dim and self._n == 0:
            self._matrix = np.zeros((0, dim), dtype=np.float32)
            self._ann = None
        if self._n + n <= self._matrix.shape[0]:
            return
        live = np.flatnonzero(self._alive[: self._n])
        if len(live) < 0.75 * self._n:
            # the rows move: the approximate index's keys no longer name them (rebuilt
            # at the end of the pass; brute force until then)
            self._ann = None
            self._version += 1
            remap = {int(old): new for new, old in enumerate(live)}
            self._matrix[: len(live)] = self._matrix[live]
            self._alive[:] = False
            self._alive[: len(live)] = True
            self._refs = [self._refs[int(i)] for i in live]
            for f in self._files.values():
                f.rows = [remap[r] for r in f.rows]
            self._n = len(live)
            if self._n + n <= self._matrix.shape[0]:
                return
        cap = max(1024, 2 * (self._n + n))
        matrix = np.zeros((cap, dim), dtype=np.float32)
        matrix[: self._n] = self._matrix[: self._n]
        alive = np.zeros(cap, dtype=bool)
        alive[: self._n] = self._alive[: self._n]
        self._matrix, self._alive = matrix, alive

    def _update_counts(self) -> None:
        self._version += 1
        self.stats.files = len(self._files)
        self.stats.chunks = int(self._alive[: self._n].sum())
        self.stats.matrix_bytes = int(self._matrix.nbytes)
        self.stats.ann_chunks = len(self._ann) if self._ann is not None else 0

    # -- the approximate index -----------------------------------------------------------

    def _ann_forget(self, rows: Sequence[int]) -> None:
        """Remove rows from the approximate index (under ``_lock``)."""
        if self._ann is not None and rows:
            self._ann.remove(rows)
            self._ann_removed += len(rows)

    def _maintain_ann(self) -> None:
        """Build, rebuild or drop the approximate index as the live count asks (worker)."""
        live = self.stats.chunks
        with self._lock:
            ann = self._ann
            if ann is not None and live < ANN_DROP_FRACTION * self.ann_min_chunks:
                self._ann = None
                self._update_counts()
                return
            stale = ann is not None and self._ann_removed > ANN_REBUILD_REMOVED * len(ann)
        if live >= self.ann_min_chunks and (ann is None or stale):
            self.build_ann()

    def build_ann(self) -> bool:
        """Build the approximate index over the live rows (blocking; the worker calls it).

        Search is brute force until it is installed. Returns False when the rows changed
        meanwhile or the index stopped (nothing installed)."""
        with self._lock:
            self._ann = None
            self._update_counts()
            version = self._version
            rows = np.flatnonzero(self._alive[: self._n]).astype(np.int64)
            dim = int(self._matrix.shape[1])
        began = time.perf_counter()
        index = Hnsw(dim, capacity=max(1024, len(rows) + len(rows) // 4))
        for start in range(0, len(rows), ANN_BUILD_BATCH):
            if self._stop.is_set():
                return False
            self._wait_foreground()
            batch = rows[start : start + ANN_BUILD_BATCH]
            with self._lock:
                if self._version != version:
                    return False
                block = self._matrix[batch.astype(np.int64)]
            index.add(batch, block)
        with self._lock:
            if self._version != version:
                return False
            self._ann = index
            self._ann_removed = 0
            self.stats.ann_builds += 1
            self.stats.ann_build_seconds = time.perf_counter() - began
            self.stats.ann_bytes = index.memory_bytes
            self._update_counts()
        return True

    # -- queries -----------------------------------------------------------------------

    def embed_query(self, text: str) -> Matrix | None:
        """Return the query's vector (None before the model is loaded)."""
        model = self._query_model
        if model is None:
            return None
        vector: Matrix = model.embed([text])[0]
        return vector

    def search(
        self,
        query: Matrix,
        *,
        limit: int,
        threshold: float,
        skip: Callable[[Path, ChunkSpan], bool] | None = None,
    ) -> list[VectorHit]:
        """Return up to ``limit`` chunks with cosine >= ``threshold``, best first."""
        with self._lock:
            n = self._n
            if n == 0 or self._matrix.shape[1] != query.shape[0]:
                return []
            if self._ann is not None:
                return self._search_ann(self._ann, query, limit, threshold, skip)
            return self._search_brute(query, limit, threshold, skip)

    def _search_brute(
        self,
        query: Matrix,
        limit: int,
        threshold: float,
        skip: Callable[[Path, ChunkSpan], bool] | None,
    ) -> list[VectorHit]:
        """Every live row scored (under ``_lock``)."""
        n = self._n
        # numpy's own loop, one thread: BLAS's threaded product waits for a core the
        # completion holds (12 ms instead of 0.2 at 4,000 rows with both cores busy)
        scores = np.einsum("ij,j->i", self._matrix[:n], query.astype(np.float32))
        scores[~self._alive[:n]] = -1.0
        above = np.flatnonzero(scores >= threshold)
        order = above[np.argsort(-scores[above], kind="stable")]
        hits: list[VectorHit] = []
        for row in order:
            ref = self._refs[int(row)]
            if ref is None or (skip is not None and skip(ref[0], ref[1])):
                continue
            hits.append(VectorHit(ref[0], ref[1], float(scores[row])))
            if len(hits) >= limit:
                break
        return hits

    def _search_ann(
        self,
        ann: Hnsw,
        query: Matrix,
        limit: int,
        threshold: float,
        skip: Callable[[Path, ChunkSpan], bool] | None,
    ) -> list[VectorHit]:
        """The approximate index's nearest rows, scored exactly (under ``_lock``).

        More neighbours are asked for (x4) while fewer than ``limit`` hits came and every
        candidate still passed the threshold (a skipped file's chunks, a dense region)."""
        q = query.astype(np.float32)
        size = len(ann)
        k = ANN_CANDIDATES
        while True:
            count = min(k, size)
            if count == 0:
                return []
            rows = ann.search(q, count)
            rows = rows[(rows >= 0) & (rows < self._n)]
            rows = rows[self._alive[rows]]
            scores = np.einsum("ij,j->i", self._matrix[rows], q)
            order = np.lexsort((rows, -scores))
            hits: list[VectorHit] = []
            for i in order:
                if scores[i] < threshold:
                    break
                ref = self._refs[int(rows[i])]
                if ref is None or (skip is not None and skip(ref[0], ref[1])):
                    continue
                hits.append(VectorHit(ref[0], ref[1], float(scores[i])))
                if len(hits) >= limit:
                    return hits
            all_pass = len(rows) > 0 and float(scores.min()) >= threshold
            if not all_pass or count >= size or k >= ANN_MAX_CANDIDATES:
                return hits
            k *= 4

    def chunks_of(self, path: Path) -> list[ChunkSpan]:
        """Return the chunks held for ``path`` (tests, explain)."""
        with self._lock:
            f = self._files.get(path)
            refs = [self._refs[r] for r in f.rows] if f is not None else []
        return [r[1] for r in refs if r is not None]
