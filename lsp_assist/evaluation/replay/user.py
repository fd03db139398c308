"""The acceptance replay's simulated user: what is on screen at a key, and what the user does.

:class:`Screen` keeps every :class:`Answer` and says what shows at a key moment: the
newest answer for the current buffer version that arrived before that moment, or else
the suggestion that showed at the previous key, shortened by what that key typed or
accepted when it matched (type-through: the same suggestion continued). Each shown
suggestion keeps the time it first appeared (``Shown.since``): the user can take it only
once it has been on screen for the reaction time (:func:`ready`), and typing through it
keeps that time. A newer answer that starts with what is on screen (an early answer's
line completed, a kept line the model goes on writing) is the same suggestion grown: the
part that was on screen keeps its time, and until the whole has been on screen for the
reaction time the user takes only the part that has, word by word (:func:`takeable`).
:func:`decide` is the user at a key moment: Tab when the suggestion is right in full,
word by word (Ctrl+Right) when a prefix of at least 4 characters ending at a word
boundary is right, else type the next key over it. No pygls, no model, no clock.
docs/evaluation.md, "Acceptance replay".
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from lsp_assist.evaluation.replay.tasks import keys_between, next_key
from lsp_assist.evaluation.suggester import Answer, KeyKind

MIN_WORD_PREFIX = 4
"""Characters a word-by-word acceptance must write at least."""
_WORD_STEP = re.compile(r"\s*(?:\w+|[^\w\s]+)")
"""One Ctrl+Right: whitespace, then a run of word characters or a run of other characters."""


@dataclass(slots=True)
class Shown:
    """A suggestion on screen: its text from the cursor now, and which distinct one it is."""

    id: int
    stages: list[tuple[float, str]]
    """What has been on screen since when, oldest and shortest first: (perf_counter time
    it appeared, that text from the cursor now), each a prefix of the next. One stage
    unless the suggestion grew; a type-through continuation, a word accepted or the same
    text answered again keeps the times."""
    version: int
    latency_ms: float
    """Visible latency when it first showed: arrival less the time of the key that made
    the version it answered."""
    answer: Answer | None = None
    """The answer on screen now (None: carried over from an earlier version by typing)."""

    @property
    def text(self) -> str:
        """What shows now, from the cursor."""
        return self.stages[-1][1]

    @property
    def since(self) -> float:
        """perf_counter time it first appeared on screen (its first answer's arrival)."""
        return self.stages[0][0]


@dataclass(slots=True)
class Distinct:
    """One distinct suggestion shown, as long as it stays on screen."""

    id: int
    text: str
    latency_ms: float
    accepted: Literal["", "full", "partial"] = ""
    typed_through: bool = False
    """Right, but typed to its end by the user (too short to save a key by accepting)."""
    request_id: str = ""
    """The answer's request id ('' when the suggester does not know it)."""


def shown_text(answer: Answer) -> str:
    """Return what an answer shows, trailing whitespace left out ('' shows nothing).

    The replay types at the end of a line, so ``replaces`` has nothing right of the
    cursor to replace; it does not change what is shown.
    """
    return answer.text.rstrip()


@dataclass
class Screen:
    """Every answer of one region and the suggestion that shows at each key moment."""

    key_times: dict[int, float] = field(default_factory=dict)
    """perf_counter time of the key that made each buffer version."""
    answers: dict[int, list[Answer]] = field(default_factory=dict)
    current: Shown | None = None
    distinct: list[Distinct] = field(default_factory=list)

    def add(self, answer: Answer) -> None:
        """Keep an answer (the suggester's ``on_answer``)."""
        self.answers.setdefault(answer.version, []).append(answer)

    def at(self, version: int, moment: float) -> Shown | None:
        """Return what shows at ``moment`` with the buffer at ``version``."""
        ready = [a for a in self.answers.get(version, ()) if a.arrived <= moment and shown_text(a)]
        current = self.current if self.current and self.current.version == version else None
        if ready:
            newest = max(ready, key=lambda a: a.arrived)
            if current is None or newest is not current.answer:
                text = shown_text(newest)
                if current is not None and current.text == text:
                    current.answer = newest  # the same suggestion, answered again
                elif current is not None and text.startswith(current.text):
                    current.stages.append((newest.arrived, text))  # grown
                    current.answer = newest
                    self.distinct[current.id].text += text[len(current.stages[-2][1]) :]
                else:
                    latency = (newest.arrived - self.key_times.get(version, newest.arrived)) * 1000
                    current = Shown(
                        len(self.distinct), [(newest.arrived, text)], version, latency, newest
                    )
                    self.distinct.append(
                        Distinct(current.id, text, latency, request_id=newest.request_id)
                    )
        self.current = current
        return current

    def after_key(self, inserted: str, version: int, kind: KeyKind) -> None:
        """The key inserted ``inserted`` (``version`` now): carry the shown suggestion's rest."""
        shown = self.current
        if shown is None:
            return
        if kind != "type":
            self.distinct[shown.id].accepted = (
                "full" if kind == "tab" else (self.distinct[shown.id].accepted or "partial")
            )
        rest = shown.text[len(inserted) :] if shown.text.startswith(inserted) else ""
        if kind == "type" and shown.text.startswith(inserted) and not rest.strip():
            self.distinct[shown.id].typed_through = True
        # each stage typed through keeps its time; one the key went past is gone
        stages = [(t, s[len(inserted) :]) for t, s in shown.stages if s.startswith(inserted)]
        stages = [(t, s) for t, s in stages if s.strip()]
        if kind != "tab" and rest.strip():  # the last stage, ``rest``, is among them
            self.current = Shown(shown.id, stages, version, shown.latency_ms)
        else:
            self.current = None


def takeable(shown: Shown | None, moment: float, react_s: float) -> str | None:
    """Return the longest text of ``shown`` that has been on screen for at least ``react_s``
    seconds at ``moment`` (the user's reaction time; 0: anything on screen), None if none.

    Shorter than ``shown.text`` when the suggestion grew less than ``react_s`` ago: the user
    has read that part, and takes it word by word (:func:`decide` with ``tab=False``), as
    Tab would take the whole, which the user has not read yet.
    """
    if shown is None:
        return None
    old = [text for since, text in shown.stages if moment - since >= react_s]
    return old[-1] if old else None


def ready(shown: Shown | None, moment: float, react_s: float) -> bool:
    """True when some of ``shown`` has been on screen for at least ``react_s`` seconds at
    ``moment`` (:func:`takeable`)."""
    return takeable(shown, moment, react_s) is not None


@dataclass(frozen=True, slots=True)
class Action:
    """What the user does at a key moment."""

    kind: KeyKind
    text: str
    """What the key inserts."""
    plan: tuple[str, ...] = ()
    """Word keys still to press after this one (word by word)."""


def full_match(remaining: str, suggestion: str) -> str:
    """Return the suggestion when it is right in full ('' otherwise): nonempty, the
    remaining target starts with it (trailing whitespace left out)."""
    text = suggestion.rstrip()
    return text if text and remaining.startswith(text) else ""


def word_steps(text: str) -> list[str]:
    """Return ``text`` cut as Ctrl+Right accepts it, one piece per key."""
    steps: list[str] = []
    p = 0
    while p < len(text):
        match = _WORD_STEP.match(text, p)
        if match is None:  # only whitespace left
            break
        steps.append(match.group(0))
        p = match.end()
    return steps


def matching_words(remaining: str, suggestion: str) -> list[str]:
    """Return the suggestion's leading words that the remaining target starts with."""
    words: list[str] = []
    p = 0
    for step in word_steps(suggestion):
        if not remaining.startswith(step, p):
            break
        words.append(step)
        p += len(step)
    return words


def decide(
    target: str, p: int, shown: str | None, plan: tuple[str, ...] = (), *, tab: bool = True
) -> Action:
    """Return what the user does at ``p`` of ``target`` with ``shown`` on screen.

    Tab when the suggestion is right in full and saves a key (a right suggestion that one
    key types anyway is typed: type-through), unless ``tab`` is False (``shown`` is the
    part of a grown suggestion the user has read, and Tab would take more); the next word
    of a word-by-word acceptance under way while the suggestion still starts with it; a
    new word-by-word acceptance
    when the matching words write at least :data:`MIN_WORD_PREFIX` characters and take
    fewer keys than typing them; else the next key typed.
    """
    remaining = target[p:]
    if shown:
        whole = full_match(remaining, shown)
        if tab and whole and keys_between(target, p, p + len(whole)) > 1:
            return Action("tab", whole)
        if plan and shown.startswith(plan[0]) and remaining.startswith(plan[0]):
            return Action("word", plan[0], plan[1:])
        words = matching_words(remaining, shown)
        size = sum(len(w) for w in words)
        if size >= MIN_WORD_PREFIX and len(words) < keys_between(target, p, p + size):
            return Action("word", words[0], tuple(words[1:]))
    return Action("type", next_key(target, p))
