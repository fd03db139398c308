"""The progress bar a bench, an eval and HumanEval draw on stderr while their rows run."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """A progress bar on stderr (when stderr is not a terminal: a line per tenth done or
    per minute)."""

    def __init__(self, total: int, stream: TextIO | None = None) -> None:
        self.total = max(1, total)
        self.done = 0
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._tty = self.stream.isatty()
        self._last_tenth = -1
        self._last_line = time.monotonic()
        self.label = ""

    def step(self, label: str = "", count: int = 1) -> None:
        """Count ``count`` units of work done under ``label``."""
        self.done = min(self.total, self.done + count)
        self.label = label or self.label
        self.show()

    def show(self) -> None:
        """Draw the bar."""
        share = self.done / self.total
        elapsed = time.monotonic() - self.started
        eta = elapsed / share - elapsed if share > 0 else 0.0
        bar = "#" * int(share * 30)
        text = (
            f"[{bar:<30}] {self.done}/{self.total} {self.label:<28} "
            f"{elapsed / 60:4.1f} min, ~{eta / 60:.1f} min left"
        )
        if self._tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif int(share * 10) != self._last_tenth or time.monotonic() - self._last_line > 60:
            self._last_tenth = int(share * 10)
            self._last_line = time.monotonic()
            self.stream.write(text + "\n")
            self.stream.flush()

    def note(self, message: str) -> None:
        """Print a message above the bar."""
        self.stream.write(("\n" if self._tty else "") + message + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self._tty:
            self.stream.write("\n")
            self.stream.flush()
