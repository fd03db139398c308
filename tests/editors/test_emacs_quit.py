"""Quitting Emacs with a suggestion on screen: the server's session still closes cleanly.

Emacs does not shut eglot's servers down on ``C-x C-c``: it sends them SIGHUP (seen
with strace: ``SIGHUP {si_code=SI_USER, si_pid=<emacs>}``). ``lsp-assist serve`` takes
it as ``shutdown`` + ``exit``: the suggestion still shown is written ``ignored`` in the
metrics log, after the request's own record. The server used to die of the signal, and
the suggestion's line was never written.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from .support.emacs import emacs_in_tmux, install_snippet, needs_eglot, tmux_env
from .support.metrics import metrics_lines, shown_lines
from .support.project import MAIN, REPO
from .support.tmux import needs_tmux

pytestmark = [pytest.mark.editor, pytest.mark.slow]

LAST = MAIN.splitlines()[-1]  # "    print(add("


@needs_eglot
@needs_tmux
def test_quitting_emacs_writes_the_suggestion_on_screen_as_ignored(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    log = tmp_path / "server.log"
    command = f'("{server_command}" "serve" "--log-level" "INFO" "--log-file" "{log}")'
    snippet = install_snippet(REPO)
    init = tmp_path / "init.el"
    init.write_text(snippet + f"(setq lsp-assist-command '{command})\n")
    tmux = emacs_in_tmux(init, workspace / "main.py", env=tmux_env(server_env))
    try:
        assert tmux.search(r"✨ready", 180), tmux.text()
        tmux.send("M->")
        tmux.send("C-b")  # the end of `    print(add(`: point rests, an automatic request
        until = time.monotonic() + 120
        while not any(
            x.startswith(LAST) and len(x.rstrip()) > len(LAST) for x in tmux.text().splitlines()
        ):
            assert time.monotonic() < until, tmux.text()
            time.sleep(0.2)
        tmux.send("C-x", "C-c")  # nothing modified: Emacs quits at once
        until = time.monotonic() + 30
        while tmux.alive():
            assert time.monotonic() < until, "Emacs did not quit"
            time.sleep(0.2)
    finally:
        tmux.close()

    cache = Path(server_env["XDG_CACHE_HOME"])
    shown: list[dict[str, Any]] = []
    until = time.monotonic() + 30  # the server closes its session after Emacs is gone
    while not shown and time.monotonic() < until:
        shown = shown_lines(cache)
        time.sleep(0.2)
    text = log.read_text() if log.exists() else ""
    assert "closing the session" in text, text[-3000:]
    assert shown and shown[-1]["outcome"] == "ignored", (shown, text[-3000:])
    requests = [x.get("request_id") for x in metrics_lines(cache) if x.get("event") != "shown"]
    assert shown[-1]["item"].split(".")[0] in requests, (shown, requests)
