"""Next edits: the edit the user will make next, proposed from their latest one.

Owns :class:`NextEdits`, the session's next-edit source: for an open document it reads
the newest burst of the document's edit history (``Buffers.history``), classifies it
against the syntax tree of the buffer (the index's tree when it was parsed from this
text, else a fresh parse) and returns the follow-ups as :class:`ProposedEdit` values
in code point positions, the nearest to the cursor first, then those in the other open
files. A request whose version is not the buffer's gets nothing (never an edit against
the wrong text). ``nextEdit`` = ``off`` answers nothing; ``model`` and ``both`` answer
like ``symbolic`` until the model source exists (:attr:`NextEditAnswer.note` says so).
Everything here runs on the thread that applies the edits (the event loop).
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.index import FollowUp, UserEdit, classify, follow_ups, follow_ups_elsewhere
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


@dataclass(slots=True)
class NextEditCounters:
    """How many requests were answered, edits proposed, shown and accepted."""

    requests: int = 0
    stale: int = 0
    proposed: int = 0
    shown: int = 0
    accepted: int = 0


def _column(line: str, byte_column: int) -> int:
    """The code point column of a byte column of ``line``."""
    if line.isascii():
        return min(byte_column, len(line))
    head = line.encode("utf-8", "surrogatepass")[:byte_column]
    return len(head.decode("utf-8", "ignore"))


def _position(view: DocumentSnapshot, point: tuple[int, int]) -> Position:
    row, byte_column = point
    return Position(row, _column(view.line(row), byte_column))


def _module_name(path: Path) -> str:
    return path.parent.name if path.stem == "__init__" else path.stem


class NextEdits:
    """The next-edit source of one session (symbolic: from the syntax tree)."""

    def __init__(self, session: Session) -> None:
        self._session = session
        self.counters = NextEditCounters()
        self._answered: OrderedDict[str, ProposedEdit] = OrderedDict()

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
        self.counters.proposed += len(answer.edits)
        for edit in answer.edits:
            self._answered[edit.id] = edit
        while len(self._answered) > REMEMBERED:
            self._answered.popitem(last=False)
        return answer

    def _propose(self, uri: str, version: int | None, cursor: Position | None) -> NextEditAnswer:
        mode = self.mode
        if mode == "off":
            return NextEditAnswer(source="off", note="nextEdit is off")
        note = "" if mode == "symbolic" else f"nextEdit={mode}: the model source is not built yet"
        buffers = self._session.buffers
        doc = buffers.get(uri)
        if doc is None:
            return NextEditAnswer(note=f"not open: {uri}")
        if version is not None and version != doc.version:
            self.counters.stale += 1
            return NextEditAnswer(note=f"stale: version {version}, the buffer is {doc.version}")
        history = buffers.history.get(uri)
        change = history.last() if history is not None else None
        if change is None:
            return NextEditAnswer(note=note or "no recent edit")
        view = doc.snapshot()
        if view.language_id != "python" or buffers.oversized(view):
            return NextEditAnswer(note=note or f"no symbolic next edits for {view.language_id}")
        src = view.text.encode("utf-8", "surrogatepass")
        start = view.byte_offset_at(view.position_at_offset(change.start))
        removed = change.removed.encode("utf-8", "surrogatepass")
        inserted = change.inserted.encode("utf-8", "surrogatepass")
        tree = self._tree(view)
        edit = classify("python", src, tree, start, removed, inserted)
        if edit is None:
            return NextEditAnswer(note=note or "the last edit implies nothing elsewhere")
        here = [self._proposed(view, f) for f in follow_ups(edit, src, tree)]
        if cursor is not None:
            here.sort(key=lambda e: (abs(e.start.line - cursor.line), e.start.line < cursor.line))
        elsewhere = self._elsewhere(edit, view) if edit.module_level else []
        edits = (here + elsewhere)[:MAX_EDITS]
        return NextEditAnswer(edits, note=note, edit=edit)

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
        return edit
