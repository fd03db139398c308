"""Watch: file-system events to index updates (watchdog), debounced, with a polling fallback.

Owns the watchdog observer, the debounce thread (events are coalesced for
:data:`QUIET_S` of quiet, at most :data:`MAX_DELAY_S` after the first one) and the
periodic rescan thread used when the observer cannot start (inotify limits).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

QUIET_S = 0.1
MAX_DELAY_S = 0.5
POLL_INTERVAL_S = 5.0


class Debouncer:
    """Collects changed paths and hands them over in batches from its own thread."""

    def __init__(self, apply: Callable[[dict[Path, bool]], None]) -> None:
        self._apply = apply
        self._pending: dict[Path, bool] = {}
        self._first = 0.0
        self._last = 0.0
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name="index-debounce", daemon=True)
        self._thread.start()

    def add(self, path: Path, is_dir: bool) -> None:
        """Record one changed path (``is_dir``: a folder event)."""
        with self._cond:
            now = time.monotonic()
            if not self._pending:
                self._first = now
            self._pending[path] = self._pending.get(path, False) or is_dir
            self._last = now
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    self._cond.wait()
                if self._stopped:
                    return
                now = time.monotonic()
                due = min(self._last + QUIET_S, self._first + MAX_DELAY_S)
                if now < due:
                    self._cond.wait(due - now)
                    continue
                batch = self._pending
                self._pending = {}
            try:
                self._apply(batch)
            except Exception:  # a failed update must not kill the watcher
                logger.exception("index update from file events failed")

    def stop(self) -> None:
        """Stop the thread (pending events are dropped)."""
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._thread.join(timeout=2)


def change_events() -> tuple[type[Any], ...]:
    """Return the watchdog event types the observer subscribes to: changes only.

    Watchdog's default mask also asks inotify for every open and every read-only close,
    so each file anyone reads in the tree (the scan itself, any Python importing the
    standard library) queues events; on a tree the size of ``Lib/`` the queue overflows,
    and watchdog answers an overflow by walking the whole tree again to re-add its
    watches, which opens every folder and overflows the queue again: a thread at full CPU
    that made every prefill 3-10x slower (docs/index.md, "Watching").
    """
    from watchdog import events

    return (
        events.FileCreatedEvent,
        events.FileModifiedEvent,
        events.FileDeletedEvent,
        events.FileMovedEvent,
        events.DirCreatedEvent,
        events.DirDeletedEvent,
        events.DirMovedEvent,
    )


def start_observer(roots: list[Path], sink: Callable[[Path, bool], None]) -> Any:
    """Start a watchdog observer on ``roots`` feeding ``sink``; raise OSError if it cannot."""
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers import Observer

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: FileSystemEvent) -> None:
            src = event.src_path
            sink(Path(src if isinstance(src, str) else src.decode()), bool(event.is_directory))
            dest = getattr(event, "dest_path", "")
            if dest:
                sink(
                    Path(dest if isinstance(dest, str) else dest.decode()), bool(event.is_directory)
                )

    observer = Observer()
    handler = Handler()
    for root in roots:
        observer.schedule(handler, str(root), recursive=True, event_filter=list(change_events()))
    observer.daemon = True
    observer.start()
    return observer


class Poller:
    """Calls ``rescan`` every ``interval`` seconds until stopped (the watcher fallback)."""

    def __init__(self, rescan: Callable[[], object], interval: float = POLL_INTERVAL_S) -> None:
        self._rescan = rescan
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="index-poll", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._rescan()
            except Exception:
                logger.exception("periodic index rescan failed")

    def stop(self) -> None:
        """Stop polling."""
        self._stop.set()
        self._thread.join(timeout=2)
