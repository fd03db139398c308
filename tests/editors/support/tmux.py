"""The editors in a real terminal: one tmux server per test, its screen read back.

:class:`Screen` runs one command (Neovim or Emacs with the plugin) in a tmux pane of its
own server (its own socket, no tmux config), sends keys as a user types them and reads
the screen: as lines with their colours (``screen``), as text (``text``), or by waiting
for it (``wait_for`` on lines, ``wait`` on text, ``search`` for a pattern, and the
cursor's position). ``foregrounds`` and ``split_grey`` read a coloured line: the ghost
text is grey (256-colour 244) in both plugins' terminal themes.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import pytest

TMUX = shutil.which("tmux")
needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux not found (apt-get install tmux)")

SGR = re.compile(r"\x1b\[([0-9;]*)m")
"""An SGR escape of ``capture-pane -e`` (the colours of what follows)."""
GREY = "38;5;244"
"""The ghost text's foreground in a 256-colour terminal (both plugins)."""


class Screen:
    """One tmux server of its own (its own socket, no tmux config) running one command.

    ``command`` is a shell command line or an argument list; ``env`` the environment of
    tmux and so of the command (default: this process's); ``width`` x ``rows`` the
    pane's size. With ``joined``, ``text`` joins wrapped lines and drops trailing
    blanks, so a line of the screen is a line of the editor's buffer.
    """

    def __init__(
        self,
        command: str | Sequence[str],
        cwd: Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        width: int = 100,
        rows: int = 24,
        joined: bool = False,
    ) -> None:
        assert TMUX is not None
        self.base = [TMUX, "-L", f"lsp-assist-{uuid.uuid4().hex[:8]}", "-f", "/dev/null"]
        self.env = dict(env) if env is not None else None
        self.joined = joined
        line = command if isinstance(command, str) else shlex.join(command)
        size = ["-x", str(width), "-y", str(rows)]
        subprocess.run(
            [*self.base, "new-session", "-d", "-s", "t", *size, line],
            cwd=cwd,
            env=self.env,
            check=True,
            timeout=30,
        )

    def run(self, *args: str) -> str:
        """Run a tmux command on this server; return its output (fail on an error)."""
        proc = subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=30
        )
        assert proc.returncode == 0, f"tmux {args}: {proc.stderr}"
        return proc.stdout

    def send(self, *keys: str, literal: bool = False) -> None:
        """tmux send-keys: key names (``Enter``, ``M-Right``), or text with ``literal``."""
        self.run("send-keys", "-t", "t", *(["-l"] if literal else []), *keys)

    def screen(self, colours: bool = False) -> list[str]:
        """The visible lines (with their SGR escapes when ``colours``)."""
        flags = ["-p", "-e"] if colours else ["-p"]
        return self.run("capture-pane", "-t", "t", *flags).split("\n")

    def text(self) -> str:
        """The screen as text (wrapped lines joined, blanks cut, when ``joined``)."""
        if not self.joined:
            return self.run("capture-pane", "-p", "-t", "t")
        out = self.run("capture-pane", "-p", "-J", "-t", "t")
        return "\n".join(line.rstrip() for line in out.splitlines())

    def line(self, n: int) -> str:
        """Line ``n`` of the screen (0 is the top: Emacs's menu bar, Neovim's line 1)."""
        return self.text().splitlines()[n]

    def cursor(self) -> tuple[int, int]:
        """The cursor's column and row on the screen."""
        out = self.run("display-message", "-p", "-t", "t", "#{cursor_x},#{cursor_y}")
        x, _, y = out.strip().partition(",")
        return int(x), int(y)

    def alive(self) -> bool:
        """Whether the session (the editor in it) still runs."""
        proc = subprocess.run(
            [*self.base, "has-session", "-t", "t"], env=self.env, capture_output=True, timeout=30
        )
        return proc.returncode == 0

    def wait_for(self, predicate: Callable[[list[str]], object], timeout: float = 15) -> list[str]:
        """Poll the lines until ``predicate(lines)``; fail with the screen on timeout."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self.screen()
            if predicate(lines):
                return lines
            if time.monotonic() > deadline:
                pytest.fail("screen never matched:\n" + "\n".join(lines))
            time.sleep(0.1)

    def wait(self, predicate: Callable[[str], object], what: str, timeout: float = 60) -> str:
        """Poll the text until ``predicate(text)``; fail saying ``what`` never showed."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.text()
            if predicate(text):
                return text
            if time.monotonic() > deadline:
                raise AssertionError(f"{what} never showed:\n{text}")
            time.sleep(0.1)

    def search(self, pattern: str, timeout: float = 60) -> re.Match[str] | None:
        """Wait until the text matches ``pattern`` (multi-line); the match, None on timeout."""
        until = time.monotonic() + timeout
        while True:
            found = re.search(pattern, self.text(), re.M)
            if found or time.monotonic() > until:
                return found
            time.sleep(0.2)

    def wait_cursor(self, expected: tuple[int, int], timeout: float = 30) -> None:
        """Wait until the cursor is at ``expected`` (column, row); fail with the screen."""
        deadline = time.monotonic() + timeout
        while self.cursor() != expected and time.monotonic() < deadline:
            time.sleep(0.1)
        assert self.cursor() == expected, f"cursor {self.cursor()}:\n{self.text()}"

    def wait_gone(self, timeout: float = 60) -> None:
        """Wait until the editor quit (its session ended with it)."""
        deadline = time.monotonic() + timeout
        while self.alive():
            assert time.monotonic() < deadline, "the editor did not quit"
            time.sleep(0.1)

    def close(self) -> None:
        """Kill this tmux server (and the editor in it)."""
        subprocess.run(
            [*self.base, "kill-server"], env=self.env, check=False, capture_output=True, timeout=30
        )


def foregrounds(line: str) -> list[tuple[str, str | None]]:
    """Each visible character of a ``capture-pane -e`` line with its foreground colour."""
    out: list[tuple[str, str | None]] = []
    fg: str | None = None
    pos = 0
    for match in SGR.finditer(line + "\x1b[m"):
        out.extend((ch, fg) for ch in line[pos : match.start()])
        pos = match.end()
        codes = match.group(1).split(";") if match.group(1) else ["0"]
        i = 0
        while i < len(codes):
            code = codes[i]
            if code in ("0", "39"):
                fg = None
            elif code == "38" and i + 1 < len(codes):
                width = 3 if codes[i + 1] == "5" else 5
                fg = ";".join(codes[i : i + width])
                i += width - 1
            elif code.isdigit() and (30 <= int(code) <= 37 or 90 <= int(code) <= 97):
                fg = code
            i += 1
    return out


def split_grey(line: str) -> tuple[str, str]:
    """A ``capture-pane -e`` line as (the text, the grey text after it)."""
    chars = foregrounds(line)
    text = "".join(ch for ch, fg in chars if fg != GREY)
    grey = "".join(ch for ch, fg in chars if fg == GREY)
    return text.rstrip(), grey
