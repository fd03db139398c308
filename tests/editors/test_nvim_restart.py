"""Neovim in tmux: a server command that dies, the error with the restart hint, a restart.

The install snippet with ``cmd`` pointing at the right program with a wrong argument
(``serv``): the server exits with code 2 while starting. The statusline shows the error
and names ``:LspAssistRestart``, so does the message, and so does ``:LspAssistComplete``
(not only "not attached"); the message, ``:LspAssistComplete`` and ``:checkhealth
lsp-assist`` also show what the server wrote on stderr (its usage error). After fixing
the command in the config, ``:LspAssistRestart`` starts a fresh server: the statusline
leaves the error state, and a suggestion shows in grey where the user types.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .support.nvim import NVIM, plugin_in_tmux, status
from .support.project import MAIN
from .support.tmux import GREY, SGR, TMUX, foregrounds

pytestmark = [pytest.mark.editor, pytest.mark.slow]

LAST = MAIN.splitlines()[-1]  # "    print(add("


def said_serv(lines: list[str]) -> bool:
    """The server's usage error for ``serv`` is on screen (spaces aside: lines wrap)."""
    return "invalidchoice:'serv'" in "".join(lines).replace(" ", "")


def test_nvim_restart_after_the_server_died_while_starting(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    # Wide enough for the whole error in the statusline and the message on one screen.
    tmux = plugin_in_tmux(
        tmp_path, workspace, server_env, server_command, server_args="serv", rows=30
    )

    def text() -> str:
        return "\n".join(tmux.screen())

    def hit_enter() -> None:
        """Leave "Press ENTER" prompts (the exit messages may fill the command line)."""
        for _ in range(5):
            time.sleep(0.5)
            if "Press ENTER" not in text():
                return
            tmux.send("Enter")

    try:
        # The message when it exits names the command (it may fill the command line) and
        # ends with what the server wrote on stderr: argparse's usage error.
        lines = tmux.wait_for(lambda ls: "then run :LspAssistRestart" in "".join(ls), timeout=60)
        assert said_serv(lines), text()
        hit_enter()
        lines = tmux.wait_for(lambda ls: "lsp-assist: error" in status(ls), timeout=10)
        assert "server exited (code 2" in status(lines), text()
        assert ":LspAssistRestart" in status(lines), text()
        tmux.send(":LspAssistComplete", "Enter")
        lines = tmux.wait_for(
            lambda ls: "not attached to this buffer: server exited" in "".join(ls), timeout=10
        )
        assert said_serv(lines), text()  # its stderr's last line
        hit_enter()
        tmux.send("Escape")
        tmux.send(":checkhealth lsp-assist", "Enter")
        lines = tmux.wait_for(lambda ls: "the last it wrote on stderr" in "".join(ls), timeout=120)
        assert "the server: server exited (code 2" in "".join(lines), text()
        assert said_serv(lines), text()
        tmux.send(":tabclose", "Enter")

        # Fix the command, then restart.
        fixed = f":lua require('lsp-assist').config.cmd = {{ '{server_command}', 'serve' }}"
        tmux.send(fixed, "Enter")
        tmux.send(":LspAssistRestart", "Enter")
        lines = tmux.wait_for(lambda ls: "lsp-assist: ready" in status(ls), timeout=120)
        assert "error" not in status(lines), text()

        tmux.send("G", "A")  # the end of `    print(add(`: an automatic request

        def grey_after_last(_: list[str]) -> bool:
            screen = tmux.screen(colours=True)
            row = max(i for i, x in enumerate(screen) if SGR.sub("", x).startswith(LAST))
            return any(fg == GREY for _, fg in foregrounds(screen[row]))

        try:
            tmux.wait_for(grey_after_last, timeout=90)
        except pytest.fail.Exception:
            tmux.send("M-\\")  # an empty automatic answer: ask explicitly
            tmux.wait_for(grey_after_last, timeout=90)
        assert "lsp-assist: ready" in status(tmux.screen()), text()
        tmux.send("Escape", ":qa!", "Enter")
    finally:
        tmux.close()
