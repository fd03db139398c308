"""The acceptance replay's ``oracle`` row: the ceiling, no model.

:class:`OracleSuggester` knows the regions being typed. At every key it answers at once
with the rest of the cursor's line as the file had it (the target up to the line end,
no line break) while what is typed on the line is that line's start: after a region's
first key, and after the newline key that brings the cursor to each new line, the rest
of the line is on screen. What no row can beat with one line a suggestion: the table's
ceiling for keystrokes saved and for the line-start figures. docs/evaluation.md,
"Acceptance replay".
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from pathlib import Path

from lsp_assist.evaluation.replay.tasks import Region
from lsp_assist.evaluation.suggester import Answer, AnswerCallback


def oracle_text(region: Region, text: str, line: int, column: int) -> str:
    """Return the rest of line ``line`` of the file at ``column`` ('' when what ``text``
    holds there is not the line's start, or nothing is left)."""
    offset = line - region.start
    lines = (region.indent + region.target).split("\n")
    if not 0 <= offset < len(lines):
        return ""
    buffer_lines = text.split("\n")
    typed = buffer_lines[line][:column] if line < len(buffer_lines) else ""
    original = lines[offset]
    if not original.startswith(typed):
        return ""
    return original[column:]


class OracleSuggester:
    """Shows the rest of each line the moment a key lands on it; knows every region."""

    label = "oracle"
    debounce_ms = 0.0

    def __init__(self, regions: Sequence[Region]) -> None:
        self.regions = {region.path: region for region in regions}
        self.root = Path()
        self.stats = {"keys": 0, "answered": 0}

    async def start(self, workspace: Path) -> None:
        """Remember the workspace copy (the regions' paths are relative to it)."""
        self.root = workspace

    async def open(self, path: Path, text: str, version: int) -> None:
        """Nothing to do: the oracle reads no buffer but the one each key sends."""
        await asyncio.sleep(0)

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        """Nothing to prepare: no wait (the rest changes nothing for the oracle)."""
        await asyncio.sleep(0)

    def key(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        """Answer at once with the rest of the cursor's line when the line so far is right."""
        self.stats["keys"] += 1
        try:
            region = self.regions.get(path.relative_to(self.root).as_posix())
        except ValueError:  # not under the workspace
            return
        if region is None:
            return
        rest = oracle_text(region, text, line, column)
        if rest.strip():
            self.stats["answered"] += 1
            on_answer(Answer(version=version, text=rest, arrived=time.perf_counter()))

    async def close_file(self, path: Path, text: str) -> None:
        """Nothing to close."""
        await asyncio.sleep(0)

    async def stop(self) -> None:
        """Nothing to stop."""
        await asyncio.sleep(0)
