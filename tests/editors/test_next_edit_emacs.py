"""Emacs's next edits (editors/emacs/lsp-assist-next-edit.el) in a terminal, real server.

``emacs -nw -Q`` in tmux with the install snippet of docs/editors.md: the keys a user
types (rename a definition with ``M-d`` and typing, ``TAB`` to jump, ``TAB`` to apply,
``C-g``, removing a parameter), the screen read back after each, and the server's
``lspAssist.nextEditStats`` asked through eglot's connection with ``M-:``. Symbolic next
edits need no model: the server runs with an absent model file.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from .support.emacs import EMACS
from .support.next_edit_source import SHAPES
from .support.project import EDITORS
from .support.tmux import TMUX, Screen

pytestmark = [pytest.mark.editor]


def init_el(workspace: Path, server: str) -> str:
    """The install snippet of docs/editors.md, with the server and no model."""
    settings = (
        f'(:modelPath "{workspace / "absent.gguf"}" :metrics :json-false :persist :json-false)'
    )
    return f"""(unless (locate-library "eglot")
  (require 'package)
  (add-to-list 'package-directory-list "/usr/share/emacs/site-lisp/elpa")
  (package-initialize))
(add-to-list 'load-path {json.dumps(str(EDITORS / "emacs"))})
(require 'lsp-assist)
(setq lsp-assist-command '({json.dumps(server)} "serve"))
(setq lsp-assist-settings '{settings})
(global-lsp-assist-mode 1)
"""


STATS = (
    "(let ((s (jsonrpc-request (eglot-current-server) :workspace/executeCommand "
    '\'(:command "lspAssist.nextEditStats")))) (message "stats shown=%s accepted=%s" '
    "(plist-get s :shown) (plist-get s :accepted)))"
)


@pytest.mark.skipif(EMACS is None or TMUX is None, reason="needs emacs and tmux")
def test_emacs_nw_next_edit_jump_apply_dismiss_and_delete(
    tmp_path: Path, server_command: str
) -> None:
    assert EMACS is not None
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "pyproject.toml").write_text('[project]\nname = "ws"\nversion = "0"\n')
    (workspace / "shapes.py").write_text(SHAPES)
    init = tmp_path / "init.el"
    init.write_text(init_el(workspace, server_command))
    env = ["env", f"XDG_CACHE_HOME={tmp_path / 'cache'}", f"HOME={tmp_path}"]
    quiet = "(setq native-comp-async-report-warnings-errors 'silent)"
    command = [*env, EMACS, "-nw", "-Q", "--eval", quiet, "-l", str(init), "shapes.py"]
    if "LSP_ASSIST_THREADS" not in os.environ:
        command.insert(1, "LSP_ASSIST_THREADS=2")
    screen = Screen(command, workspace, width=110, rows=30, joined=True)
    try:
        # The mode line's state comes from the server's status (no model: an error).
        screen.wait(lambda s: "✨error" in s, "the server's status")

        # Rename `area` at its definition: the next edit is the use above, on line 2,
        # drawn as the old name then the new one, with the hint.
        screen.send("M-g", "g", "5", "Enter")
        screen.send("M-f", "M-f", "M-b", "M-d")
        screen.send("-l", "surface")
        screen.wait(lambda s: "next edit (TAB)" in s, "the next edit")
        assert screen.line(2).startswith("    print(areasurface(2, 3))  next edit (TAB)")
        assert screen.line(5) == "def surface(width, height, depth):"
        screen.send("Tab")  # jump: point on `area` of line 2, nothing changed
        screen.wait_cursor((10, 2))
        assert screen.line(2).startswith("    print(areasurface(2, 3))")
        screen.send("Tab")  # apply; the next one follows, below
        screen.wait(lambda s: s.splitlines()[2] == "    print(surface(2, 3))", "the applied edit")
        screen.wait(lambda s: "sum(areasurface(w, h, 1)" in s, "the following edit")
        screen.send("Tab")
        screen.wait_cursor((15, 10))
        screen.send("Tab")
        screen.wait(lambda s: "print(areasurface(2, 3, 4))" in s, "the last reference")
        assert screen.line(10).startswith("    return sum(surface(w, h, 1) for")
        screen.send("C-g")  # dismiss
        screen.wait(lambda s: "next edit" not in s, "the dismissal")
        assert screen.line(13) == "print(area(2, 3, 4))"

        # Remove the parameter `depth`: the third argument of line 10 is shown deleted.
        screen.send("M-g", "g", "5", "Enter")
        screen.send("C-e", "C-b", "C-b", "M-BSpace", "BSpace", "BSpace")
        screen.wait(lambda s: "next edit: delete (TAB)" in s, "the deletion")
        assert screen.line(5) == "def surface(width, height):"
        assert screen.line(10).startswith(
            "    return sum(surface(w, h, 1) for w, h in shapes)  next"
        )
        screen.send("Tab")
        screen.wait_cursor((27, 10))
        screen.send("Tab")
        screen.wait(
            lambda s: s.splitlines()[10] == "    return sum(surface(w, h) for w, h in shapes)",
            "the applied deletion",
        )

        # The server counted the shows and the three accepts (the commands reached it).
        screen.send("M-:")
        screen.send("-l", STATS)
        screen.send("Enter")
        # the message, not the expression being typed (which holds "stats shown=%s")
        text = screen.wait(lambda s: re.search(r"stats shown=\d+ accepted=\d+", s), "the stats")
        found = re.search(r"stats shown=(\d+) accepted=(\d+)", text)
        assert found is not None and found.group(2) == "3", text
        assert int(found.group(1)) >= 4, text
    finally:
        screen.close()
