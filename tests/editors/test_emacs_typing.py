"""Emacs in tmux: a user who types at 180 ms a key, without waiting, sees suggestions.

Issue 45: lsp-assist.el asked for a suggestion only once point had rested
``lsp-assist-delay`` (0.3 s), which never elapses between the keys of a steady typist:
at one key every 180 ms no suggestion showed at any of 97 keys. It now asks
``lsp-assist-debounce-ms`` (75) after each key and cancels the request still out when
the next key comes. Here ``emacs -nw -Q`` with the install snippet of docs/editors.md
(eglot, electric indent on, as ``-Q`` has it), the real server with SmolLM2 (one model
thread: the cores are shared), a region of a stdlib file nobody here wrote removed,
point resting at the end of the line above it until the server has evaluated the
prompt there (``lspAssist/didMoveCursor``, or the request sent where point rests),
then ``RET`` and the region typed one key every 180 ms (tmux send-keys), the screen
read before every key (support/typing.py). A suggestion after point must show at more
than 15 % of the keys; with the 0.3 s delay back it showed at none.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from .support.emacs import EMACS, emacs_in_tmux, install_snippet, needs_eglot
from .support.metrics import model_requests
from .support.project import EDITORS, REPO, env_settings
from .support.tmux import needs_tmux
from .support.typing import (
    Tally,
    type_in_tmux,
    typed_lines_show,
    typing_setup,
    wait_rested,
    without_region,
)

pytestmark = [pytest.mark.editor, pytest.mark.slow]

NO_JIT_COMPILATION = "(setq native-comp-deferred-compilation nil native-comp-jit-compilation nil)\n"
"""Before the snippet: no native compilation in the background. Debian's Emacs 28
compiles eglot and what it loads (tramp: minutes of a core) on first use, once for a
user (docs/editors.md, Install); a test's Emacs is killed before it ends, so each one
began again and took a core from the server while the keys came (5 to 42 of 83 keys
with a suggestion, with a compile of tramp running beside the typing or not)."""


@needs_eglot
@needs_tmux
def test_emacs_nw_shows_suggestions_while_the_user_types_at_180_ms_a_key(
    workspace: Path, server_env: dict[str, str], tmp_path: Path
) -> None:
    above, region, text = without_region()
    path = workspace / "queues.py"
    path.write_text(text)
    log = tmp_path / "server.log"
    init = tmp_path / "init.el"
    init.write_text(
        NO_JIT_COMPILATION
        + install_snippet(REPO)
        + "(setq lsp-assist-command (append lsp-assist-command\n"
        + f'  \'("--log-file" "{log}" "--log-level" "DEBUG")))\n'
    )
    env, settings = typing_setup(server_env)
    env.update(env_settings(settings))
    env.pop("TMUX", None)
    env["TERM"] = "xterm-256color"
    cache = Path(server_env["XDG_CACHE_HOME"])
    tmux = emacs_in_tmux(init, path, env=env, width=120)
    tally = Tally("emacs")
    try:
        assert tmux.search(r"✨ready", 240), tmux.text()
        time.sleep(2)  # the prefill at the file's start
        before = len(model_requests(cache))
        tmux.send("M-g", "g")
        tmux.send(str(above + 1), literal=True)
        tmux.send("Enter", "C-e")
        wait_rested(log, cache, above, before)  # the report, or the request, evaluated it
        tmux.send("Enter")  # a new line, indented by electric-indent-mode
        type_in_tmux(tmux, region, tally)
        screen = tmux.screen()
        assert typed_lines_show(screen, region), (region, screen)  # electric indent
    finally:
        tmux.close()
    server_log = log.read_text()
    # The cancel of a superseded request names it (jsonrpc-async-request returns nil:
    # lsp-assist.el cancelled "None" at every key before).
    assert 'unknown message id "None"' not in server_log, server_log[-3000:]
    tally.check(server_log[-3000:])


@needs_eglot
def test_emacs_debounce_is_75_ms_and_the_obsolete_delay_still_wins() -> None:
    """``lsp-assist-debounce-ms`` (75) sets the wait; a number in the obsolete
    ``lsp-assist-delay`` (or its older alias ``lsp-assist-preview-delay``), as a user's
    init may still set it, wins, in seconds."""
    assert EMACS is not None
    forms = (
        "(progn (require 'lsp-assist)"
        ' (princ (format "%S" (list (lsp-assist--debounce-seconds)'
        " (let ((lsp-assist-debounce-ms 120)) (lsp-assist--debounce-seconds))"
        " (progn (setq lsp-assist-preview-delay 0.5) (lsp-assist--debounce-seconds))))))"
    )
    proc = subprocess.run(
        [EMACS, "--batch", "-L", str(EDITORS / "emacs"), "--eval", forms],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "(0.075 0.12 0.5)", proc.stdout + proc.stderr
