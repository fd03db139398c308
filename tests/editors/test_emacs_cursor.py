"""Emacs in a terminal: where point rests, the server evaluates the prompt (issue 21).

`emacs -nw -Q` with the install snippet in tmux, the real server with SmolLM2 on a
stdlib file nobody here wrote. Point jumps far down the file (``M-g g``) and rests:
lsp-assist.el reports it (``lspAssist/didMoveCursor`` after
``lsp-assist-report-cursor-delay``, 0.3 s), the server evaluates the prompt there, and
the first request after ``C-e RET`` finds most of its prompt in the KV cache. A jump
followed at once by ``C-e RET`` (keys already queued: no rest, no report) is the
control: its first request is a cold prompt, as every first request after a jump was.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from .test_emacs import (
    EMACS,
    REPO,
    Tmux,
    env_settings,
    install_snippet,
    needs_eglot,
    needs_tmux,
    tmux_env,
)
from .test_nvim_cursor import first_model_request_after, model_requests, wait_prefilled

SOURCE = Path(asyncio.__file__).with_name("queues.py")


@needs_eglot
@needs_tmux
def test_emacs_nw_reports_where_point_rests_and_the_first_request_there_is_warm(
    workspace: Path, server_env: dict[str, str], tmp_path: Path
) -> None:
    assert EMACS is not None
    text = SOURCE.read_text()
    path = workspace / "queues.py"
    path.write_text(text)
    lines = text.split("\n")
    rested, hurried = (
        next(i for i in range(len(lines) * share // 10, len(lines)) if lines[i].strip()) + 1
        for share in (4, 8)
    )
    init = tmp_path / "init.el"
    log = tmp_path / "server.log"
    init.write_text(
        install_snippet(REPO)
        + "(setq lsp-assist-command (append lsp-assist-command\n"
        + f'  \'("--log-file" "{log}" "--log-level" "DEBUG")))\n'
    )
    env = tmux_env(server_env)
    env.update(env_settings({"contextBudget": 512}))
    cache = Path(server_env["XDG_CACHE_HOME"])
    command = [
        EMACS,
        "-nw",
        "-Q",
        "--eval",
        "(setq native-comp-async-report-warnings-errors 'silent)",
    ]
    tmux = Tmux(tmp_path, [*command, "-l", str(init), str(path)], env, width=120)
    try:
        assert tmux.wait_for(r"✨ready", 240), tmux.screen()
        time.sleep(2)  # the prefill at the file's start
        tmux.keys("M-g", "g")
        tmux.keys(str(rested), literal=True)
        tmux.keys("Enter")
        wait_prefilled(log, rested - 1)  # the rest: the report after 0.3 s, the prefill
        before = len(model_requests(cache))
        tmux.keys("C-e", "Enter")
        warm = first_model_request_after(cache, before)

        tmux.keys("M-g", "g")
        tmux.keys(f"{hurried}", literal=True)
        tmux.keys("Enter", "C-e", "Enter")  # queued at once: point never rests
        cold = first_model_request_after(cache, len(model_requests(cache)))
    finally:
        tmux.close()
    assert warm["prompt_tokens"] > 200 and cold["prompt_tokens"] > 200, (warm, cold)
    assert warm["reused_tokens"] >= warm["prompt_tokens"] * 0.8, warm
    assert cold["reused_tokens"] < cold["prompt_tokens"] * 0.3, cold
