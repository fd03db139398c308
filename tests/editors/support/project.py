"""What every editor test opens and runs: the checkout's paths, a two-file project, the
server's test settings and its environment.

``MAIN`` ends mid-call on ``CURSOR_LINE``, where the tests type; ``SETTINGS`` make the
small model answer fast and whole (``EARLY_SETTINGS`` with early answers on);
``one_thread`` and ``env_settings`` shape the server's environment; ``STDLIB_FILE`` is a
file nobody here wrote (the cursor and typing tests), ``CURSOR_SETTINGS`` their budget.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


EDITORS = REPO / "editors"


BIN = Path(sys.executable).parent


HELPERS = '''"""Small arithmetic helpers used by main.py."""


def add(a: int, b: int) -> int:
    """Return the sum of a and b."""
    return a + b


def scale(values: list[int], factor: int) -> list[int]:
    """Return every value multiplied by factor."""
    return [v * factor for v in values]
'''


MAIN = '''"""Entry point: prints a few sums."""

from helpers import add, scale


def total(values: list[int]) -> int:
    result = 0
    for v in values:
        result = add(result, v)
    return result


def main() -> None:
    numbers = scale([1, 2, 3], 2)
    print(total(numbers))
    print(add(
'''


# 1-based line of MAIN where the tests put the cursor (at its end) and type.
CURSOR_LINE = MAIN.count("\n")


# Small prompt and output so SmolLM2 answers fast; generous time caps so a loaded
# machine (2 shared cores) slows the answer down instead of turning it into an empty one.
# No early answers (docs/serving.md): these tests take the suggestion shown apart with
# the keys, so it must be the whole one, not its start (which a lspAssist/suggestionReady
# notice may replace while a key is pressed); the early-answer tests set answerAfterMs.
SETTINGS = {
    "contextBudget": 256,
    "maxTokens": 12,
    "debounceMs": 0,
    "promptTimeoutMs": 30000,
    "generationTimeoutMs": 30000,
    "answerAfterMs": 0,
}


def find_executable(name: str) -> str | None:
    """Return ``name`` from the venv's bin directory, else from PATH."""
    candidate = BIN / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


# Early answers (docs/serving.md): the server answers after the first visible token and
# writes the rest on; 24 tokens so the whole suggestion is longer than its start.
EARLY_SETTINGS = {**SETTINGS, "answerAfterMs": 1, "maxTokens": 24}

STDLIB_FILE = Path(asyncio.__file__).with_name("queues.py")
"""A standard-library file nobody here wrote (the cursor-prefill and typing tests)."""
CURSOR_SETTINGS = {**SETTINGS, "contextBudget": 512}
"""The cursor tests' settings: a budget that holds a good part of ``STDLIB_FILE``."""


def env_settings(settings: dict[str, Any]) -> dict[str, str]:
    """``settings`` as the server's LSP_ASSIST_<UPPER_SNAKE> environment variables."""
    return {
        "LSP_ASSIST_" + re.sub(r"(?<!^)(?=[A-Z])", "_", key).upper(): str(value)
        for key, value in settings.items()
    }


def one_thread(env: dict[str, str]) -> dict[str, str]:
    """``env`` with one model thread unless the caller chose: on two cores shared with
    other tests, two threads contending made a 51-token request take 22 s instead of 3."""
    env = dict(env)
    env["LSP_ASSIST_THREADS"] = os.environ.get("LSP_ASSIST_THREADS", "1")
    return env
