"""Neovim in tmux: where the cursor rests, the server evaluates the prompt (issue 21).

The install snippet and the real server with SmolLM2 on a stdlib file nobody here
wrote. The cursor jumps far down the file in Normal mode and rests there: the plugin
reports it (``lspAssist/didMoveCursor``, ``report_cursor_ms`` 300), the server
evaluates the prompt there, and the first request after ``o`` finds most of its prompt
in the KV cache. A jump followed at once by ``o`` (no rest in Normal mode, no report)
is the control: its first request is a cold prompt, as every first request after a
jump was before.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .support.metrics import first_model_request_after, model_requests, wait_prefilled
from .support.nvim import NVIM, plugin_in_tmux, status
from .support.project import CURSOR_SETTINGS, STDLIB_FILE, one_thread
from .support.tmux import TMUX

pytestmark = [pytest.mark.editor, pytest.mark.slow]


def test_nvim_reports_where_the_cursor_rests_and_the_first_request_there_is_warm(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    text = STDLIB_FILE.read_text()
    (workspace / "queues.py").write_text(text)
    lines = text.split("\n")
    rested, hurried = (
        next(i for i in range(len(lines) * share // 10, len(lines)) if lines[i].strip()) + 1
        for share in (4, 8)
    )
    cache = Path(server_env["XDG_CACHE_HOME"])
    log = tmp_path / "server.log"
    tmux = plugin_in_tmux(
        tmp_path,
        workspace,
        one_thread(server_env),
        server_command,
        server_args=("serve", "--log-file", str(log), "--log-level", "DEBUG"),
        settings=CURSOR_SETTINGS,
        file="queues.py",
    )
    try:
        tmux.wait_for(lambda ls: "lsp-assist: ready" in status(ls), timeout=180)
        time.sleep(2)  # the prefill at the file's start, then the report where it opened
        tmux.send(f"{rested}G")
        wait_prefilled(log, rested - 1)  # the rest: the report after 300 ms, the prefill
        before = len(model_requests(cache))
        tmux.send("o")
        warm = first_model_request_after(cache, before)
        tmux.send("Escape")

        tmux.send(f"{hurried}G", "o")  # no rest in Normal mode: no report
        cold = first_model_request_after(cache, len(model_requests(cache)))
        tmux.send("Escape", ":qa!", "Enter")
    finally:
        tmux.close()
    assert warm["prompt_tokens"] > 200 and cold["prompt_tokens"] > 200, (warm, cold)
    # the new line's prompt: the rested prompt grown by the line below it
    assert warm["reused_tokens"] >= warm["prompt_tokens"] * 0.8, warm
    assert cold["reused_tokens"] < cold["prompt_tokens"] * 0.3, cold
