"""Serving's value types: a completion request (:class:`CompletionQuery`) and its result.

:class:`CompletionOutcome` composes the backend's
:class:`~lsp_assist.backends.base.BackendUsage` (token counts, drafting, prefill and
decode) with the request's own :class:`~lsp_assist.telemetry.RequestTimes` (layers,
debounce, queue, context, engine, whole), each defined once, where the record sees it.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from lsp_assist.backends import BackendUsage
from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.telemetry import METRIC_FIELDS, RequestTimes

Change = tuple[Position | None, Position | None, str]
"""One content change: start, end (None, None for a full replacement), new text."""


@dataclass(frozen=True, kw_only=True)
class CompletionQuery:
    """A request for a suggestion at a position of a snapshot: a value, never changed.

    Built once where the request arrives (:meth:`at` converts the client's position),
    it carries the buffer as it was then. What the scheduler adds while it serves the
    request (the cancel flag, when it was queued, the early-answer callback) is the
    scheduler's own (``serving/scheduler.py``: ``_Ticket``), handed to
    ``CompletionEngine.complete`` beside the query.
    """

    snapshot: DocumentSnapshot
    """The buffer as it was when the request arrived, taken on the thread that applies
    edits (the event loop; the CLI's own thread): everything done for the request reads it."""
    line: int
    column: int
    """0-based column in code points."""
    trigger: str = "invoked"
    """invoked, automatic, or cli."""
    strategy: str | None = None
    task_type: str = "completion"
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    received_at: float = field(default_factory=time.perf_counter)
    """When the request arrived (``time.perf_counter``): where ttft_ms and latency_ms start."""
    want_alternatives: bool = False
    """Set by a client that cycles items, on an explicit request: the engine then asks
    for ``alternatives`` suggestions (the setting), never for an automatic trigger."""
    answer_early: bool = False
    """Set by a client that shows ghost text (inline completion): the scheduler may then
    answer with the suggestion's start (``answerAfterMs``, serving/early.py)."""

    @classmethod
    def at(
        cls,
        snapshot: DocumentSnapshot,
        lsp_line: int,
        lsp_char: int,
        encoding: str = "utf-16",
        *,
        trigger: str = "invoked",
        want_alternatives: bool = False,
        answer_early: bool = False,
    ) -> CompletionQuery:
        """The query at an LSP position of ``snapshot`` (``encoding`` units), converted once."""
        pos = snapshot.from_lsp(lsp_line, lsp_char, encoding)
        return cls(
            snapshot=snapshot,
            line=pos.line,
            column=pos.column,
            trigger=trigger,
            want_alternatives=want_alternatives,
            answer_early=answer_early,
        )

    @property
    def uri(self) -> str:
        """The document's URI (the snapshot's)."""
        return self.snapshot.uri

    @property
    def version(self) -> int:
        """The buffer version the request was made for (the snapshot's)."""
        return self.snapshot.version


@dataclass(kw_only=True)
class CompletionOutcome(RequestTimes, BackendUsage):
    """A suggestion (possibly empty) and what producing it cost (backend usage, request times)."""

    request_id: str
    text: str = ""
    line: int = 0
    column: int = 0
    version: int | None = None
    """The buffer version the suggestion was made for."""
    multiline: bool = False
    skipped: str = ""
    """Why no model call was made (automatic-trigger rules, stale version, no model)."""
    cache_hit: bool = False
    cancelled: bool = False
    error: str = ""
    strategy: str = ""
    alternatives: tuple[str, ...] = ()
    """Further suggestions after ``text``, post-processed, none empty or equal to another."""
    confidence: float | None = None
    """The mean log probability of the suggestion's first line's tokens (None: unknown;
    serving/confidence.py)."""

    @property
    def items(self) -> tuple[str, ...]:
        """Every suggestion in the order the editor cycles them: ``text`` first."""
        return (self.text, *self.alternatives) if self.text else ()

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by ``lsp-assist complete --json``."""
        times = {
            name: round(getattr(self, name), 2) for name in METRIC_FIELDS if name.endswith("_ms")
        }
        return {
            "request_id": self.request_id,
            "text": self.text,
            "alternatives": list(self.alternatives),
            "version": self.version,
            "multiline": self.multiline,
            "skipped": self.skipped,
            "cache_hit": self.cache_hit,
            "cancelled": self.cancelled,
            "error": self.error,
            "strategy": self.strategy,
            "prompt_tokens": self.prompt_tokens,
            "reused_tokens": self.reused_tokens,
            "output_tokens": self.output_tokens,
            **times,
            "layers": dict(self.layer_tokens),
            "draft": {
                "enabled": self.drafting,
                "proposed": self.draft_proposed,
                "accepted": self.draft_accepted,
            },
        }


@dataclass(frozen=True, kw_only=True)
class PrefillRecord:
    """One prefill: where its prompt was built, how long, and what it had to evaluate."""

    uri: str
    line: int
    column: int
    reason: str
    """``open`` (didOpen or the end of the model's load: the file's start) or ``cursor``
    (``lspAssist/didMoveCursor``: where the client says the cursor rests)."""
    prompt_tokens: int
    """The stable prefix's length: what a request at that position finds evaluated."""
    evaluated: int
    """Of those, how many the model evaluated (the rest were in its KV cache already)."""
    ms: float

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form of the status command's ``last_prefill``."""
        return {
            "uri": self.uri,
            "line": self.line,
            "column": self.column,
            "reason": self.reason,
            "prompt_tokens": self.prompt_tokens,
            "evaluated": self.evaluated,
            "ms": round(self.ms, 1),
        }
