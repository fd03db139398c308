"""The remote backend's circuit breaker: stop calling a server that keeps failing.

After ``threshold`` consecutive failures the circuit opens and calls are refused at
once (:class:`~lsp_assist.errors.CircuitOpenError`, no network) for ``cooldown_s``;
then it is half-open: the next call goes through, and its outcome closes the circuit
(success) or opens it again at once (failure). What counts as a failure is the
caller's decision; the remote backend counts errors after retries, server tokenizer
failures and a server that sent no text within the prompt cap, never a cancel.
"""

from __future__ import annotations

import threading
import time

from lsp_assist.errors import CircuitOpenError


class CircuitBreaker:
    """Open after ``threshold`` consecutive failures; half-open after ``cooldown_s``."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 10.0) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.failures = 0
        self.opened_at: float | None = None
        self.times_opened = 0
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """'closed', 'open' or 'half-open'."""
        opened_at = self.opened_at
        if opened_at is None:
            return "closed"
        if time.monotonic() - opened_at >= self.cooldown_s:
            return "half-open"
        return "open"

    def check(self) -> None:
        """Raise CircuitOpenError while open."""
        opened_at = self.opened_at
        if opened_at is not None and self.state == "open":
            left = self.cooldown_s - (time.monotonic() - opened_at)
            raise CircuitOpenError(
                f"remote backend unavailable after {self.failures} failures; "
                f"retrying in {max(left, 0):.1f} s"
            )

    def success(self) -> None:
        """Close the circuit."""
        with self._lock:
            self.failures = 0
            self.opened_at = None

    def failure(self) -> None:
        """Count a failure; open (or re-open) the circuit at the threshold."""
        with self._lock:
            self.failures += 1
            half_open = self.opened_at is not None
            if half_open or self.failures >= self.threshold:
                if self.opened_at is None or half_open:
                    self.times_opened += 1
                self.opened_at = time.monotonic()
