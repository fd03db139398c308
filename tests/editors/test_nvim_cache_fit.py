"""Neovim in tmux, early answers on: a start the server drops never comes back (issue 24).

The install snippet, the real server with SmolLM2 answering early (``answerAfterMs`` 1)
and prompt logging on (the metrics log then holds each answer's text). Above
``    return result`` the model writes that line again: its start is answered early and
shown, and the whole, a copy of the line below, is dropped by post-processing.

- Item 7: at a blank line there, asked again (Escape, ``A``), the type-through cache no
  longer serves the dropped start (before 7da03d2 it did: a ``cache_hit`` record with
  the start, the start grey on screen again).
- Item 3: at ``    retur`` there the whole is nothing at all (no next likeliest line on a
  line with code); the server tells the plugin (``lspAssist/suggestionReady``), the
  plugin asks again and the stale start disappears from the screen (before, the start
  stayed: no notice came for a whole shorter than the start).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from .support.metrics import metrics_lines
from .support.nvim import NVIM, plugin_in_tmux, status
from .support.project import EARLY_SETTINGS
from .support.tmux import TMUX, Screen, split_grey

pytestmark = [pytest.mark.editor, pytest.mark.slow]

COPY = "return result"
TOTAL = (
    "def total(values):\n"
    "    result = 0\n"
    "    for v in values:\n"
    "        result = result + v\n"
    "{line}\n"
    "    return result\n"
)
ROW = 4
"""The screen row of the line asked at (line 5 of the file: no tabline)."""
SETTINGS = {**EARLY_SETTINGS, "logPrompts": True}


def _start(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str, line: str
) -> tuple[Screen, Path]:
    """Neovim on total.py with ``line`` above ``return result``, insert mode at its end."""
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    (workspace / "total.py").write_text(TOTAL.format(line=line))
    tmux = plugin_in_tmux(
        tmp_path,
        workspace,
        server_env,
        server_command,
        settings=SETTINGS,
        file="total.py",
        debug_records=True,  # the drop test reads the plugin's notices and refreshes
    )
    tmux.wait_for(lambda ls: "lsp-assist: ready" in status(ls), timeout=180)
    tmux.send("5G", "A")  # an automatic request at the end of line 5
    return tmux, Path(server_env["XDG_CACHE_HOME"])


def _ghost(tmux: Screen) -> str:
    """The grey text on the row asked at."""
    return split_grey(tmux.screen(colours=True)[ROW])[1].strip()


def _requests(cache: Path) -> list[dict[str, Any]]:
    return [x for x in metrics_lines(cache) if "event" not in x]


def _watch(tmux: Screen, cache: Path, until: Any, timeout: float) -> list[str]:
    """The ghosts seen (each change once) until ``until(requests, ghost)`` or ``timeout``."""
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ghost = _ghost(tmux)
        if not seen or seen[-1] != ghost:
            seen.append(ghost)
        if until(_requests(cache), ghost):
            break
        time.sleep(0.05)
    return seen


def _served_the_start(requests: list[dict[str, Any]], rest: str) -> list[dict[str, Any]]:
    """Cache hits that answered with the start of the dropped copy."""
    return [
        r
        for r in requests
        if r["cache_hit"] and r.get("completion") and rest.startswith(r["completion"])
    ]


def test_nvim_asked_again_the_cache_does_not_serve_a_dropped_start(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    tmux, cache = _start(tmp_path, workspace, server_env, server_command, "    ")
    try:
        # The start of the copy shows, then the whole is written (its record).
        seen = _watch(tmux, cache, lambda rs, _g: any(r["answered_early"] for r in rs), 120)
        starts = [g for g in seen if g]
        assert starts and COPY.startswith(starts[0]), (seen, tmux.screen())
        whole = next(r for r in _requests(cache) if r["answered_early"])
        assert not (whole.get("completion") or "").startswith(starts[0]), whole
        time.sleep(3)  # the notice and the refresh, if any
        # Asked again at the same place: a new request, from the cache or the model.
        count = len(_requests(cache))
        tmux.send("Escape")
        time.sleep(0.5)
        tmux.send("A")
        after = _watch(tmux, cache, lambda rs, _g: len(rs) > count, 120)
        after += _watch(tmux, cache, lambda _rs, _g: False, 3)
        requests = _requests(cache)
        assert len(requests) > count, (requests, tmux.screen())
        assert _served_the_start(requests, COPY) == [], requests
        final = _ghost(tmux)
        assert not (final and COPY.startswith(final)), (seen, after, tmux.screen())
        tmux.send("Escape", ":qa!", "Enter")
    finally:
        tmux.close()


def test_nvim_a_whole_that_drops_the_start_clears_it(
    tmp_path: Path, workspace: Path, server_env: dict[str, str], server_command: str
) -> None:
    tmux, cache = _start(tmp_path, workspace, server_env, server_command, "    retur")
    rest = COPY[len("retur") :]  # "n result"
    try:
        seen = _watch(tmux, cache, lambda rs, _g: any(r["answered_early"] for r in rs), 120)
        whole = next(r for r in _requests(cache) if r["answered_early"])
        assert not whole.get("completion"), whole  # the copy of the line below, dropped
        # The notice, the plugin's refresh: the stale start leaves the screen.
        seen += _watch(tmux, cache, lambda _rs, g: not (g and rest.startswith(g)), 60)
        final = _ghost(tmux)
        assert not (final and rest.startswith(final)), (seen, tmux.screen())
        # the refresh's record: no early start there again, the whole (nothing) waited for
        _watch(tmux, cache, lambda rs, _g: len(rs) > 1, 30)
        requests = _requests(cache)
        assert len(requests) > 1 and not requests[1]["answered_early"], requests
        assert not requests[1].get("completion"), requests
        assert _served_the_start(requests, rest) == []
        # What the plugin did (the start may show for less than a sample when the model
        # is quick): the notice made a refresh, asked with the start shown, answered nothing.
        dump = tmp_path / "plugin.json"
        tmux.send("Escape")
        tmux.send(
            ":lua local s = require('lsp-assist.records'); vim.fn.writefile({vim.json.encode("
            f"{{ready = s.ready, refreshes = s.refreshes}})}}, '{dump}')",
            "Enter",
        )
        deadline = time.monotonic() + 10
        while not dump.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        plugin = json.loads(dump.read_text())
        assert "refresh" in [n["action"] for n in plugin["ready"]], plugin
        refresh = plugin["refreshes"][-1]
        assert rest.startswith(refresh["before"]) and refresh["after"] is None, (plugin, seen)
        tmux.send(":qa!", "Enter")
    finally:
        tmux.close()
