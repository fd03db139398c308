"""The import graph: which files import which, kept current as entries change.

Owns :class:`ImportGraph`: the live :class:`~lsp_assist.index.resolve.Resolver` (it
follows every file-set change at once), each file's outgoing edges and the reverse
``importers`` table, the full rebuild (needed when a new file may satisfy other files'
imports) and the thread that runs it once background work was started. The graph
guards itself with a lock of its own (only the symbol table's is taken under it; the
index may hold its lock when it calls in). The rebuild resolves per file under that
lock and looks at the foreground gate between chunks of :data:`GRAPH_CHUNK` files.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from lsp_assist.documents.document import language_for_path
from lsp_assist.errors import IndexError_
from lsp_assist.index.gate import ForegroundGate
from lsp_assist.index.model import Import
from lsp_assist.index.packed import FileSets, PackedEntry, imports_of
from lsp_assist.index.resolve import Resolver
from lsp_assist.index.symbols import Stored, SymbolTable

logger = logging.getLogger(__name__)

GRAPH_CHUNK = 200
"""Files whose imports the graph rebuild resolves between two looks at the foreground gate."""


class ImportGraph:
    """The import edges of the indexed files; thread-safe under a private lock.

    Each installed file's own edges are re-resolved at once; edges from other files that
    a new file would now satisfy wait for a rebuild (``exact`` False), which never runs on
    a request's thread once ``background`` is set."""

    def __init__(
        self,
        roots: list[Path],
        table: SymbolTable,
        gate: ForegroundGate,
        stopped: Callable[[], bool],
    ) -> None:
        self._lock = threading.Lock()
        self._table = table
        self._gate = gate
        self._is_stopped = stopped
        self.resolver = Resolver(roots, (), self._language_of)
        self.importers: FileSets[Path] = FileSets()
        self._outgoing: dict[Path, tuple[Path, ...]] = {}
        self.exact = True
        self.builds = 0
        """Rebuilds started, in all."""
        self.background = False
        """Set once background work owns the graph: rebuilds run on a thread of their own."""
        self.scanning = False
        """A scan is running: a blocking scan's graph is rebuilt when first asked for."""
        self._generation = 0
        self._touched: set[Path] | None = None
        self._thread: threading.Thread | None = None
        self._build_lock = threading.Lock()

    def _language_of(self, path: Path) -> str | None:
        entry = self._table.get(path)
        return entry.language if entry is not None else language_for_path(path)

    def resolve(self, from_path: Path, imp: Import) -> Path | None:
        """Return the workspace file an import of ``from_path`` resolves to, or None."""
        with self._lock:
            return self.resolver.resolve(from_path, imp)

    def importers_of(self, path: Path) -> list[Path]:
        """Return the files that import ``path`` (rebuilt first when not in the background)."""
        if not self.background and not self.exact:
            with self._build_lock:
                for _ in range(3):
                    if self.exact or self.rebuild():
                        break
        with self._lock:
            return sorted(self.importers.files(path))

    def start_background(self) -> None:
        """From now on rebuild on a thread of its own, never on a lookup's thread."""
        with self._lock:
            self.background = True

    def scan_started(self) -> None:
        """A scan runs: new files' edges wait for the rebuild after it."""
        with self._lock:
            self.scanning = True

    def scan_ended(self) -> None:
        """The scan ended: start the rebuild it made necessary (in the background)."""
        with self._lock:
            self.scanning = False
            self._schedule()

    def installed(self, path: Path, old: Stored | None, stored: Stored | None) -> None:
        """Follow one replaced entry (None: absent)."""
        with self._lock:
            self._installed(path, old, stored)

    def _installed(self, path: Path, old: Stored | None, stored: Stored | None) -> None:
        if (old is None) != (stored is None):
            self._generation += 1
            if stored is None:
                self.resolver.discard(path)
            else:
                self.resolver.add(path)
            if self.background or not self.scanning:
                self._update_edges(path, stored)
            # other files' imports may resolve differently now
            self.exact = False
            self._schedule()
        elif old is not None and stored is not None and not _same_imports(old, stored):
            self._update_edges(path, stored)

    def _targets(self, src: Path, imports: list[Import]) -> tuple[Path, ...]:
        """Return the files ``src``'s imports resolve to; holds the lock."""
        found: set[Path] = set()
        for imp in imports:
            found.update(self.resolver.resolve_all(src, imp))
        found.discard(src)
        return tuple(found)

    def _update_edges(self, path: Path, stored: Stored | None) -> None:
        """Re-resolve one file's imports; holds the lock."""
        importers = self.importers
        for target in self._outgoing.pop(path, ()):
            importers.discard(target, path)
        targets = self._targets(path, imports_of(stored)) if stored is not None else ()
        if targets:
            self._outgoing[path] = targets
            for target in targets:
                importers.add(target, path)
        if self._touched is not None:
            self._touched.add(path)

    def rebuild(self) -> bool:
        """Resolve every file's imports afresh (the lock taken per file, the foreground gate
        looked at between chunks) and publish the graph; True when it is exact."""
        with self._lock:
            items = self._table.items()
            generation = self._generation
            self._touched = set()
            self.builds += 1
        importers: FileSets[Path] = FileSets()
        outgoing: dict[Path, tuple[Path, ...]] = {}
        for number, (src, stored) in enumerate(items):
            if number % GRAPH_CHUNK == 0:
                self._gate.wait(self._is_stopped)
                if self._is_stopped():
                    with self._lock:
                        self._touched = None
                    return False
            imports = imports_of(stored)
            if not imports:
                continue
            with self._lock:
                targets = self._targets(src, imports)
            if targets:
                outgoing[src] = targets
                for target in targets:
                    importers.add(target, src)
        with self._lock:
            touched = self._touched or set()
            self._touched = None
            self.importers, self._outgoing = importers, outgoing
            for src in touched:  # installed while the rebuild ran: their edges as they are now
                self._update_edges(src, self._table.get(src))
            self.exact = generation == self._generation
            return self.exact

    def wait(self, timeout: float) -> bool:
        """Wait for a running rebuild to end; True when the graph is exact."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                thread = self._thread
                if thread is None or self.exact:
                    return self.exact
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            thread.join(min(left, 0.05))

    def _schedule(self) -> None:
        """Start the rebuild thread when background work owns the graph; holds the lock."""
        if not self.background or self.exact or self.scanning or self._is_stopped():
            return
        if self._thread is not None and self._thread.is_alive():
            return  # it checks exactness again before it ends
        self._thread = threading.Thread(target=self._run, name="index-graph", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            with self._build_lock:
                for _ in range(5):
                    if self._is_stopped() or self.rebuild():
                        break
        except IndexError_:
            logger.exception("import graph rebuild failed")
        finally:
            with self._lock:
                self._thread = None


def _same_imports(old: Stored, new: Stored) -> bool:
    if isinstance(old, PackedEntry) and isinstance(new, PackedEntry):
        return old.imports_blob == new.imports_blob
    return imports_of(old) == imports_of(new)
