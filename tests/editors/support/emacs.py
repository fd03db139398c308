"""Emacs with lsp-assist.el as docs/editors.md installs it: the snippet and a terminal.

``install_snippet`` is the Install section's elisp with the checkout's path put in
(``emacs_section`` and ``code_block`` read docs/editors.md); ``emacs_in_tmux`` starts
``emacs -nw -Q`` in a tmux :class:`Screen` with an init file, the way "Check it works"
says, and ``quit_without_saving`` ends it; ``tmux_env`` is the server's environment
there (SmolLM2, one thread, the test settings as LSP_ASSIST_* variables).
``needs_eglot`` skips, saying why, where Emacs or eglot is missing.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .project import REPO, SETTINGS, env_settings, one_thread
from .tmux import Screen

EMACS = shutil.which("emacs")
DOCS = REPO / "docs" / "editors.md"
PLACEHOLDER = "/path/to/lsp-assist"


def eglot_available() -> bool:
    """Whether `emacs --batch` (site-start on) can load eglot."""
    if EMACS is None:
        return False
    proc = subprocess.run(
        [EMACS, "--batch", "--eval", "(require 'eglot)"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode == 0


HAVE_EGLOT = eglot_available()
needs_eglot = pytest.mark.skipif(
    not HAVE_EGLOT,
    reason="emacs not found (apt-get install emacs-nox elpa-eglot)"
    if EMACS is None
    else "eglot not loadable in emacs --batch (apt-get install elpa-eglot)",
)


def emacs_section() -> str:
    """The Emacs section of docs/editors.md."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("## Emacs (")
    return text[start : text.index("\n## ", start + 1)]


def code_block(section: str, heading: str, language: str) -> str:
    """The first ``language`` code block after ``heading`` in ``section``."""
    after = section[section.index(heading) :]
    match = re.search(rf"```{language}\n(.*?)```", after, re.S)
    assert match, f"no {language} block under {heading!r} in docs/editors.md"
    return match.group(1)


def install_snippet(checkout: Path | str = REPO) -> str:
    """The install snippet of the docs, with the placeholder replaced by ``checkout``."""
    snippet = code_block(emacs_section(), "### Install", "elisp")
    assert PLACEHOLDER in snippet
    return snippet.replace(PLACEHOLDER, str(checkout))


def tmux_env(server_env: dict[str, str]) -> dict[str, str]:
    """The server's environment (SmolLM2, caches under tmp, the test settings) for tmux."""
    env = one_thread(server_env)
    # Time caps for a loaded machine: a slow answer is better than none here.
    env.update(env_settings(dict(SETTINGS, promptTimeoutMs=120000, generationTimeoutMs=120000)))
    env.pop("TMUX", None)
    env["TERM"] = "xterm-256color"
    return env


QUIET = "(setq native-comp-async-report-warnings-errors 'silent)"
"""Keeps Emacs 28's native-compilation warnings from splitting the frame."""


def emacs_in_tmux(
    init: Path, *files: str | Path, env: dict[str, str], width: int = 100, quiet: bool = True
) -> Screen:
    """``emacs -nw -Q`` in tmux (32 rows) loading ``init`` and visiting ``files``.

    ``quiet`` evaluates :data:`QUIET` first; ``env`` is Emacs's and its server's.
    """
    assert EMACS is not None
    command = [EMACS, "-nw", "-Q", *(["--eval", QUIET] if quiet else []), "-l", str(init)]
    return Screen([*command, *map(str, files)], env=env, width=width, rows=32)


def quit_without_saving(screen: Screen, timeout: float = 30) -> None:
    """``C-x C-c`` on a modified buffer: no to saving, yes to quitting; Emacs exits."""
    screen.send("C-x", "C-c")
    assert screen.search(r"Save file", 10), screen.text()
    screen.send("n")
    assert screen.search(r"yes or no", 10), screen.text()
    screen.send("yes", literal=True)
    screen.send("Enter")
    screen.wait_gone(timeout)
