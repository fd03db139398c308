"""HumanEval multi-line and random-span, chained: a user who takes each suggestion and asks again.

This module owns the ``chain`` arm of ``lsp-assist bench --humaneval --chain``
(docs/evaluation.md, "HumanEval infilling"): on a multi-line or random-span task the
user asks the real server at the cursor (one inline request, as the ``server`` arm
sends; after an edit automatic, as the editor asks after a change), waits until the
server is done writing (an early answer's whole, the kept lines after it:
docs/serving.md), accepts what it shows whole (its text over its range, one didChange,
and the item's ``lspAssist.accept``), asks again at the end of what it accepted (where
nothing is shown at a line's end, it presses Enter, the editor indents the new line, and
it asks there), and goes on until the answer has as many lines as the removed part (the
line count the published truncation reads), the server offers nothing, or it spent its
asks (:func:`ask_cap`). What it submits is what it accepted, cut as the plain answer
truncated as published is (humaneval_sets.truncate_plain): the expected text is never
read to choose what to take, only its line count to stop. :func:`chain` is the user
against any :class:`Suggester`; :class:`ServerSuggester` is the real server over stdio;
:func:`run_chain` runs the arm. No pygls here (the client module has it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from lsp_assist.config import CompletionSettings
from lsp_assist.documents import Document
from lsp_assist.evaluation.client import close_document, command, open_document, range_edit
from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill import humaneval_sets as hs
from lsp_assist.evaluation.infill.harness import inline_item, scratch_server
from lsp_assist.evaluation.rows import CAPS

ASKS_PER_LINE = 4
"""Asks a task may take per line of its part, and that many more (:func:`ask_cap`): a
line takes at most three (nothing at the line's end, the ask after Enter, the ask again
for an early answer's whole), so only a chain that never reaches the line count (a
suggestion with no line break again and again) stops at the cap."""
WHOLE_TRIES = 3
"""Asks at one place for the whole suggestion: the first, and again once the server
recorded a whole other than what it showed (an early answer's start)."""
WAIT_S = 300.0
"""How long a step waits for the server to record a generation's end."""
POLL_S = 0.05
"""How often the status is read while a generation is being written."""
CHAIN_SETTINGS: dict[str, Any] = {
    "answerAfterMs": CompletionSettings().answer_after_ms,
    "keptLines": CompletionSettings().kept_lines,
    **CAPS,
}
"""What the chain arm sets, before ``--setting``: the server's own answerAfterMs and
keptLines (an early answer and the kept lines after it: the server arm's 0 would turn
them off) and the bench rows' time caps."""
STOPS = ("lines", "empty", "context changed", "requests")
"""Why a chain ended: the answer has the part's line count; the server offered nothing
(or only spaces: a line break is taken, as an Enter), also after an Enter; an accepted
item changed text outside the part; the ask cap."""
INDENT = "    "
"""What the editor's auto-indent adds after a line ending with ``:`` (and takes away after
a ``return``, ``pass``, ``raise``, ``break`` or ``continue``)."""
DEDENT_AFTER = ("return", "pass", "raise", "break", "continue")
"""The first words after which the editor's auto-indent goes one level back (Vim's
Python indent does)."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What the server showed at the cursor once it was done writing there."""

    text: str
    range: list[int] | None = None
    """Start line, character, end line, character (LSP); None: at the cursor."""
    item: str = ""
    """The item's id for ``lspAssist.accept`` ('' none)."""
    requests: int = 1
    """Inline requests it took (an early answer asked again for its whole)."""
    memory: bool = False
    """The first ask was answered from the type-through cache (no model)."""
    after_enter: bool = False
    """Asked on a new line the user opened with Enter (nothing was shown at the line's end)."""
    latency_ms: float | None = None
    """The first ask's latency (the server's, else the client's round trip)."""
    skipped: str = ""
    """Why the trigger rules skipped the first ask ('' not skipped)."""


@dataclass(frozen=True, slots=True)
class Edit:
    """An accept as the editor sends it: ``text`` over ``start``-``end`` (line, character)."""

    start: tuple[int, int]
    end: tuple[int, int]
    text: str


class Suggester(Protocol):
    """Who the chained user asks: the real server, or a fake in tests."""

    async def ask(self, text: str, line: int, character: int) -> Shown:
        """Return what is shown at (line, character) of the buffer ``text``."""

    async def apply(self, edit: Edit, item: str = "") -> None:
        """Apply ``edit`` (an accept, or the user's Enter), then, with an ``item`` id, the
        item's accept command."""


@dataclass(slots=True)
class Buffer:
    """The editor's text and cursor (an offset) while the user chains."""

    text: str
    cursor: int

    def position(self, offset: int) -> tuple[int, int]:
        """Return an offset as LSP counts it: 0-based line, UTF-16 column."""
        doc = Document("file:///task.py", self.text)
        return doc.to_lsp(doc.position_at_offset(offset))

    def take(self, text: str, edit_range: Sequence[int] | None) -> Edit:
        """Apply ``text`` over ``edit_range`` (None: at the cursor) as an editor accepts an
        item; the cursor goes to the end of the text. Return the edit, in the text before."""
        doc = Document("file:///task.py", self.text)
        if edit_range is None:
            begin = end = self.cursor
        else:  # the server's own conversion of LSP positions (UTF-16 columns, clamped)
            begin = doc.offset_at(doc.from_lsp(edit_range[0], edit_range[1]))
            end = doc.offset_at(doc.from_lsp(edit_range[2], edit_range[3]))
        edit = Edit(self.position(begin), self.position(end), text)
        self.text = self.text[:begin] + text + self.text[end:]
        self.cursor = begin + len(text)
        return edit

    def enter(self) -> str | None:
        """Return what Enter types at the cursor, the line break and the editor's
        auto-indent (the line's indentation, one level more after ``:``, one less after
        :data:`DEDENT_AFTER`); None where the cursor is not at the end of a line of code
        (a blank line, text right of it)."""
        start = self.text.rfind("\n", 0, self.cursor) + 1
        end = self.text.find("\n", self.cursor)
        line = self.text[start : len(self.text) if end < 0 else end]
        before, after = line[: self.cursor - start], line[self.cursor - start :]
        if not before.strip() or after.strip():
            return None
        indent = before[: len(before) - len(before.lstrip(" \t"))]
        code = before.strip()
        if code.endswith(":"):
            indent += INDENT
        elif code.split(maxsplit=1)[0].rstrip(";") in DEDENT_AFTER:
            indent = indent[: max(0, len(indent) - len(INDENT))]
        return "\n" + indent


def written(task: hs.SpanTask, text: str) -> str | None:
    """Return what stands where the task's part was in ``text`` (None: the text before
    the cursor or after the part changed)."""
    prefix, suffix = task.prefix(), task.suffix()
    if text.startswith(prefix) and text.endswith(suffix) and len(text) >= len(prefix) + len(suffix):
        return text[len(prefix) : len(text) - len(suffix)]
    return None


def ask_cap(lines: int) -> int:
    """Return the asks a task whose part has ``lines`` lines may take at most."""
    return ASKS_PER_LINE * (lines + 1)


def line_count(text: str) -> int:
    """Return the lines of ``text`` as the published truncation counts them (leading and
    trailing line breaks stripped; 0 for nothing but white space)."""
    body = text.strip("\n")
    return len(body.split("\n")) if body.strip() else 0


def right_lines(answer: str, expected: str) -> int:
    """Return how many of the expected part's first lines the answer has, each compared
    stripped, up to the first that differs."""
    count = 0
    lines = answer.strip("\n").split("\n")
    for got, want in zip(lines, expected.strip("\n").split("\n"), strict=False):
        if got.strip() != want.strip():
            break
        count += 1
    return count


@dataclass(slots=True)
class ChainResult:
    """One task's chain: the steps shown, why it ended, the text accepted and submitted."""

    steps: list[Shown] = field(default_factory=list)
    stop: str = ""
    accepted: str | None = ""
    """What stood where the part was when the chain ended (None: the context changed),
    without an Enter the server answered with nothing."""
    program: str = ""
    """The buffer when the chain ended."""
    enters: int = 0
    """Enters the user pressed where nothing was shown at a line's end."""


async def chain(
    task: hs.SpanTask, suggester: Suggester, max_requests: int | None = None
) -> ChainResult:
    """Work through ``task`` as the chained user: ask, accept what is shown whole, ask again
    at its end (where nothing is shown at a line's end, press Enter and ask on the new
    line), until the part's line count is written, nothing is shown, an accept changed
    text outside the part, or ``max_requests`` asks were spent (None: :func:`ask_cap`)."""
    buffer = Buffer(task.blanked(), task.start)
    goal = line_count(task.expected)
    if max_requests is None:
        max_requests = ask_cap(goal)
    result = ChainResult(program=buffer.text)
    spent = 0
    entered = False
    while True:
        if spent >= max_requests:
            result.stop = "requests"
            break
        line, character = buffer.position(buffer.cursor)
        shown = await suggester.ask(buffer.text, line, character)
        spent += shown.requests
        if entered:
            shown = dataclasses.replace(shown, after_enter=True)
        result.steps.append(shown)
        if not shown.text.strip(" \t"):  # a bare line break is an Enter: taken
            enter = None if entered else buffer.enter()
            if enter is None:
                result.stop = "empty"
                break
            await suggester.apply(buffer.take(enter, None))
            result.enters += 1
            entered = True
            continue
        entered = False
        await suggester.apply(buffer.take(shown.text, shown.range), shown.item)
        result.program = buffer.text
        result.accepted = written(task, buffer.text)
        if result.accepted is None:
            result.stop = "context changed"
            break
        if line_count(result.accepted) >= goal:
            result.stop = "lines"
            break
    return result


def answer_of(task: hs.SpanTask, result: ChainResult) -> dict[str, Any]:
    """Return the arm's answer for ``result``: ``suggestion`` the accepted text cut as
    published (truncate_plain), at the cursor, or, where the context changed, the whole
    buffer over the whole blanked program; the steps and the chain's figures."""
    if result.accepted is not None:
        suggestion = hs.truncate_plain(task, result.accepted) if result.accepted else ""
        edit_range = None
    else:
        blank = task.blanked()
        end = Buffer(blank, 0).position(len(blank))
        suggestion, edit_range = result.program, [0, 0, end[0], end[1]]
    first = result.steps[0] if result.steps else Shown("")
    answer: dict[str, Any] = {
        "suggestion": suggestion,
        "range": edit_range,
        "latency_ms": first.latency_ms,
        "accepted": result.accepted,
        "stop": result.stop,
        "requests": sum(s.requests for s in result.steps),
        "from_memory": sum(1 for s in result.steps if s.memory),
        "enters": result.enters,
        "right_lines": right_lines(suggestion, task.expected) if edit_range is None else 0,
        "lines": line_count(task.expected),
        "steps": [
            {
                "text": s.text,
                "memory": s.memory,
                "after_enter": s.after_enter,
                "requests": s.requests,
                "latency_ms": s.latency_ms,
                **({"skipped": s.skipped} if s.skipped else {}),
            }
            for s in result.steps
        ],
    }
    if first.skipped:
        answer["skipped"] = first.skipped
    return answer


# -- the real server ---------------------------------------------------------------------


async def recorded(client: Any, request_id: str, wait_s: float = WAIT_S) -> dict[str, Any]:
    """Poll ``lspAssist.status`` until its last outcome is ``request_id``'s (the
    generation's end: an early answer's whole, its kept lines); return it ({} after
    ``wait_s``)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        last: dict[str, Any] = (await command(client, "lspAssist.status")).get("last", {})
        if last.get("request_id") == request_id:
            return last
        await asyncio.sleep(POLL_S)
    return {}


@dataclass(slots=True)
class ServerSuggester:
    """The real server over stdio, asked at one open document (``uri``): the first time
    with ``trigger``, after an edit as the editor asks after a change (automatic)."""

    client: Any
    uri: str
    trigger: str = "automatic"
    """The first ask's (``--trigger``); every later one is automatic."""
    version: int = 1

    async def ask(self, text: str, line: int, character: int) -> Shown:
        """Ask at (line, character); when the server then records a whole other than
        what it showed (an early answer's start), ask again there once it is written."""
        trigger = self.trigger if self.version == 1 else "automatic"
        first: dict[str, Any] = {}
        shown = Shown("", requests=0)
        for tries in range(1, WHOLE_TRIES + 1):
            suggestion, edit_range, client_ms, last = await inline_item(
                self.client, self.uri, line, character, trigger=trigger
            )
            request_id = str(last.get("request_id", ""))
            if last.get("pending") and request_id:
                last = await recorded(self.client, request_id) or last
            first = first or {**last, "client_ms": client_ms}
            shown = Shown(
                suggestion,
                edit_range,
                item=request_id if suggestion else "",
                requests=tries,
                memory=bool(first.get("cache_hit")),
                latency_ms=first.get("latency_ms") or round(first["client_ms"], 2),
                skipped=str(first.get("skipped", "")),
            )
            if not suggestion or str(last.get("text", suggestion)) == suggestion:
                break  # nothing shown, or shown whole
        return shown

    async def apply(self, edit: Edit, item: str = "") -> None:
        """Send the edit as one didChange, then, with an ``item`` id, its accept command."""
        self.version += 1
        self.client.text_document_did_change(
            range_edit(self.uri, self.version, edit.start, edit.end, edit.text)
        )
        if item:
            await command(self.client, "lspAssist.accept", item)


async def _chain_all(
    tasks: Sequence[hs.SpanTask],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[hs.SpanTask, dict[str, Any]], None],
    trigger: str,
) -> dict[str, Any]:
    files = {problem.file_name: problem.program for problem in problems}
    async with scratch_server("humaneval-chain", model, settings, files) as server:
        for task in tasks:
            path = server.root / task.problem.file_name
            uri = path.as_uri()
            blank = task.blanked()
            path.write_text(blank, encoding="utf-8")  # the disk says what the buffer says
            try:
                open_document(server.client, uri, blank, "python")
                result = await chain(task, ServerSuggester(server.client, uri, trigger))
            finally:
                path.write_text(task.problem.program, encoding="utf-8")  # before didClose
            close_document(server.client, uri)
            on_answer(task, answer_of(task, result))
    return server.session


def run_chain(
    tasks: Sequence[hs.SpanTask],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[hs.SpanTask, dict[str, Any]], None],
    trigger: str = "automatic",
) -> dict[str, Any]:
    """Chain every task through ``lsp-assist serve`` (:data:`CHAIN_SETTINGS`, then
    ``settings``); return the session (load, settings)."""
    return asyncio.run(
        _chain_all(tasks, problems, model, {**CHAIN_SETTINGS, **settings}, on_answer, trigger)
    )


def figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return the chain arm's own figures: tasks, asks, steps and those answered from
    memory, Enters, why chains ended, lines right before the first wrong one of all lines."""
    mine = [r["arms"]["chain"] for r in records if "chain" in r.get("arms", {})]
    stops: dict[str, int] = {}
    for answer in mine:
        stops[str(answer.get("stop", ""))] = stops.get(str(answer.get("stop", "")), 0) + 1
    return {
        "tasks": len(mine),
        "requests": sum(int(a.get("requests", 0)) for a in mine),
        "steps": sum(len(a.get("steps", [])) for a in mine),
        "from_memory": sum(int(a.get("from_memory", 0)) for a in mine),
        "enters": sum(int(a.get("enters", 0)) for a in mine),
        "stops": stops,
        "right_lines": sum(int(a.get("right_lines", 0)) for a in mine),
        "lines": sum(int(a.get("lines", 0)) for a in mine),
    }
