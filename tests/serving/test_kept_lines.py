"""Kept lines (serving/kept.py): a generation goes on past the shown line, and its next
lines are answered from memory once the user is on them.

A streaming fake that honours the stop rule stands in for the model's timing (one
character per step, through ``request.on_text`` as the real backends stream); the real
model runs the same path through the server in tests/e2e/test_kept_lines.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.documents import Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.kept import KeptLines, block_body, kept_indent
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from lsp_assist.serving.stoprules import make_stop_rule
from lsp_assist.serving.typethrough import TypeThroughCache
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, CharBackend, make_engine, snapshot

URI = "file:///w/app.py"
BEFORE = "def load(path):\n    data = "
AFTER = "\n\nprint(load('x'))\n"

LINES = "compute(1)\nsecond = 2\nthird = 3\n\nfourth = 4\n"
"""What the fake model writes at the test buffer's cursor (``value = |`` at the top level):
the shown line, two lines to keep, then a blank line (the block's end)."""


# -- the cache: a kept line is answered one line at a time ----------------------------


def test_a_kept_line_is_answered_after_enter_and_the_auto_indent() -> None:
    cache = TypeThroughCache(8)
    cache.put_at(cache.key(URI, BEFORE, AFTER), "read(path)", "\n    return data\n    x = 1")
    typed = BEFORE + "read(path)\n    "
    assert cache.get(URI, typed, AFTER) == "return data"
    assert cache.get(URI, typed + "ret", AFTER) == "urn data"
    assert cache.get(URI, typed + "return data\n    ", AFTER) == "x = 1"


def test_at_the_shown_lines_end_the_next_kept_line_shows_below() -> None:
    cache = TypeThroughCache(8)
    cache.put_at(cache.key(URI, BEFORE, AFTER), "read(path)", "\n    return data\n    x = 1")
    # the line is done: the line break and the next kept line (Tab takes both)
    assert cache.get(URI, BEFORE + "read(path)", AFTER) == "\n    return data"
    assert cache.get(URI, BEFORE + "rea", AFTER) == "d(path)"  # still the shown line only
    assert cache.hits == 2 and cache.misses == 0


def test_the_cache_drops_a_kept_line_the_user_did_not_type() -> None:
    cache = TypeThroughCache(8)
    cache.put_at(cache.key(URI, BEFORE, AFTER), "read(path)", "\n    return data")
    assert cache.get(URI, BEFORE + "read(path)\n    x", AFTER) is None
    # another indentation than the kept line's (the editor indented deeper)
    assert cache.get(URI, BEFORE + "read(path)\n        ", AFTER) is None
    # all of it typed: nothing kept is left
    assert cache.get(URI, BEFORE + "read(path)\n    return data", AFTER) is None


def test_without_kept_lines_a_typed_line_is_a_miss_as_before() -> None:
    cache = TypeThroughCache(8)
    cache.put_at(cache.key(URI, BEFORE, AFTER), "read(path)")
    assert cache.get(URI, BEFORE + "read(path)", AFTER) is None
    assert cache.get(URI, BEFORE + "read(path)\n    ", AFTER) is None


def test_kept_lines_need_the_text_after_the_cursor_as_it_was() -> None:
    cache = TypeThroughCache(8)
    cache.put_at(cache.key(URI, BEFORE, ")" + AFTER), "read(path", "\n    return data")
    # an auto-inserted closer serves the shown line, never the lines written for another text
    assert cache.get(URI, BEFORE + "read(path\n    ", AFTER) is None


def test_kept_lines_keep_only_whole_lines_the_shown_line_starts() -> None:
    keep = KeptLines(lambda raw: raw.rstrip())
    assert keep("a = 1\n    b = 2\n    c", "a = 1", whole=False) == "\n    b = 2"
    assert keep("a = 1\n    b = 2\n    c = 3", "a = 1", whole=True) == "\n    b = 2\n    c = 3"
    assert keep("a = 1\n    b", "a = 1", whole=False) == ""
    assert keep("a = 1\n    b = 2\n", "a = 2", whole=True) == ""  # another shown line
    # while the generation goes on, the line it is writing shows as it grows
    assert keep("a = 1\n    b = 2\n    c", "a = 1", whole=False, writing=True) == (
        "\n    b = 2\n    c"
    )
    # unless it starts like the line below (a copy, which post-processing drops once whole)
    copy = KeptLines(lambda raw: raw.rstrip(), below="return total")
    assert copy("a = 1\n    b = 2\n    ret", "a = 1", whole=False, writing=True) == "\n    b = 2"


# -- the engine and the scheduler -------------------------------------------------------


class LinesBackend(CharBackend):
    """Writes ``text`` one character per ``step_s``, streamed, honouring the stop rule and
    the cancel flag after each character (as the decode loop does after each token)."""

    def __init__(self, text: str = LINES, step_s: float = 0.005) -> None:
        self.text = text
        self.step_s = step_s
        self.calls = 0
        self.stops: list[str] = []
        self.after_cancel: list[int] = []
        """Characters written after the cancel flag was seen set, per generation."""

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream ``text`` until the stop rule cuts it, the token cap, or a cancel."""
        self.calls += 1
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        written = ""
        after = 0
        result.stop_reason = "eos"
        for char in self.text:
            if request.cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            if len(result.tokens) >= request.max_tokens:
                result.stop_reason = "length"
                break
            time.sleep(self.step_s)
            if request.cancel.cancelled:
                after += 1  # a step already under way when the key came
            if not result.tokens:
                result.ttft_ms = (time.perf_counter() - t0) * 1000
            result.tokens.append(ord(char))
            written += char
            if request.on_text is not None:
                request.on_text(char)
            cut = request.stop_rule(written) if request.stop_rule is not None else None
            if cut is not None:
                written = written[:cut]
                result.stop_reason = "rule"
                break
        self.after_cancel.append(after)
        self.stops.append(result.stop_reason)
        result.text = written
        result.finish(t0)
        return result


def _setup(
    tmp_path: Path, **settings: object
) -> tuple[CompletionEngine, Scheduler, str, LinesBackend]:
    backend = LinesBackend()
    engine, uri = make_engine(
        tmp_path, backend, **{"answerAfterMs": 10000, "maxTokens": 48, **settings}
    )
    return engine, Scheduler(engine), uri, backend


def _query(engine: CompletionEngine, uri: str, line: int, column: int) -> CompletionQuery:
    return CompletionQuery(
        snapshot=snapshot(engine, uri),
        line=line,
        column=column,
        trigger="automatic",
        answer_early=True,
    )


async def _type(
    engine: CompletionEngine, scheduler: Scheduler, uri: str, text: str, at: Position
) -> CompletionOutcome:
    """Insert ``text`` at ``at`` (a new version) and ask at the end of what it inserted."""
    doc = engine.session.buffers.get(uri)
    assert doc is not None
    engine.session.buffers.change(uri, doc.version + 1, [(at, at, text)])
    lines = text.split("\n")
    line = at.line + len(lines) - 1
    column = (at.column if len(lines) == 1 else 0) + len(lines[-1])
    return await scheduler.complete(_query(engine, uri, line, column))


async def _written(scheduler: Scheduler) -> None:
    """Wait until the model thread has finished what it was writing."""
    await asyncio.get_running_loop().run_in_executor(scheduler.executor, lambda: None)


async def test_a_kept_line_is_answered_from_memory_at_the_next_line(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = _setup(tmp_path)
    first = await scheduler.complete(_query(engine, uri, CURSOR_LINE, CURSOR_COLUMN))
    # answered at the shown line's end, long before answerAfterMs (10 s)
    assert first.answered_early and first.text == "compute(1)"
    await _written(scheduler)
    assert backend.calls == 1 and backend.stops == ["rule"]  # the blank line ended the block
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    end_of_line = await _type(engine, scheduler, uri, "compute(1)", at)
    assert end_of_line.cache_hit and end_of_line.text == "\nsecond = 2"
    at = Position(CURSOR_LINE, CURSOR_COLUMN + len("compute(1)"))
    nxt = await _type(engine, scheduler, uri, "\n", at)
    assert nxt.cache_hit and nxt.text == "second = 2"
    at = Position(CURSOR_LINE + 1, 0)
    third = await _type(engine, scheduler, uri, "second = 2\n", at)
    assert third.cache_hit and third.text == "third = 3"
    assert backend.calls == 1  # every line after the first came from memory
    scheduler.shutdown()
    engine.session.close()


async def test_a_kept_line_is_dropped_when_the_user_types_something_else(
    tmp_path: Path,
) -> None:
    engine, scheduler, uri, backend = _setup(tmp_path)
    first = await scheduler.complete(_query(engine, uri, CURSOR_LINE, CURSOR_COLUMN))
    assert first.text == "compute(1)"
    await _written(scheduler)
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    other = await _type(engine, scheduler, uri, "compute(1)\nz", at)
    assert not other.cache_hit and backend.calls == 2  # the model, not the kept line
    scheduler.shutdown()
    engine.session.close()


async def test_switched_off_the_generation_ends_at_the_line(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = _setup(tmp_path, keptLines=0, answerAfterMs=100)
    first = await scheduler.complete(_query(engine, uri, CURSOR_LINE, CURSOR_COLUMN))
    await _written(scheduler)
    assert first.text.startswith("comp")
    assert backend.stops == ["rule"]  # the single-line rule: the line break ends it
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    nxt = await _type(engine, scheduler, uri, "compute(1)\n", at)
    assert not nxt.cache_hit and backend.calls == 2
    scheduler.shutdown()
    engine.session.close()


async def test_a_key_the_cache_cannot_answer_stops_the_kept_lines_within_a_step(
    tmp_path: Path,
) -> None:
    engine, scheduler, uri, backend = _setup(tmp_path)
    backend.step_s = 0.05  # the kept lines take ~1 s to write
    first = await scheduler.complete(_query(engine, uri, CURSOR_LINE, CURSOR_COLUMN))
    assert first.text == "compute(1)"
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    await _type(engine, scheduler, uri, "x", at)  # not the suggestion: the model again
    await _written(scheduler)
    assert backend.stops[0] == "cancelled"
    assert backend.after_cancel[0] <= 1  # at most the step under way when the key came
    scheduler.shutdown()
    engine.session.close()


async def test_a_first_line_post_processing_drops_keeps_nothing(tmp_path: Path) -> None:
    """A shown line that cleans to nothing stops the generation at its end (no lines kept
    for a suggestion that is never shown)."""
    engine, scheduler, uri, backend = _setup(tmp_path)
    backend.text = "   \nsecond = 2\nthird = 3\n"
    first = await scheduler.complete(_query(engine, uri, CURSOR_LINE, CURSOR_COLUMN))
    await _written(scheduler)
    assert first.text == "" and backend.stops == ["rule"] and backend.calls == 1
    scheduler.shutdown()
    engine.session.close()


async def test_at_a_finished_lines_end_the_next_line_shows_below(tmp_path: Path) -> None:
    """Where the model ends the line at once, the suggestion is the line break and the next
    line (a ghost line below), and the lines after it are kept for the lines after."""
    engine, scheduler, uri, backend = _setup(tmp_path)
    backend.text = "\nsecond = 2\nthird = 3\n\nfourth = 4\n"
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    first = await _type(engine, scheduler, uri, "compute(1)", at)
    await _written(scheduler)
    assert first.text == "\nsecond = 2" and backend.calls == 1
    assert backend.stops == ["rule"]  # the blank line ended the block
    at = Position(CURSOR_LINE, CURSOR_COLUMN + len("compute(1)"))
    nxt = await _type(engine, scheduler, uri, "\n", at)
    assert nxt.cache_hit and nxt.text == "second = 2"
    third = await _type(engine, scheduler, uri, "second = 2\n", Position(CURSOR_LINE + 1, 0))
    assert third.cache_hit and third.text == "third = 3" and backend.calls == 1
    scheduler.shutdown()
    engine.session.close()


async def test_switched_off_a_finished_line_shows_nothing_below(tmp_path: Path) -> None:
    engine, scheduler, uri, backend = _setup(tmp_path, nextLineAtEnd=False)
    backend.text = "\nsecond = 2\nthird = 3\n\nfourth = 4\n"
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    first = await _type(engine, scheduler, uri, "compute(1)", at)
    await _written(scheduler)
    assert first.text == "" and backend.stops == ["rule"]
    at = Position(CURSOR_LINE, CURSOR_COLUMN + len("compute(1)"))
    nxt = await _type(engine, scheduler, uri, "\n", at)
    assert not nxt.cache_hit and backend.calls == 2
    scheduler.shutdown()
    engine.session.close()


def test_the_body_of_a_block_is_the_kept_lines_indented_deeper() -> None:
    assert block_body("\n    go()\n\n    again()\nafter = 1", 0) == (
        "\n    go()\n\n    again()",
        "\nafter = 1",
    )
    # a closer at the opener's indentation ends the body and belongs to it
    assert block_body("\n  run();\n}\nnext();", 0) == ("\n  run();\n}", "\nnext();")
    # nothing deeper: no body
    assert block_body("\nafter = 1", 0) == ("", "\nafter = 1")
    assert block_body("\n\nafter = 1", 4) == ("", "\n\nafter = 1")


async def _at_a_block_opener(
    tmp_path: Path, **settings: object
) -> tuple[CompletionEngine, Scheduler, str, LinesBackend, CompletionOutcome, CompletionOutcome]:
    """Type ``if ready`` on a new line, where the model writes a block after it; return the
    first answer there and, once the model is done, the answer asked again at that place."""
    engine, scheduler, uri, backend = _setup(tmp_path, **settings)
    backend.text = ":\n    go()\n    again()\nafter = 1\n\n"
    at = Position(CURSOR_LINE, CURSOR_COLUMN)
    first = await _type(engine, scheduler, uri, "\nif ready", at)
    await _written(scheduler)
    again = await scheduler.complete(_query(engine, uri, CURSOR_LINE + 1, len("if ready")))
    return engine, scheduler, uri, backend, first, again


async def test_a_line_that_opens_a_block_is_shown_with_its_body(tmp_path: Path) -> None:
    """``dynamicMultiline``: where the shown line opens a block, the kept lines of its body
    join it as one suggestion; what follows the block stays kept for after it."""
    engine, scheduler, uri, backend, first, again = await _at_a_block_opener(tmp_path)
    assert first.text == ":"  # the early answer: the shown line, at its end
    assert again.cache_hit and again.text == ":\n    go()\n    again()"
    assert backend.calls == 1
    # the block typed: the line after it is still kept, below
    typed = ":\n    go()\n    again()"
    end = await _type(engine, scheduler, uri, typed, Position(CURSOR_LINE + 1, len("if ready")))
    assert end.cache_hit and end.text == "\nafter = 1"
    scheduler.shutdown()
    engine.session.close()


async def test_switched_off_a_block_opener_shows_its_line_alone(tmp_path: Path) -> None:
    engine, scheduler, _, _, _, again = await _at_a_block_opener(tmp_path, dynamicMultiline=False)
    assert again.cache_hit and again.text == ":"
    scheduler.shutdown()
    engine.session.close()


def test_kept_lines_may_leave_a_block_but_not_the_function() -> None:
    from lsp_assist.context import get_parser

    source = "class A:\n    def f(self, x):\n        if x:\n            y = 1\n        return y\n"
    parser = get_parser("python")
    assert parser is not None
    tree = parser.parse(source.encode())
    lines = source.split("\n")
    # inside the if body: the kept lines may dedent to the function's body, not below
    assert kept_indent(tree, lines.__getitem__, 3, 17) == 5
    assert kept_indent(None, lines.__getitem__, 3, 17) is None
    rule = make_stop_rule(
        multiline=True, cursor_indent=5, line_prefix="            y = 1", max_lines=5
    )
    text = "\n        return y\n    def g(self):\n"
    assert text[: rule(text)] == "\n        return y"
