"""Fakes the acceptance replay's tests share: a workspace of small modules, suggesters
that stand in for a server (right, wrong, silent), and the text they retype."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from lsp_assist.evaluation.replay.tasks import Region, region_buffers
from lsp_assist.evaluation.suggester import Answer, AnswerCallback

SOURCE = '''"""A module."""

LIMIT = 3
TOTAL = LIMIT * 2
NAMES = ["a", "b"]


def shout(name: str) -> str:
    """Return the name, loud.

    Docstring lines are never part of a region.
    """
    loud = name.upper()
    if not loud:
        return ""
    mark = "!" * LIMIT
    return loud + mark


class Box:
    def __init__(self, items: list[int]) -> None:
        self.items = list(items)
        self.total = sum(items)
        self.count = len(items)
        self.mean = self.total / max(1, self.count)
'''


def replay_workspace(tmp_path: Path, files: int = 6) -> Path:
    """Write ``files`` copies of :data:`SOURCE` (each with its own function name)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    for n in range(files):
        (tmp_path / f"m{n}.py").write_text(SOURCE.replace("shout", f"shout{n}"), encoding="utf-8")
    return tmp_path


class FakeSuggester:
    """Answers every key after ``delay`` seconds with ``answer(remaining target)``."""

    def __init__(self, region: Region, text: str, mode: str, delay: float = 0.0) -> None:
        self.label = f"fake-{mode}"
        self.mode = mode
        self.delay = delay
        self.before, self.after = region_buffers(text, region)
        self.target = region.target
        self.calls: list[str] = []
        self.versions: list[int] = []

    async def start(self, workspace: Path) -> None:
        self.calls.append("start")

    async def open(self, path: Path, text: str, version: int) -> None:
        assert text == self.before + self.after
        self.calls.append("open")

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        self.calls.append(f"rest {line}:{column}")

    def key(
        self, path: Path, text: str, line: int, column: int, version: int, on_answer: AnswerCallback
    ) -> None:
        self.versions.append(version)
        typed = text[len(self.before) : len(text) - len(self.after)]
        assert self.target.startswith(typed)
        remaining = self.target[len(typed) :]
        suggestion = {"right": remaining, "wrong": "zzz()", "silent": ""}[self.mode]
        if suggestion:
            loop = asyncio.get_running_loop()
            answer = Answer(version=version, text=suggestion, arrived=0.0)

            def deliver() -> None:
                on_answer(Answer(answer.version, answer.text, time.perf_counter()))

            if self.delay:
                loop.call_later(self.delay, deliver)
            else:  # before the replay's next step, however late the schedule runs
                loop.call_soon(deliver)

    async def close_file(self, path: Path, text: str) -> None:
        self.calls.append("close")

    async def stop(self) -> None:
        self.calls.append("stop")


TEXT = "def f(a):\n    b = a + 1\n    c = b * 2\n    return c\n"
"""A file whose lines 1-3 the fake replays retype."""


class SilentSuggester:
    """Shows nothing; counts what it was told."""

    label = "silent"

    def __init__(self) -> None:
        self.keys = 0

    async def start(self, workspace: Path) -> None:
        return None

    async def open(self, path: Path, text: str, version: int) -> None:
        return None

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        return None

    def key(
        self, path: Path, text: str, line: int, column: int, version: int, on_answer: AnswerCallback
    ) -> None:
        self.keys += 1

    async def close_file(self, path: Path, text: str) -> None:
        return None

    async def stop(self) -> None:
        return None
