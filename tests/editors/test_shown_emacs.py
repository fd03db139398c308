"""Acceptance per shown suggestion from Emacs in tmux: lsp-assist.el, the real server.

``emacs -nw -Q`` with the install snippet and SmolLM2, keys sent to a terminal: a
suggestion shows, ``M-f`` takes its first word, ``C-g`` dismisses the rest; ``C-c \\``
asks and ``TAB`` takes all; on a new line, a character that differs from the grey text
types over it. lsp-assist.el sends ``textDocument/didShowCompletion``,
``textDocument/didPartiallyAcceptCompletion`` and ``lspAssist/didDismissCompletion``;
the metrics log holds one ``shown`` line per suggestion with its outcome, and
``lsp-assist stats`` prints acceptance per shown suggestion by trigger and model.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .support.emacs import (
    emacs_in_tmux,
    install_snippet,
    needs_eglot,
    quit_without_saving,
    tmux_env,
)
from .support.metrics import in_order, retained_of, shown_lines
from .support.project import REPO
from .support.tmux import needs_tmux

pytestmark = [pytest.mark.editor, pytest.mark.slow]

LAST = "    print(add("


def next_word(text: str) -> str:
    """lsp-assist.el's accept-word unit: blanks, then a run of word or punctuation chars."""
    found = re.match(r"[ \t\n]*(?:[A-Za-z0-9_]+|[^ \t\nA-Za-z0-9_]+)?", text)
    word = found.group() if found else ""
    return word or text


@needs_eglot
@needs_tmux
def test_emacs_reports_shown_partly_accepted_dismissed_accepted_typed_over(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    init = tmp_path / "init.el"
    init.write_text(install_snippet(REPO))
    tmux = emacs_in_tmux(init, workspace / "main.py", env=tmux_env(server_env))

    def row_text(start: str) -> str:
        lines = [x.rstrip() for x in tmux.text().splitlines() if x.startswith(start)]
        return lines[-1] if lines else ""

    accepted_row = [0]

    def new_line() -> str:
        """The line typed after RET (below the accepted one), without its indentation."""
        lines = tmux.text().splitlines()
        row = accepted_row[0] + 1
        return lines[row].strip() if row < len(lines) else ""

    def wait(predicate: Any, timeout: float = 120) -> None:
        until = time.monotonic() + timeout
        while not predicate():
            assert time.monotonic() < until, tmux.text()
            time.sleep(0.2)

    try:
        assert tmux.search(r"✨ready", 180), tmux.text()
        tmux.send("M->")
        tmux.send("C-b")  # the end of `    print(add(`: point rests, an automatic request
        wait(lambda: len(row_text(LAST)) > len(LAST))
        ghost = row_text(LAST)[len(LAST) :]
        word = next_word(ghost)
        assert word != ghost, f"the suggestion {ghost!r} has one word only"
        tmux.send("M-f")  # its first word
        wait(lambda: tmux.cursor()[0] == len(LAST + word))
        tmux.send("C-g")  # dismiss the rest
        wait(lambda: row_text(LAST) == LAST + word)

        tmux.send("C-c", "\\")  # ask now: an explicit request
        wait(lambda: len(row_text(LAST)) > len(LAST + word))
        asked = row_text(LAST)[len(LAST + word) :]
        tmux.send("Tab")
        wait(lambda: tmux.cursor()[0] == len(LAST + word + asked))
        accepted_row[0] = tmux.cursor()[1]

        tmux.send("Enter")
        tmux.send("print(add(", literal=True)
        wait(lambda: new_line().startswith("print(add(") and len(new_line()) > 10, 180)
        third = new_line()[len("print(add(") :]
        other = "q" if third.startswith("z") else "z"
        tmux.send(other, literal=True)  # typed over it
        wait(lambda: new_line() == "print(add(" + other)
        time.sleep(1.5)  # eglot sends the change when Emacs is idle
        quit_without_saving(tmux)
    finally:
        tmux.close()

    cache = Path(server_env["XDG_CACHE_HOME"])
    shown: list[dict[str, Any]] = []
    for _ in range(100):  # written by the server's metrics thread
        shown = shown_lines(cache)
        if any(x["outcome"] == "typed_over" for x in shown):
            break
        time.sleep(0.1)
    dismissed, accepted, typed_over = in_order(
        shown,
        ("dismissed", "automatic"),
        ("accepted", "explicit"),
        ("typed_over", "automatic"),
    )
    assert dismissed["accepted_chars"] == len(word.encode("utf-16-le")) // 2, shown
    assert dismissed["shown_chars"] >= len(ghost.rstrip()), shown
    assert accepted["accepted_chars"] == accepted["shown_chars"] >= len(asked), shown
    assert typed_over["accepted_chars"] == 0, shown
    # what was kept: the word and the accepted text were found, followed and still there
    for kept, rec in zip(
        retained_of(cache, dismissed, accepted), (dismissed, accepted), strict=True
    ):
        assert kept["measured"] in ("early", "on_time"), kept
        assert kept["accepted_chars"] == rec["accepted_chars"], (kept, rec)
        least = word if rec is dismissed else asked.rstrip()
        assert kept["retained_chars"] >= len(least.encode("utf-16-le")) // 2, kept

    stats = subprocess.run(
        [server_command, "stats"], env=server_env, capture_output=True, text=True, timeout=60
    )
    assert stats.returncode == 0, stats.stderr
    print(stats.stdout)  # the replay's figures (pytest -s shows them)
    assert "partly accepted" in stats.stdout.split("shown suggestions", 1)[1], stats.stdout
    as_json = subprocess.run(
        [server_command, "stats", "--json"], env=server_env, capture_output=True, text=True
    )
    figures = json.loads(as_json.stdout)["shown"]
    assert figures["shown"] == len(shown)
    assert figures["partial_acceptance"] > 0 and figures["by_trigger"]["explicit"]["acceptance"]
