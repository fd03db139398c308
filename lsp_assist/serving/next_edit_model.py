"""The model source of next edits: a window around the cursor rewritten by the model.

Owns :class:`RewriteJob` (what the event loop hands the model thread: the buffer as it
was, the cursor, the edit history's changes) and :class:`ModelRewriter`, which runs one
on the model thread: the window and the recent edits (context/rewrite.py), the related
definitions the context engine chose for the cursor, the prompt within the completion
token budget, one greedy generation with prompt-lookup drafting where the acceptance
tracker allows it (the rewrite mostly copies its input) that stops once the rewrite has
rejoined the window for a few lines after a change (context/rewrite_diff.py), and the
rewrite diffed against the window into the smallest edits. Edits that touch the user's
own newest edit are dropped (a rewrite that reverts it is noise), so are edits that put
back what one of the recent edits replaced, and so is a rewrite
that is mostly other code than the window's.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from functools import partial

from lsp_assist.backends import BackendUsage, CancelToken, GenerationRequest, time_caps
from lsp_assist.context import (
    RECENT_EDITS,
    LineEdit,
    Rejoin,
    choose_rewrite_format,
    edit_window,
    fit_rewrite_prompt,
    original_window,
    recent_edits,
    rewrite_prompt,
    smallest_edits,
)
from lsp_assist.documents import DocumentSnapshot, Position, TextChange
from lsp_assist.errors import LspAssistError
from lsp_assist.serving.adaptive_budget import choose
from lsp_assist.serving.session import Session

__all__ = ["ModelRewriter", "RewriteJob", "RewriteOutcome"]

log = logging.getLogger(__name__)

RELATED_CHUNKS = 3
"""Related definitions offered to the prompt (dropped first when over budget)."""
MIN_SIMILARITY = 0.6
"""A rewrite less similar to the window than this (difflib's ratio of the two texts) is
dropped: not a follow-up edit but other code."""
TIME_CAP_S = 20.0
"""The rewrite's least prompt and generation caps (a completion's are for one line at a
time; larger settings' caps, ``promptTimeoutMs`` and ``generationTimeoutMs``, win)."""
STOPS = ("<|file_sep|>", "<|endoftext|>", "<|im_end|>", "```")


@dataclass(frozen=True, slots=True)
class RewriteJob:
    """One model next-edit request, taken on the event loop."""

    view: DocumentSnapshot
    cursor: Position
    changes: tuple[TextChange, ...]
    """The document's edit history, oldest first (the newest implies the next edit)."""


@dataclass(kw_only=True)
class RewriteOutcome(BackendUsage):
    """What one rewrite proposed and what it cost (the backend's usage of its generation)."""

    edits: list[LineEdit] = field(default_factory=list)
    format: str = ""
    window: tuple[int, int] = (0, 0)
    """The window's first line and the line after it."""
    stop_reason: str = ""
    elapsed_ms: float = 0.0
    note: str = ""


def _offset_span(view: DocumentSnapshot, change: TextChange) -> tuple[Position, Position]:
    return view.position_at_offset(change.start), view.position_at_offset(change.end)


def _touches(edit: LineEdit, start: Position, end: Position) -> bool:
    """True when ``edit`` overlaps or borders the span ``start``-``end``."""
    return (edit.start_line, edit.start_column) <= (end.line, end.column) and (
        (start.line, start.column) <= (edit.end_line, edit.end_column)
    )


def _replaced(view: DocumentSnapshot, edit: LineEdit) -> str:
    """The text ``edit`` replaces."""
    lo = view.offset_at(Position(edit.start_line, edit.start_column))
    return view.text[lo : view.offset_at(Position(edit.end_line, edit.end_column))]


class ModelRewriter:
    """Runs rewrite jobs with the session's model (on the model thread only)."""

    def __init__(self, session: Session) -> None:
        self._session = session

    def _related(self, job: RewriteJob) -> list[tuple[str, str]]:
        """The related definitions the context engine picks for the cursor (path, code)."""
        engine = self._session.context_engine()
        if engine is None:
            return []
        try:
            items = engine.related_definitions(self._session.cursor_at(job.view, job.cursor))
        except LspAssistError as exc:
            log.debug("next edit: no related code: %s", exc)
            return []
        return [(item.source, item.text) for item in items if item.text][:RELATED_CHUNKS]

    def rewrite(self, job: RewriteJob, cancel: CancelToken) -> RewriteOutcome:
        """Rewrite the window around ``job.cursor``; the edits it implies (blocking)."""
        began = time.perf_counter()
        outcome = self._rewrite(job, cancel)
        outcome.elapsed_ms = (time.perf_counter() - began) * 1000
        log.info(
            "next edit: rewrite of lines %d-%d (%s): %d edits, %d prompt tokens (%d reused), "
            "%d written, %s, %.0f ms%s",
            outcome.window[0] + 1,
            outcome.window[1],
            outcome.format,
            len(outcome.edits),
            outcome.prompt_tokens,
            outcome.reused_tokens,
            outcome.output_tokens,
            outcome.stop_reason or "no generation",
            outcome.elapsed_ms,
            f": {outcome.note}" if outcome.note else "",
        )
        return outcome

    def _rewrite(self, job: RewriteJob, cancel: CancelToken) -> RewriteOutcome:
        session = self._session
        backend = session.load_backend()  # the one loaded, or loaded now (first request)
        if backend is None:
            return RewriteOutcome(note=session.model_error or "no model loaded")
        settings = session.settings
        view = job.view
        lines = view.text.split("\n")
        window = edit_window(lines, job.cursor.line)
        newest = job.changes[-1] if job.changes else None
        edits = recent_edits(view.text, job.changes)
        if not edits:
            return RewriteOutcome(note="no recent edit to follow")
        chosen = settings.completion.next_edit_format
        fmt = choose_rewrite_format(backend.info) if chosen == "auto" else chosen
        rel = session.index.relative(view.path) if session.index is not None else view.path.name
        build = partial(
            rewrite_prompt,
            fmt,
            rel,
            view.language_id or "",
            window,
            original_window(view.text, window, newest),
        )
        budget = choose(settings, session.adaptive).tokens
        last: list[list[int]] = [[]]

        def count(text: str) -> int:
            last[0] = backend.tokenize(text, special=True)  # the fit's last try is the prompt
            return len(last[0])

        fit_rewrite_prompt(build, count, budget, edits, self._related(job))
        tokens = last[0]
        rejoin = Rejoin(window.lines)
        caps = time_caps(settings.model)
        window_tokens = len(backend.tokenize(window.text))
        request = GenerationRequest(
            prompt_tokens=tokens,
            max_tokens=window_tokens + window_tokens // 2 + 16,
            stop=STOPS,
            stop_rule=rejoin,
            task_type="next_edit",
            cancel=cancel,
            prompt_timeout_s=max(TIME_CAP_S, caps.prompt_s),
            generation_timeout_s=max(TIME_CAP_S, caps.generation_s),
        )
        result = backend.generate(request)
        outcome = RewriteOutcome(
            format=fmt, window=(window.first, window.end), stop_reason=result.stop_reason
        )
        result.copy_usage(outcome)
        if result.cancelled:
            outcome.note = f"rewrite {result.stop_reason}"
            return outcome
        text = result.text
        rewritten = text.split("\n")
        if result.stop_reason == "rule":
            rewritten = rewritten[:-1] + list(rejoin.rest)
        elif text.endswith("\n"):
            rewritten.pop()
        elif result.stop_reason == "length":
            outcome.note = "the rewrite ran out of tokens"
            return outcome
        similarity = SequenceMatcher(None, window.text, "\n".join(rewritten) + "\n").ratio()
        if similarity < MIN_SIMILARITY:
            outcome.note = f"the rewrite changed the window too much (similarity {similarity:.2f})"
            return outcome
        found = smallest_edits(window, rewritten)
        if newest is not None:
            start, end = _offset_span(view, newest)
            found = [e for e in found if not _touches(e, start, end)]
        undone = {(c.inserted, c.removed) for c in job.changes[-RECENT_EDITS:]}
        found = [e for e in found if (_replaced(view, e), e.text) not in undone]
        outcome.edits = found
        if not found:
            outcome.note = "the model kept the window as it is"
        return outcome
