"""A block cut short by the token or time cap loses its unfinished last line.

SAFIM's block tasks showed the server's block answers ending mid-statement
(``int[] ans = new int``) when the 128-token cap stopped them, which broke programs
whose lines before it were whole. The engine knows why generation stopped; only a
capped block is cut, a block that ended by itself is shown whole.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from lsp_assist.backends.base import Alternative, GenerationRequest, GenerationResult
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.postprocess import complete_lines
from lsp_assist.serving.scheduler import Scheduler
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, CharBackend, make_engine, snapshot

BLOCK = "first(1)\n    second(2)\n    third = compute(ite"


class Capped(CharBackend):
    """Answers ``BLOCK``, stopped for ``reason``, and ``branches`` as (reason, text)."""

    def __init__(self, reason: str, branches: Sequence[tuple[str, str]] = ()) -> None:
        self.reason = reason
        self.branches = [Alternative(text, tuple(map(ord, text)), why) for why, text in branches]

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Return ``BLOCK`` whole, stopped for ``reason``."""
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        result.tokens = self.tokenize(BLOCK)
        result.text = BLOCK
        result.stop_reason = self.reason
        result.alternatives = self.branches[: max(0, request.alternatives - 1)]
        result.finish(t0)
        return result


def test_complete_lines() -> None:
    assert complete_lines(BLOCK) == "first(1)\n    second(2)"
    assert complete_lines("a = 1\n") == "a = 1\n"  # the last line ended: nothing cut
    assert complete_lines("int[] ans = new int") == "int[] ans = new int"  # the only line
    assert complete_lines("\n    x = fo") == "\n    x = fo"  # the first line with code
    assert complete_lines("a = 1\n    b = 2\n    ") == "a = 1\n    b = 2\n    "


async def invoked(backend: Capped, tmp_path: Path, **settings: object) -> CompletionOutcome:
    """Ask once (invoked, with alternatives) on an engine over ``backend``; the outcome."""
    engine, uri = make_engine(tmp_path, backend, maxTokens=64, **settings)
    scheduler = Scheduler(engine)
    try:
        query = CompletionQuery(
            snapshot=snapshot(engine, uri),
            line=CURSOR_LINE,
            column=CURSOR_COLUMN,
            trigger="invoked",
            want_alternatives=True,
        )
        return await scheduler.complete(query)
    finally:
        scheduler.shutdown()
        engine.session.close()


@pytest.mark.parametrize(
    ("reason", "multiline", "shown"),
    [
        ("length", "always", "first(1)\n    second(2)"),  # capped block: whole lines only
        ("timeout", "always", "first(1)\n    second(2)"),  # the generation time cap too
        ("eos", "always", BLOCK),  # it ended by itself: as written
        ("length", "never", "first(1)"),  # one line: the first line, as before
    ],
)
async def test_a_capped_block_ends_at_a_whole_line(
    tmp_path: Path, reason: str, multiline: str, shown: str
) -> None:
    outcome = await invoked(Capped(reason), tmp_path, multiline=multiline)
    assert outcome.text == shown, outcome


async def test_a_capped_alternative_ends_at_a_whole_line_too(tmp_path: Path) -> None:
    # an invoked request decodes alternatives; a branch the cap stopped is cut the same way
    backend = Capped("eos", branches=[("length", BLOCK), ("eos", "other(2)\n    x = 1")])
    outcome = await invoked(backend, tmp_path, multiline="always")
    assert outcome.text == BLOCK
    assert outcome.alternatives == ("first(1)\n    second(2)", "other(2)\n    x = 1")
