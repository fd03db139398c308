"""A steady typist in a real editor: the region retyped, the keys with ghost text counted.

The typing tests of the three editors (tests/editors/test_nvim_typing.py,
test_emacs_typing.py, test_vscode_real.py) remove a region of a standard-library file
nobody here wrote (``typing_region``), rest the cursor above it until the server has
evaluated the prompt there, open a line and type the region back at one key every
``KEY_S`` without waiting for any answer (``region_keys``; ``type_in_tmux`` for the
terminal editors, drive.mjs's ``typeReading`` for VS Code), reading the screen before
each key. A :class:`Tally` counts the keys, those with ghost text on screen and those
whose ghost text is a right prefix of what the user types next on that line.

In the suite the model is SmolLM2 with the tests' small budget (``TYPING_SETTINGS``);
``LSP_ASSIST_TYPING_MODEL=coder-0.5b`` (a preset) runs the same tests with that model
and the server's defaults, as a new user has them, for the figures of docs/editors.md
(``typing_setup``). Each test prints its :meth:`Tally.summary` (``pytest -s``).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .metrics import model_requests
from .project import SETTINGS, STDLIB_FILE, one_thread
from .tmux import Screen

KEY_S = 0.18
"""Seconds between two keys: a steady typist (about 65 words a minute)."""
FLOOR = 0.15
"""The share of keys that must show ghost text (a client that stalls shows none)."""
TYPING_SETTINGS = {
    k: v for k, v in SETTINGS.items() if k not in ("answerAfterMs", "debounceMs", "maxTokens")
}
"""The server's defaults but for the tests' small budget and caps (early answers on, as a
user has them)."""
MODEL_VARIABLE = "LSP_ASSIST_TYPING_MODEL"


def typing_region(lines: list[str]) -> tuple[int, list[str]]:
    """The first run of 3 statements at one indentation in a function body whose line
    above is at the same indentation and opens nothing (so a new line below it indents as
    the region): (0-based index of that line above, the region's lines)."""
    for i in range(len(lines) // 3, len(lines) - 4):
        above, region = lines[i], lines[i + 1 : i + 4]
        indent = len(above) - len(above.lstrip())
        if indent < 8 or above.rstrip().endswith((":", "(", "[", "{", ",", "\\")):
            continue
        if any(len(x) - len(x.lstrip()) != indent for x in region):
            continue
        stripped = [x.strip() for x in region]
        if any(not x or x.startswith(("#", '"', "'")) or x.endswith((":", "\\")) for x in stripped):
            continue
        if all(x.count("(") == x.count(")") for x in stripped):
            return i, region
    raise AssertionError("no typing region in " + str(STDLIB_FILE))


def without_region() -> tuple[int, list[str], str]:
    """``STDLIB_FILE`` with its typing region removed: (the line above it, the region,
    the text left)."""
    lines = STDLIB_FILE.read_text().split("\n")
    above, region = typing_region(lines)
    return above, region, "\n".join(lines[: above + 1] + lines[above + 1 + len(region) :])


def region_keys(region: list[str]) -> list[tuple[str, str, str]]:
    """Each key that types ``region`` back after a new line was opened below the line
    above it (the editor indents): (what is typed on the line before the key, what is
    left to type on it, the key: a character, or ``Enter`` between lines)."""
    keys: list[tuple[str, str, str]] = []
    for n, line in enumerate(region):
        text = line.strip()
        if n:
            keys.append((region[n - 1].strip(), "", "Enter"))
        keys += [(text[:i], text[i:], char) for i, char in enumerate(text)]
    return keys


def ghost_on_row(row: str, typed: str) -> str:
    """What a terminal row shows right of the ``typed`` text of its line (after the
    editor's indentation): the ghost text ('' when the row does not show all of
    ``typed`` yet)."""
    base = row[: len(row) - len(row.lstrip())] + typed
    shown = row.rstrip()
    # Nothing after it (a typed blank is not on the row), or the editor has not drawn
    # the last key yet (a busy machine): no ghost text to be seen.
    if not shown.startswith(base.rstrip()) or shown == base.rstrip():
        return ""
    return shown[len(base) :] if shown.startswith(base) else shown[len(base.rstrip()) :]


def typed_lines_show(screen: list[str], region: list[str]) -> bool:
    """Whether each line of ``region``, with its indentation (the editor's auto-indent),
    starts a line of ``screen`` (ghost text may follow the last one)."""
    return all(any(row.startswith(line.rstrip()) for row in screen) for line in region)


@dataclass
class Tally:
    """The keys typed, those read with ghost text on screen (what was typed on the line
    and what showed), and how many of those showed a right prefix of what came next."""

    editor: str
    keys: int = 0
    shown: list[tuple[str, str]] = field(default_factory=list)
    right: int = 0
    line_starts: list[str] = field(default_factory=list)
    """What showed at each new line's first key (after the editor's indentation; '' none)."""

    def key(self, typed: str, rest: str, ghost: str | None) -> None:
        """Count one key: ``ghost`` is what showed before it (None: not read). Read before
        a line's first character (nothing typed on it yet), it counts as a line start."""
        self.keys += 1
        if not typed and ghost is not None:
            self.line_starts.append(ghost)
        if typed and ghost:
            self.shown.append((typed, ghost))
            first = ghost.split("\n")[0].rstrip()
            if first and rest.startswith(first):
                self.right += 1

    def summary(self) -> str:
        """One line with the figures (the tests print it)."""
        share = len(self.shown) / max(1, self.keys)
        starts = ""
        if self.line_starts:
            seen = sum(1 for ghost in self.line_starts if ghost.strip())
            starts = f"; at a new line's first key at {seen} of {len(self.line_starts)}"
        return (
            f"typing {self.editor}: ghost text at {len(self.shown)} of {self.keys} keys "
            f"({share:.0%}), a right prefix of the rest of the line at {self.right}{starts}"
        )

    def check(self, context: str = "") -> None:
        """Fail unless enough keys were typed and more than ``FLOOR`` of them showed ghost
        text; ``context`` (the server's log, say) goes into the message."""
        print(self.summary())
        assert self.keys > 60, self.summary()
        assert len(self.shown) > FLOOR * self.keys, f"{self.summary()}: {self.shown}\n{context}"


def type_in_tmux(screen: Screen, region: list[str], tally: Tally) -> None:
    """Type ``region`` into the editor in ``screen`` at one key every ``KEY_S`` (never
    waiting for an answer), reading the cursor's row before each key into ``tally``."""
    for typed, rest, key in region_keys(region):
        time.sleep(KEY_S)
        ghost = None
        if typed or key != "Enter":  # a line's first key too (a line start)
            ghost = ghost_on_row(screen.screen()[screen.cursor()[1]], typed)
        screen.send(key, literal=key != "Enter")
        tally.key(typed, rest, ghost)
    time.sleep(KEY_S)


def wait_rested(log: Path, cache: Path, line: int, before: int, timeout: float = 180) -> None:
    """Wait until the server has evaluated the prompt where the cursor rests on ``line``
    (0-based): a cursor prefill there in its log (``--log-level DEBUG``), or a model
    request after the first ``before`` in its metrics log. An editor that asks where the
    cursor rests (Emacs, after any move) sends its request with the cursor report; the
    request goes first and evaluates the prompt, and the prefill has nothing left to do.
    """
    pattern = re.compile(rf"prefilled \(cursor\) \S+:{line}:\d+: ")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.exists() and pattern.search(log.read_text(errors="replace")):
            return
        if len(model_requests(cache)) > before:
            return
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise AssertionError(f"the prompt at line {line} not evaluated within {timeout} s:\n{tail}")


def typing_model() -> str | None:
    """The preset ``LSP_ASSIST_TYPING_MODEL`` names (None: the suite's SmolLM2)."""
    return os.environ.get(MODEL_VARIABLE) or None


def typing_setup(server_env: dict[str, str]) -> tuple[dict[str, str], dict[str, Any]]:
    """The server's environment (one model thread unless LSP_ASSIST_THREADS says) and
    its settings for a typing test: SmolLM2 and ``TYPING_SETTINGS``, or the preset of
    ``LSP_ASSIST_TYPING_MODEL`` with the server's defaults (its ``modelPath`` only)."""
    env = one_thread(server_env)
    preset = typing_model()
    if preset is None:
        return env, dict(TYPING_SETTINGS)
    from lsp_assist.backends.models import preset_path

    path = str(preset_path(preset))
    env["LSP_ASSIST_MODEL_PATH"] = path
    return env, {"modelPath": path}
