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

import time
from pathlib import Path

from .support.emacs import emacs_in_tmux, install_snippet, needs_eglot, tmux_env
from .support.metrics import first_model_request_after, model_requests, wait_prefilled
from .support.project import REPO, STDLIB_FILE, env_settings
from .support.tmux import needs_tmux


@needs_eglot
@needs_tmux
def test_emacs_nw_reports_where_point_rests_and_the_first_request_there_is_warm(
    workspace: Path, server_env: dict[str, str], tmp_path: Path
) -> None:
    text = STDLIB_FILE.read_text()
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
    tmux = emacs_in_tmux(init, path, env=env, width=120)
    try:
        assert tmux.search(r"✨ready", 240), tmux.text()
        time.sleep(2)  # the prefill at the file's start
        tmux.send("M-g", "g")
        tmux.send(str(rested), literal=True)
        tmux.send("Enter")
        wait_prefilled(log, rested - 1)  # the rest: the report after 0.3 s, the prefill
        before = len(model_requests(cache))
        tmux.send("C-e", "Enter")
        warm = first_model_request_after(cache, before)

        tmux.send("M-g", "g")
        tmux.send(f"{hurried}", literal=True)
        tmux.send("Enter", "C-e", "Enter")  # queued at once: point never rests
        cold = first_model_request_after(cache, len(model_requests(cache)))
    finally:
        tmux.close()
    assert warm["prompt_tokens"] > 200 and cold["prompt_tokens"] > 200, (warm, cold)
    assert warm["reused_tokens"] >= warm["prompt_tokens"] * 0.8, warm
    assert cold["reused_tokens"] < cold["prompt_tokens"] * 0.3, cold
