"""A completion request's triage: what it needs, decided once, where it arrives.

:meth:`CompletionEngine.triage <lsp_assist.serving.engine.CompletionEngine.triage>` runs
on the event loop (where the buffers and the index are updated) and answers with a
:class:`Triage`: **served** (the type-through cache had it), **wait** (the user typed
all of a suggestion still being written: wait for its next piece, then triage again),
**skipped** (a reason: too big, mid-word, text right of the cursor, a comment; decided
with the index's tree of the snapshot) or **model**. The scheduler maps the verdict to
its :class:`~lsp_assist.serving.scheduler.Arrival`; the model thread is handed the
triage and keeps only the stale check.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from tree_sitter import Tree

from lsp_assist.serving.model import CompletionOutcome
from lsp_assist.serving.typethrough import EntryKey


class Verdict(enum.Enum):
    """What a request needs."""

    SERVED = "served"
    """Answered from the type-through cache (``Triage.outcome``)."""
    WAIT = "wait"
    """The user typed all of a suggestion still being written (``Triage.key``)."""
    SKIPPED = "skipped"
    """Not worth a model call (``Triage.outcome`` says why)."""
    MODEL = "model"
    """Goes to the model (with ``Triage.tree``, the index's tree of the snapshot)."""


@dataclass(frozen=True, slots=True)
class Triage:
    """The verdict on one request, with what its next step needs."""

    verdict: Verdict
    outcome: CompletionOutcome | None = None
    """The answer of a served or skipped request."""
    key: EntryKey | None = None
    """The entry a waiting request waits on."""
    typed: int = 0
    """How much of that entry the user has typed (all it holds)."""
    tree: Tree | None = None
    """The index's syntax tree of the snapshot (None: it has moved on, or no language)."""
