"""Early answers: the suggestion's start goes to the editor once ``answerAfterMs`` has passed.

The embedded model decodes ~40 tokens/s on a 2-core CPU, so a whole 12-token line takes
~300 ms after its first token. Rather than keep the editor waiting for all of it, the
engine streams the model's text into an :class:`EarlyAnswer`: once ``answerAfterMs``
(from the request's arrival) has passed and the post-processed text is not empty, the
scheduler's callback gets that much as the answer, and decoding goes on. Every later
piece updates the type-through cache entry (same key, longer text), so the keystrokes
that follow the suggestion are served the longer text without the model, and the
scheduler announces the whole suggestion when it is done (``lspAssist/suggestionReady``,
docs/serving.md "Early answers"). A newer request that misses the cache cancels the
rest, as it cancels any running request.

With kept lines (serving/kept.py) the generation goes on past the shown line: the answer
then comes at the shown line's end at the latest, whatever ``answerAfterMs``, and the
lines written after it join the entry's kept lines as they grow.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from lsp_assist.serving.kept import KeptLines
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.typethrough import EntryKey, TypeThrough


class EarlyAnswer:
    """The ``on_text`` callback of one generation: answers early, then keeps the cache fed."""

    def __init__(
        self,
        query: CompletionQuery,
        outcome: CompletionOutcome,
        *,
        on_answer: Callable[[CompletionOutcome], None],
        after_s: float,
        clean: Callable[[str], str],
        typethrough: TypeThrough,
        key: EntryKey,
        hold: Callable[[], bool] | None = None,
        kept: KeptLines | None = None,
        line_end: Callable[[str], int] | None = None,
    ) -> None:
        self.query = query
        self.outcome = outcome
        self.on_answer = on_answer
        """The scheduler's callback (on the model thread): the early answer goes there."""
        self.after_s = after_s
        self.clean = clean
        self.typethrough = typethrough
        self.key = key
        """The type-through entry of the suggestion (hashed once, grown as it is written)."""
        self.hold = hold
        """While it returns True nothing is answered yet (the confidence gate)."""
        self.keep = kept
        """Set when the generation goes on past the shown line (its lines kept)."""
        self.line_end = line_end or (lambda raw: raw.find("\n"))
        """Where the shown line of the raw text ends (-1: not yet)."""
        self.kept = ""
        """The kept lines put in the cache so far (after ``shown``)."""
        self.line_told = False
        """True once the shown line was answered whole (with kept lines: before they end)."""
        self.raw = ""
        self.first_text_at: float | None = None
        self.answered_at: float | None = None
        self.shown = ""
        """The last post-processed text put in the cache (the answer, then longer)."""
        self.answer = ""
        """The text answered early: what the editor shows at this place."""

    def __call__(self, piece: str) -> None:
        """Take one streamed piece of the model's text (on the model thread)."""
        now = time.perf_counter()
        if self.first_text_at is None:
            self.first_text_at = now
        self.raw += piece
        line_done = self.keep is not None and self.line_end(self.raw) >= 0
        if (
            self.answered_at is None
            and now - self.query.received_at < self.after_s
            and not line_done
        ):
            return
        text = self.clean(self.raw)
        kept = self.kept
        if line_done and self.keep is not None:
            kept = self.keep(self.raw, text, whole=False, writing=True)
        if not text:
            return
        if self.answered_at is not None and not text.startswith(self.answer):
            # Post-processing the longer text changed the start the editor shows (cut it
            # back): the cache keeps answering from that start until the whole is known,
            # never with a start the user did not see at this place (issue 24).
            return
        if self.answered_at is None and self.hold is not None and self.hold():
            return
        if text != self.shown or kept != self.kept:
            self.typethrough.grow(self.key, text, kept)
            self.shown, self.kept = text, kept
        if self.answered_at is None:
            self._answer(text, now)
        elif line_done and not self.line_told:
            # the shown line is whole while the kept lines are still being written: the
            # editor that shows its start hears of it now, not when the generation ends
            self.line_told = True
            if text != self.answer:
                self.on_answer(self._outcome(text, now))

    def _answer(self, text: str, now: float) -> None:
        self.answered_at, self.answer = now, text
        self.line_told = self.line_end(self.raw) >= 0
        self.on_answer(self._outcome(text, now))

    def _outcome(self, text: str, now: float) -> CompletionOutcome:
        first = self.first_text_at if self.first_text_at is not None else now
        return dataclasses.replace(
            self.outcome,
            text=text,
            alternatives=(),
            answered_early=True,
            ttft_ms=(first - self.query.received_at) * 1000,
            latency_ms=(now - self.query.received_at) * 1000,
        )
