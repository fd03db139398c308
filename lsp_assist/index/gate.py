"""The foreground gate: background index work waits while a request is being served.

Owns :class:`ForegroundGate`. A completion holds it (``hold()``) while it builds its
prompt and runs the model; the scan and the import-graph rebuild look at it between
files and wait while any holder is inside, at most :data:`MAX_YIELD_S` at a time, so
they always progress. Work on a holder's own thread never waits on itself.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

MAX_YIELD_S = 5.0
"""The longest background work waits for one foreground request before going on anyway."""


class _Holds(threading.local):
    """Per thread: how many foreground holds it is inside (it never waits on itself)."""

    count = 0


class ForegroundGate:
    """Counts the requests being served; background work waits for none to be inside."""

    def __init__(self) -> None:
        self.holders = 0
        """Holds in progress, on every thread."""
        self.paused_s = 0.0
        """Seconds background work has waited for foreground requests, in all."""
        self._cond = threading.Condition()
        self._held = _Holds()

    @contextlib.contextmanager
    def hold(self) -> Iterator[None]:
        """Hold off background work while the block runs (nests)."""
        with self._cond:
            self.holders += 1
        self._held.count += 1
        try:
            yield
        finally:
            self._held.count -= 1
            with self._cond:
                self.holders -= 1
                if not self.holders:
                    self._cond.notify_all()

    def wait(self, stopped: Callable[[], bool]) -> None:
        """Wait while a request is served elsewhere (at most ``MAX_YIELD_S``, or until
        ``stopped()``); returns at once on a holder's own thread."""
        if not self.holders or self._held.count:
            return
        started = time.monotonic()
        deadline = started + MAX_YIELD_S
        with self._cond:
            while self.holders and not stopped():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
        self.paused_s += time.monotonic() - started
