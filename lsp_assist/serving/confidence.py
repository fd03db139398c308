"""How sure the model was of a suggestion's first line: the signal of the confidence gate.

:class:`FirstLineConfidence` is fed, while the model writes, each token's log
probability (``GenerationRequest.on_logprob``) and the text it writes (``on_text``); it
keeps the mean log probability of the tokens up to the first line break after some
code. The gate (``confidenceThreshold``) keeps a suggestion whose mean is below the
threshold off the screen: a likely-wrong suggestion costs the user a look and a key
typed over it (noise), and the replay (docs/evaluation.md, "Acceptance replay") counts
that cost. A backend that gives no log probabilities (remote) is never gated.
"""

from __future__ import annotations

import math
import threading

GATE_OFF = -math.inf
"""The log-probability threshold at which nothing is gated (``confidenceThreshold`` 0)."""


class FirstLineConfidence:
    """The mean log probability of a suggestion's first line, fed while it is written.

    Fed on the model thread, read there and by the early answer (same thread); a lock
    keeps a read from another thread whole.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sum = 0.0
        self._count = 0
        self._text = ""
        self._closed = False

    def logprob(self, value: float) -> None:
        """Take one generated token's log probability (before its text)."""
        with self._lock:
            if not self._closed:
                self._sum += value
                self._count += 1

    def text(self, piece: str) -> None:
        """Take a piece of the generated text: a line break after code ends the first line."""
        with self._lock:
            if self._closed:
                return
            self._text += piece
            if "\n" in self._text.lstrip():
                self._closed = True

    @property
    def tokens(self) -> int:
        """Tokens counted so far."""
        with self._lock:
            return self._count

    def mean(self) -> float | None:
        """The mean log probability so far (None before the first token)."""
        with self._lock:
            return self._sum / self._count if self._count else None


def below(confidence: float | None, threshold: float) -> bool:
    """True when a known confidence is under ``threshold`` (the gate keeps it off screen)."""
    return confidence is not None and threshold > GATE_OFF and confidence < threshold
