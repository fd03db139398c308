"""Acceptance per shown suggestion from Neovim in tmux: the real plugin, the real server.

A user's session with SmolLM2, keys sent to a terminal: a suggestion shows, ``<M-Right>``
takes its first word, ``<C-]>`` dismisses the rest; ``<M-\\>`` asks and ``<Tab>`` takes
all; on a new line, a character that differs from the ghost types over it. The plugin
sends ``textDocument/didShowCompletion``, ``textDocument/didPartiallyAcceptCompletion``
(the accepted length in UTF-16 units) and ``lspAssist/didDismissCompletion``; the
metrics log then holds one ``shown`` line per suggestion with its outcome, and
``lsp-assist stats`` prints acceptance per shown suggestion by trigger and model.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .support.metrics import in_order, retained_of, shown_lines
from .support.nvim import NVIM, next_word, plugin_in_tmux
from .support.project import MAIN
from .support.tmux import SGR, TMUX, split_grey

pytestmark = [pytest.mark.editor, pytest.mark.slow]

LAST = MAIN.splitlines()[-1]  # "    print(add("


def test_nvim_reports_shown_partly_accepted_dismissed_accepted_typed_over(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    tmux = plugin_in_tmux(tmp_path, workspace, server_env, server_command)

    def row(lines: list[str], start: str) -> int:
        return max(i for i, line in enumerate(lines) if SGR.sub("", line).startswith(start))

    def line_at(start: str) -> tuple[str, str]:
        screen = tmux.screen(colours=True)
        return split_grey(screen[row([SGR.sub("", x) for x in screen], start)])

    def wait_grey(start: str, timeout: float = 120) -> tuple[str, str]:
        tmux.wait_for(lambda _: bool(line_at(start)[1]), timeout=timeout)
        return line_at(start)

    try:
        tmux.wait_for(lambda lines: any("lsp-assist: ready" in x for x in lines), timeout=120)
        tmux.send("G", "A")  # the end of `    print(add(`: an automatic request
        _, ghost = wait_grey(LAST)
        word = next_word(ghost)
        assert word and word != ghost, f"the suggestion {ghost!r} has one word only"
        tmux.send("M-Right")  # its first word
        tmux.wait_for(lambda _: line_at(LAST)[0] == LAST + word)
        tmux.send("C-]")  # dismiss the rest
        tmux.wait_for(lambda _: line_at(LAST) == (LAST + word, ""))

        tmux.send("M-\\")  # ask now: an explicit request
        _, asked = wait_grey(LAST)
        tmux.send("Tab")
        tmux.wait_for(lambda _: line_at(LAST)[0].startswith(LAST + word + asked))

        tmux.send("Escape", "o")
        tmux.send("-l", "print(add(")
        _, third = wait_grey("    print(add(", timeout=180)
        other = "z" if not third.startswith("z") else "q"
        tmux.send("-l", other)  # typed over it
        tmux.wait_for(lambda _: "print(add(" + other in SGR.sub("", "".join(tmux.screen())))
        tmux.send("Escape", ":qa!", "Enter")
        tmux.wait_gone()
    finally:
        tmux.close()

    cache = Path(server_env["XDG_CACHE_HOME"])
    shown: list[dict[str, Any]] = []
    for _ in range(100):  # the server writes its last lines as it exits
        shown = shown_lines(cache)
        if any(x["outcome"] == "typed_over" for x in shown):
            break
        time.sleep(0.1)
    first, second, third_rec = in_order(
        shown, ("dismissed", "automatic"), ("accepted", "explicit"), ("typed_over", "automatic")
    )
    assert first["accepted_chars"] == len(word.encode("utf-16-le")) // 2, shown
    assert first["shown_chars"] >= len(ghost), shown
    assert second["accepted_chars"] == second["shown_chars"] >= len(asked), shown
    assert third_rec["accepted_chars"] == 0, shown
    assert {x["model"] for x in shown} == {Path(server_env["LSP_ASSIST_MODEL_PATH"]).name}
    # what was kept: the word and the accepted text were found, followed and still there
    for kept, rec in zip(retained_of(cache, first, second), (first, second), strict=True):
        assert kept["measured"] in ("early", "on_time"), kept
        assert kept["accepted_chars"] == rec["accepted_chars"], (kept, rec)
        least = word if rec is first else asked.rstrip()
        assert kept["retained_chars"] >= len(least.encode("utf-16-le")) // 2, kept

    stats = subprocess.run(
        [server_command, "stats"], env=server_env, capture_output=True, text=True, timeout=60
    )
    assert stats.returncode == 0, stats.stderr
    print(stats.stdout)  # the replay's figures (pytest -s shows them)
    table = stats.stdout.split("shown suggestions", 1)[1]
    assert "partly accepted" in table and "chars accepted (mean)" in table, stats.stdout
    as_json = subprocess.run(
        [server_command, "stats", "--json"], env=server_env, capture_output=True, text=True
    )
    figures = json.loads(as_json.stdout)["shown"]
    assert figures["shown"] == len(shown)
    assert figures["by_trigger"]["explicit"]["acceptance"] == 1.0
    assert figures["partial_acceptance"] > 0 and figures["accepted_chars_mean"] > 0
