"""Generated text as it grows: UTF-8 reassembly, stop strings, the stop rule, streaming.

Shared by the local and remote backends. Text is streamed to ``request.on_text`` as it
is produced, holding back any tail that could still become a stop string; the final
``text`` (cut at a stop string or where the stop rule says) is authoritative, since a
stop rule may cut earlier than text already streamed.
"""

from __future__ import annotations

import codecs
import logging

from lsp_assist.backends.base import GenerationRequest

logger = logging.getLogger(__name__)


class TextStream:
    """Incremental detokenization, stop strings, stop rule and streaming hold-back."""

    def __init__(self, request: GenerationRequest) -> None:
        self.request = request
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.text = ""
        self.emitted = 0
        self.cut: int | None = None
        self.reason = ""
        self.stops = [s for s in request.stop if s]

    def feed(self, piece: bytes) -> bool:
        """Add one token's bytes; return True when a stop string or the stop rule fired."""
        return self.feed_text(self.decoder.decode(piece))

    def feed_text(self, piece: str) -> bool:
        """Add decoded text; return True when a stop string or the stop rule fired."""
        before = len(self.text)
        self.text += piece
        if self.stops:
            longest = max(len(s) for s in self.stops)
            start = max(0, before - longest + 1)
            found = [i for s in self.stops if (i := self.text.find(s, start)) >= 0]
            if found:
                self.cut = min(found)
                self.reason = "stop"
                return True
        rule = self.request.stop_rule
        if rule is not None and len(self.text) > before:
            cut = rule(self.text)
            if cut is not None:
                self.cut = max(0, min(cut, len(self.text)))
                self.reason = "rule"
                return True
        self._emit(final=False)
        return False

    def _holdback(self) -> int:
        best = 0
        for s in self.stops:
            for k in range(min(len(s) - 1, len(self.text)), best, -1):
                if self.text.endswith(s[:k]):
                    best = k
                    break
        return best

    def _emit(self, *, final: bool) -> None:
        cb = self.request.on_text
        end = len(self.final_text) if final else len(self.text) - self._holdback()
        if cb is not None and end > self.emitted:
            try:
                cb(self.text[self.emitted : end])
            except Exception:
                logger.exception("on_text callback failed")
        self.emitted = max(self.emitted, end)

    @property
    def final_text(self) -> str:
        """The text up to the cut (if any)."""
        return self.text if self.cut is None else self.text[: self.cut]

    def finish(self) -> str:
        """Flush the decoder and stream what is left; return the final text."""
        if self.cut is None:
            self.text += self.decoder.decode(b"", final=True)
        self._emit(final=True)
        return self.final_text
