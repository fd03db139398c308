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

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import SETTINGS
from .test_emacs import one_thread
from .test_nvim import NVIM, TMUX, plugin_in_tmux
from .test_nvim_restart import status
from .test_shown_nvim import metrics_lines

pytestmark = [pytest.mark.editor, pytest.mark.slow]

SOURCE = Path(asyncio.__file__).with_name("queues.py")
CURSOR_SETTINGS = {**SETTINGS, "contextBudget": 512}


def model_requests(cache: Path) -> list[dict[str, Any]]:
    """The model requests of the metrics log (no shown lines, no type-through hits)."""
    return [x for x in metrics_lines(cache) if "event" not in x and not x["cache_hit"]]


def first_model_request_after(cache: Path, count: int, timeout: float = 120) -> dict[str, Any]:
    """The first model request recorded after the first ``count``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        requests = model_requests(cache)
        if len(requests) > count:
            return requests[count]
        time.sleep(0.1)
    raise AssertionError(f"no model request after {count}: {model_requests(cache)}")


def wait_prefilled(log: Path, line: int, timeout: float = 180) -> str:
    """The server log's line for a cursor prefill on ``line`` (0-based), once written
    (``--log-level DEBUG``): a fixed rest was too short on two busy cores."""
    pattern = re.compile(rf"prefilled \(cursor\) \S+:{line}:\d+: .*")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found.group(0)
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise AssertionError(f"no prefill at line {line} within {timeout} s:\n{tail}")


def test_nvim_reports_where_the_cursor_rests_and_the_first_request_there_is_warm(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    text = SOURCE.read_text()
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
