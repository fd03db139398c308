"""Next edits: the edit the user will make next, proposed from their latest one.

Owns :class:`NextEdits`, the session's next-edit source. The symbolic source: for an
open document it reads the newest burst of the document's edit history
(``Buffers.history``), classifies it against the syntax tree of the buffer (the index's
tree when it was parsed from this text, else a fresh parse) and returns the follow-ups
as :class:`ProposedEdit` values in code point positions, the nearest to the cursor
first, then those in the other open files. The model source (``nextEdit`` = ``model``
or ``both``): :meth:`NextEdits.propose` also hands back a
:class:`~lsp_assist.serving.next_edit_model.RewriteJob`, which the caller runs on the
model thread (:meth:`NextEdits.rewrite`, through ``Scheduler.rewrite``) and folds in on
the event loop (:meth:`NextEdits.merge`). A request whose version is not the buffer's,
or whose buffer changed while the model wrote, gets nothing (never an edit against the
wrong text). Once one of a rewrite's edits is accepted, the next request answers the
rest of that rewrite, shifted, without a new model call, as long as the buffer is what
the accept made it. ``nextEdit`` = ``off`` answers nothing. Everything but :meth:`rewrite`
runs on the thread that applies the edits (the event loop).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.backends import CancelToken
from lsp_assist.config import Bounded
from lsp_assist.context import LineEdit
from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.index import FollowUp, UserEdit, classify, follow_ups, follow_ups_elsewhere
from lsp_assist.serving.next_edit_model import ModelRewriter, RewriteJob, RewriteOutcome
from lsp_assist.serving.session import Session

__all__ = ["NextEditAnswer", "NextEdits", "ProposedEdit"]

MAX_EDITS = 50
"""Proposals in one answer."""
REMEMBERED = 64
"""Answered proposals kept for their accept command (oldest forgotten first)."""


@dataclass(frozen=True, slots=True)
class ProposedEdit:
    """One next edit: replace ``start``-``end`` of ``view`` (code points) with ``text``."""

    view: DocumentSnapshot
    """The buffer the edit was computed on (its uri, version and text)."""
    start: Position
    end: Position
    text: str
    kind: str
    reason: str
    """Why it is proposed (the explain output)."""
    id: str = ""
    """The accept command's argument."""


@dataclass(slots=True)
class NextEditAnswer:
    """A request's next edits, how long they took and, when there are none, why."""

    edits: list[ProposedEdit] = field(default_factory=list)
    elapsed_ms: float = 0.0
    source: str = "symbolic"
    note: str = ""
    edit: UserEdit | None = None
    """The user's edit as the tree read it (None: nothing to follow)."""
    job: RewriteJob | None = None
    """The model source's work, for ``model`` and ``both`` (None: nothing to rewrite)."""
    model: RewriteOutcome | None = None
    """What the model source did (after :meth:`NextEdits.merge`)."""


@dataclass(slots=True)
class NextEditCounters:
    """How many requests were answered, edits proposed, shown and accepted."""

    requests: int = 0
    stale: int = 0
    proposed: int = 0
    shown: int = 0
    accepted: int = 0
    rewrites: int = 0
    """Model rewrites run (``model`` and ``both``)."""
    rewrite_edits: int = 0
    """Edits the model source proposed."""


@dataclass(frozen=True, slots=True)
class _Carried:
    """The rest of a model rewrite after one of its edits was accepted.

    ``text`` is the buffer as the accepted edit left it; each edit is
    ``(start, end, text, reason)`` in code point offsets of that text."""

    uri: str
    text: str
    edits: tuple[tuple[int, int, str, str], ...]


def _carry(accepted: ProposedEdit, siblings: list[ProposedEdit]) -> _Carried:
    """What is left of ``siblings`` once ``accepted`` (one of them or not) is applied."""
    view = accepted.view
    a0, a1 = view.offset_at(accepted.start), view.offset_at(accepted.end)
    text = view.text[:a0] + accepted.text + view.text[a1:]
    shift = len(accepted.text) - (a1 - a0)
    kept: list[tuple[int, int, str, str]] = []
    for edit in siblings:
        if edit.id == accepted.id or _overlap(edit.start, edit.end, accepted.start, accepted.end):
            continue
        s0, s1 = view.offset_at(edit.start), view.offset_at(edit.end)
        if s1 <= a0:
            kept.append((s0, s1, edit.text, edit.reason))
        elif s0 >= a1:
            kept.append((s0 + shift, s1 + shift, edit.text, edit.reason))
    return _Carried(view.uri, text, tuple(kept))


def _column(line: str, byte_column: int) -> int:
    """The code point column of a byte column of ``line``."""
    if line.isascii():
        return min(byte_column, len(line))
    head = line.encode("utf-8", "surrogatepass")[:byte_column]
    return len(head.decode("utf-8", "ignore"))


def _position(view: DocumentSnapshot, point: tuple[int, int]) -> Position:
    row, byte_column = point
    return Position(row, _column(view.line(row), byte_column))


def _overlap(start: Position, end: Position, other_start: Position, other_end: Position) -> bool:
    """True when the spans share a character, or are the same place (two insertions)."""
    a, b = (start.line, start.column), (end.line, end.column)
    c, d = (other_start.line, other_start.column), (other_end.line, other_end.column)
    return (a < d and c < b) or (a, b) == (c, d)


def _module_name(path: Path) -> str:
    return path.parent.name if path.stem == "__init__" else path.stem


class NextEdits:
    """The next-edit source of one session (symbolic: from the syntax tree)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.counters = NextEditCounters()
        self._answered: OrderedDict[str, ProposedEdit] = OrderedDict()
        self._rewriter = ModelRewriter(session)
        self._model_edits: list[ProposedEdit] = []
        """The newest answer's edits from the model (their rest outlives an accept)."""
        self._carried: _Carried | None = None

    def bounds(self) -> dict[str, Bounded]:
        """The proposals kept for their accept command, and the model's carried ones."""
        where = "serving/next_edit.py {}"
        return {
            "next_edits.answered": Bounded(
                len(self._answered), REMEMBERED, "edits", where.format("REMEMBERED")
            ),
            "next_edits.carried": Bounded(
                len(self._model_edits), MAX_EDITS, "edits", where.format("MAX_EDITS")
            ),
        }

    @property
    def mode(self) -> str:
        """The ``nextEdit`` setting now: off, symbolic, model or both."""
        return self._session.settings.completion.next_edit

    def propose(self, uri: str, version: int | None, cursor: Position | None) -> NextEditAnswer:
        """The next edits for ``uri`` at ``version`` (None: any), nearest to ``cursor`` first."""
        began = time.perf_counter()
        answer = self._propose(uri, version, cursor)
        answer.elapsed_ms = (time.perf_counter() - began) * 1000
        self.counters.requests += 1
        self._remember(answer.edits)
        return answer

    def _remember(self, edits: list[ProposedEdit]) -> None:
        self.counters.proposed += len(edits)
        for edit in edits:
            self._answered[edit.id] = edit
        while len(self._answered) > REMEMBERED:
            self._answered.popitem(last=False)

    def _propose(self, uri: str, version: int | None, cursor: Position | None) -> NextEditAnswer:
        mode = self.mode
        if mode == "off":
            return NextEditAnswer(source="off", note="nextEdit is off")
        doc = self._session.buffers.get(uri)
        if doc is None:
            return NextEditAnswer(note=f"not open: {uri}")
        if version is not None and version != doc.version:
            self.counters.stale += 1
            return NextEditAnswer(note=f"stale: version {version}, the buffer is {doc.version}")
        answer = NextEditAnswer(source=mode)
        carried = self._carried_edits(doc.snapshot()) if mode != "symbolic" else []
        if mode != "symbolic" and not carried:
            answer.job = self._job(uri, cursor)
            if answer.job is None:
                answer.note = "no recent edit"
        if mode != "model":
            symbolic = self._symbolic(uri, cursor)
            answer.edits, answer.note, answer.edit = symbolic.edits, symbolic.note, symbolic.edit
        if carried:
            taken = [(e.start, e.end) for e in answer.edits if e.view.uri == uri]
            carried = [e for e in carried if not any(_overlap(e.start, e.end, *t) for t in taken)]
            self._model_edits = carried
            answer.edits = (answer.edits + carried)[:MAX_EDITS]
            answer.note = answer.note if answer.edits else "the rest of the last rewrite"
        return answer

    def _carried_edits(self, view: DocumentSnapshot) -> list[ProposedEdit]:
        """The rest of the model's last rewrite, when the buffer is as its accept left it.

        The rewrite proposed several edits at once; once one is accepted the others still
        hold (shifted by it), so they are answered without asking the model again. Any
        other change to the buffer drops them: the model then rewrites the new text."""
        carried, self._carried = self._carried, None
        if carried is None or carried.uri != view.uri or carried.text != view.text:
            return []
        found = [
            ProposedEdit(
                view,
                view.position_at_offset(start),
                view.position_at_offset(end),
                text,
                "model",
                reason,
                uuid.uuid4().hex,
            )
            for start, end, text, reason in carried.edits
        ]
        self.counters.rewrite_edits += len(found)
        return found

    def _job(self, uri: str, cursor: Position | None) -> RewriteJob | None:
        """The model source's work for this request (None: nothing to follow)."""
        buffers = self._session.buffers
        doc = buffers.get(uri)
        history = buffers.history.get(uri)
        if doc is None or history is None or not len(history):
            return None
        view = doc.snapshot()
        if buffers.oversized(view):
            return None
        if cursor is None:
            newest = history.last()
            assert newest is not None
            cursor = view.position_at_offset(newest.end)
        return RewriteJob(view, cursor, tuple(history.changes()))

    def current(self, job: RewriteJob) -> bool:
        """True while the buffer is still the one ``job`` was made for."""
        doc = self._session.buffers.get(job.view.uri)
        return doc is not None and doc.version == job.view.version

    def rewrite(self, job: RewriteJob, cancel: CancelToken) -> RewriteOutcome:
        """Run the model source's ``job`` (on the model thread: it blocks on the model)."""
        return self._rewriter.rewrite(job, cancel)

    def merge(self, answer: NextEditAnswer, outcome: RewriteOutcome) -> NextEditAnswer:
        """Fold the model's edits into ``answer`` (on the event loop, after :meth:`rewrite`)."""
        answer.model = outcome
        job = answer.job
        if job is None:
            return answer
        self.counters.rewrites += 1
        if not self.current(job):
            self.counters.stale += 1
            answer.edits, answer.note = [], "stale: the buffer changed while the model wrote"
            return answer
        where = f"lines {outcome.window[0] + 1}-{outcome.window[1]}"
        found = [self._from_model(job.view, e, where) for e in outcome.edits]
        taken = [(e.start, e.end) for e in answer.edits if e.view.uri == job.view.uri]
        found = [e for e in found if not any(_overlap(e.start, e.end, a, b) for a, b in taken)]
        line = job.cursor.line
        found.sort(key=lambda e: (abs(e.start.line - line), e.start.line < line))
        self.counters.rewrite_edits += len(found)
        self._remember(found)
        self._model_edits = found[:MAX_EDITS]
        answer.edits = (answer.edits + found)[:MAX_EDITS]
        if not answer.edits and outcome.note:
            answer.note = outcome.note
        return answer

    def _from_model(self, view: DocumentSnapshot, edit: LineEdit, where: str) -> ProposedEdit:
        return ProposedEdit(
            view,
            Position(edit.start_line, edit.start_column),
            Position(edit.end_line, edit.end_column),
            edit.text,
            "model",
            f"the model's rewrite of {where} after your last edit",
            uuid.uuid4().hex,
        )

    def _symbolic(self, uri: str, cursor: Position | None) -> NextEditAnswer:
        buffers = self._session.buffers
        doc = buffers.get(uri)
        assert doc is not None  # _propose checked it
        history = buffers.history.get(uri)
        change = history.last() if history is not None else None
        if change is None:
            return NextEditAnswer(note="no recent edit")
        view = doc.snapshot()
        if view.language_id != "python" or buffers.oversized(view):
            return NextEditAnswer(note=f"no symbolic next edits for {view.language_id}")
        src = view.text.encode("utf-8", "surrogatepass")
        start = view.byte_offset_at(view.position_at_offset(change.start))
        removed = change.removed.encode("utf-8", "surrogatepass")
        inserted = change.inserted.encode("utf-8", "surrogatepass")
        tree = self._tree(view)
        edit = classify("python", src, tree, start, removed, inserted)
        if edit is None:
            return NextEditAnswer(note="the last edit implies nothing elsewhere")
        here = [self._proposed(view, f) for f in follow_ups(edit, src, tree)]
        if cursor is not None:
            here.sort(key=lambda e: (abs(e.start.line - cursor.line), e.start.line < cursor.line))
        elsewhere = self._elsewhere(edit, view) if edit.module_level else []
        edits = (here + elsewhere)[:MAX_EDITS]
        return NextEditAnswer(edits, edit=edit)

    def _tree(self, view: DocumentSnapshot) -> Tree | None:
        index = self._session.index
        return index.tree_for(view.path, view.text) if index is not None else None

    def _elsewhere(self, edit: UserEdit, view: DocumentSnapshot) -> list[ProposedEdit]:
        found: list[ProposedEdit] = []
        module = _module_name(view.path)
        for doc in self._session.buffers:
            if (
                doc.uri == view.uri
                or doc.language_id != "python"
                or doc.uri not in (self._session.buffers.history)
            ):
                continue  # not Python, or a file refused (secrets): never read
            other = doc.snapshot()
            if self._session.buffers.oversized(other):
                continue
            src = other.text.encode("utf-8", "surrogatepass")
            for follow in follow_ups_elsewhere(edit, module, src, self._tree(other)):
                found.append(self._proposed(other, follow))
        return found

    def _proposed(self, view: DocumentSnapshot, follow: FollowUp) -> ProposedEdit:
        return ProposedEdit(
            view,
            _position(view, follow.start_point),
            _position(view, follow.end_point),
            follow.text,
            follow.kind,
            follow.reason,
            uuid.uuid4().hex,
        )

    def shown(self, edit_id: str) -> bool:
        """Note that the editor showed a proposal (True when it was one of ours)."""
        if edit_id in self._answered:
            self.counters.shown += 1
            return True
        return False

    def accept(self, edit_id: str) -> ProposedEdit | None:
        """Note that the editor applied a proposal; returns it (None: not one of ours)."""
        edit = self._answered.pop(edit_id, None)
        if edit is not None:
            self.counters.accepted += 1
            view = edit.view
            siblings = [
                e
                for e in self._model_edits
                if e.view.uri == view.uri and e.view.version == view.version and e.id != edit_id
            ]
            self._carried = _carry(edit, siblings) if siblings else None
        return edit
