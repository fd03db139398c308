"""Neovim's next edits (editors/nvim/lua/lsp-assist/next_edit.lua) against the real server.

nvim_next_edit.lua types what a user types into headless Neovim (rename a definition with
``ciw``, ``<Tab>`` to jump, ``<Tab>`` to apply, ``<Esc>``, typing elsewhere, removing a
parameter) and reports what showed (the extmarks of the next-edit namespace), the buffer
after each key and the server's ``lspAssist.nextEditStats``. The tmux test draws the
same in a terminal and reads the screen. Symbolic next edits need no model: the server
runs with an absent model file (it answers next edits all the same).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from .support.next_edit_source import ACCEPT, SHAPES
from .support.nvim import HERE, NVIM, headless, needs_nvim
from .support.project import EDITORS
from .support.tmux import TMUX, Screen

pytestmark = [pytest.mark.editor]


def settings(workspace: Path) -> dict[str, Any]:
    """No model (symbolic next edits need none), nothing written outside tmp."""
    return {"modelPath": str(workspace / "absent.gguf"), "metrics": False, "persist": False}


@pytest.fixture
def shapes(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "ws"\nversion = "0"\n')
    (root / "shapes.py").write_text(SHAPES)
    return root


def env_for(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["LSP_ASSIST_THREADS"] = env.get("LSP_ASSIST_THREADS", "2")
    return env


def step(report: dict[str, Any], name: str) -> dict[str, Any]:
    found = [s for s in report["steps"] if s["name"] == name]
    context = json.dumps(report, indent=1)[:6000]
    assert found, f"no step {name!r}:\n{context}"
    return found[0]


def start_line(shown: dict[str, Any]) -> int:
    return int(shown["edit"]["range"]["start"]["line"])


@needs_nvim
def test_nvim_next_edit_jump_apply_dismiss_and_delete(
    shapes: Path, server_command: str, tmp_path: Path
) -> None:
    assert NVIM is not None
    out = tmp_path / "next_edit.json"
    env = env_for(tmp_path)
    env.update(
        LSP_ASSIST_TEST_PLUGIN=str(EDITORS / "nvim"),
        LSP_ASSIST_TEST_SERVER=server_command,
        LSP_ASSIST_TEST_FILE=str(shapes / "shapes.py"),
        LSP_ASSIST_TEST_SETTINGS=json.dumps(settings(shapes)),
        LSP_ASSIST_TEST_OUT=str(out),
        LSP_ASSIST_TEST_TIMEOUT_MS="150000",
    )
    proc = headless(["-u", str(HERE / "nvim_next_edit.lua")], shapes, env, timeout=240)
    assert out.exists(), f"no report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    report: dict[str, Any] = json.loads(out.read_text())
    context = json.dumps(report, indent=1)[:8000]
    assert not report["timeout"] and report.get("lua_error") is None, context
    assert report["errors"] == [], context
    assert ACCEPT in report["commands"], context

    # The rename at line 5 shows its next edit at the use on line 2, above the cursor:
    # `area` highlighted, `surface` inline after it, the hint at the end of the line.
    renamed = step(report, "renamed")
    assert renamed["lines"][4] == "def surface(width, height, depth):", context
    assert renamed["cursor"][0] == 5 and start_line(renamed) == 1, context
    assert renamed["edit"]["text"] == "surface"
    assert renamed["edit"]["command"]["command"] == ACCEPT
    marks = {m.get("hl_group") or m.get("virt_text_pos"): m for m in renamed["marks"]}
    assert marks["LspAssistNextEditRange"]["row"] == 1
    assert (marks["LspAssistNextEditRange"]["col"], marks["LspAssistNextEditRange"]["end_col"]) == (
        10,
        14,
    )
    assert marks["inline"]["virt_text"] == [["surface", "LspAssistNextEditText"]]
    assert marks["inline"]["col"] == 14
    assert "next edit (<Tab>)" in marks["eol"]["virt_text"][0][0]
    assert renamed["lines"][1] == "    print(area(2, 3))"  # nothing applied yet

    # <Tab> jumps (the text unchanged), <Tab> again applies and sends the command.
    jumped = step(report, "jumped")
    assert jumped["cursor"] == [2, 10] and jumped["lines"][1] == "    print(area(2, 3))"
    assert jumped["visible"], context
    applied = step(report, "applied")
    assert applied["lines"][1] == "    print(surface(2, 3))", context
    assert applied["cursor"] == [2, 10] and not applied["marks"], context
    assert report["accept_response"]["result"]["accepted"] is True, context

    # The change asked again: the next reference, below (line 10).
    following = step(report, "next")
    assert start_line(following) == 9 and following["edit"]["text"] == "surface", context
    dismissed = step(report, "dismissed")
    assert not dismissed["visible"] and dismissed["marks"] == [], context

    # :LspAssistNextEdit asks again (line 10); applied, line 13 shows; typing elsewhere
    # removes it.
    assert start_line(step(report, "asked again")) == 9, context
    before = step(report, "before typing elsewhere")
    assert before["lines"][9] == "    return sum(surface(w, h, 1) for w, h in shapes)", context
    assert start_line(before) == 12
    elsewhere = step(report, "typed elsewhere")
    assert not elsewhere["visible"] and elsewhere["marks"] == [], context
    assert elsewhere["lines"][-1] == "# done"

    # Removing `depth`: the third argument of the call on line 10 is shown deleted.
    removed = step(report, "parameter removed")
    assert removed["lines"][4] == "def surface(width, height):", context
    assert removed["edit"]["text"] == "" and start_line(removed) == 9, context
    deletion = [m for m in removed["marks"] if m.get("hl_group") == "LspAssistNextEditDelete"]
    assert len(deletion) == 1 and (deletion[0]["col"], deletion[0]["end_col"]) == (27, 30)
    assert not [m for m in removed["marks"] if m.get("virt_text_pos") == "inline"], context
    (hint,) = [m for m in removed["marks"] if m.get("virt_text_pos") == "eol"]
    assert "next edit: delete" in hint["virt_text"][0][0], context
    assert step(report, "deletion jumped")["cursor"] == [10, 27]
    final = step(report, "deletion applied")
    assert final["lines"][9] == "    return sum(surface(w, h) for w, h in shapes)", context

    # The server heard every show and every accept.
    stats = report["stats"]
    assert stats["mode"] == "symbolic", context
    assert stats["accepted"] == 3 and stats["shown"] >= 5 and stats["stale"] == 0, context


@needs_nvim
@pytest.mark.skipif(TMUX is None, reason="tmux not found")
def test_nvim_next_edit_in_tmux(shapes: Path, server_command: str, tmp_path: Path) -> None:
    """The user's view: keys typed in a terminal, the screen read back."""
    assert NVIM is not None
    init = tmp_path / "init.lua"
    init.write_text(
        f"vim.opt.runtimepath:append({json.dumps(str(EDITORS / 'nvim'))})\n"
        "vim.opt.swapfile = false\nvim.opt.shadafile = 'NONE'\n"
        "require('lsp-assist').setup({ cmd = { "
        f"{json.dumps(server_command)}, 'serve' }}, settings = vim.json.decode("
        f"{json.dumps(json.dumps(settings(shapes)))}),\n"
        # The absent model's message would wait for Enter (a hit-enter prompt).
        "  lsp = { handlers = { ['window/showMessage'] = function() end } } })\n"
        "vim.o.statusline = \"%f %= %{v:lua.require'lsp-assist'.statusline()} \"\n"
    )
    env = env_for(tmp_path)
    command = ["env", f"XDG_CACHE_HOME={env['XDG_CACHE_HOME']}", "TERM=tmux-256color"]
    screen = Screen([*command, NVIM, "--clean", "-u", str(init), "shapes.py"], shapes, rows=24)
    try:
        # The statusline says the server answered its status (here: no model, an error).
        screen.wait(lambda s: "lsp-assist: error" in s, "the server's status")
        screen.send("-l", "5Gwciwsurface")
        screen.send("Escape")
        text = screen.wait(lambda s: "next edit (<Tab>)" in s, "the next edit")
        # Above the cursor: the old name (highlighted) and the new one after it.
        assert text.splitlines()[1].startswith("    print(areasurface(2, 3))   next edit"), text
        screen.send("Tab")
        screen.wait_cursor((10, 1))
        screen.send("Tab")
        screen.wait(lambda s: s.splitlines()[1] == "    print(surface(2, 3))", "the applied edit")
        screen.wait(lambda s: "sum(areasurface(w, h, 1)" in s, "the following edit")
        screen.send("Escape")
        screen.wait(lambda s: "next edit" not in s and "sum(area(w, h, 1)" in s, "the dismissal")
    finally:
        screen.close()
