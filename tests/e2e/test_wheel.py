"""The built wheel as a user installs it: grammars inside, index and completion from outside.

Builds the wheel of this checkout, installs it (``--no-deps``) into a fresh virtual
environment that sees the project venv's third-party packages only through a ``.pth``
line (so its ``lsp_assist`` is the wheel's, never the checkout's), and runs the
installed ``lsp-assist`` from a folder outside the repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from lsp_assist.backends.models import small_model_path
from tests.support.workspace import copy_demo

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list[str], *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` and return the finished process (output captured as text)."""
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Build and install the wheel; return (the wheel file, the new venv's bin folder)."""
    base = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # Build from a copy of what a clone holds (tracked and new, unignored files): pip
    # builds in the source tree, and a stale build/ there could ship deleted modules.
    source = base / "source"
    listed = _run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT, env=env)
    assert listed.returncode == 0, listed.stderr
    for name in filter(None, listed.stdout.split("\0")):
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    dist = base / "dist"
    built = _run(
        [
            *(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"),
            *("--wheel-dir", str(dist), str(source)),
        ],
        cwd=base,
        env=env,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("lsp_assist-*.whl")
    target = base / "venv"
    venv.EnvBuilder(with_pip=False).create(target)
    python = target / "bin" / "python"
    done = _run(
        [
            *(sys.executable, "-m", "pip", "--python", str(python), "install"),
            *("--no-deps", "--no-index", str(wheel)),
        ],
        cwd=base,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    site = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        cwd=base,
        env=env,
    ).stdout.strip()
    # The dependencies (tree-sitter, llama.cpp ...) from the project venv; a path line in
    # a .pth does not run that folder's own .pth files, so its editable finder stays off.
    Path(site, "project_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return wheel, target / "bin"


def _outside_env(tmp_path: Path) -> dict[str, str]:
    """Return an environment without the checkout on any path and with its own cache."""
    env = {
        k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("LSP_ASSIST_")
    }
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return env


def test_wheel_carries_the_query_files(installed: tuple[Path, Path]) -> None:
    wheel, _ = installed
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"lsp_assist/grammars/{p.relative_to(ROOT / 'grammars')}"
        for p in (ROOT / "grammars").rglob("*.scm")
    }
    assert shipped and shipped <= names


def test_installed_wheel_indexes_and_completes_outside_the_repo(
    installed: tuple[Path, Path], tmp_path: Path
) -> None:
    _, bin_dir = installed
    env = _outside_env(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    fixture = copy_demo(tmp_path)

    where = _run(
        [str(bin_dir / "python"), "-c", "import lsp_assist; print(lsp_assist.__file__)"],
        cwd=elsewhere,
        env=env,
    )
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout + where.stderr

    index = _run(
        [str(bin_dir / "lsp-assist"), "index", str(fixture), "--json", "--no-cache"],
        cwd=elsewhere,
        env=env,
    )
    assert index.returncode == 0, index.stderr
    summary = json.loads(index.stdout)
    assert summary["languages"] == {"python": len(list(fixture.rglob("*.py")))}
    assert summary["symbols"] > 0

    # the blank line in checkout() after `order = Order(...)`: the prompt's related layer
    # holds Order/LineItem/Payment only if the index extracted their definitions
    target = fixture / "shop" / "checkout.py"
    line = (
        target.read_text()
        .split("\n")
        .index("    order = Order(order_id=order_id, customer_email=email, items=items)")
        + 2
    )
    complete = _run(
        [
            *(str(bin_dir / "lsp-assist"), "complete", f"{target}:{line}:5", "--json"),
            *("--workspace", str(fixture), "--model", str(small_model_path())),
            *("--setting", "maxTokens=8"),
            *("--setting", "promptTimeoutMs=120000", "--setting", "generationTimeoutMs=120000"),
        ],
        cwd=elsewhere,
        env=env,
    )
    assert complete.returncode == 0, complete.stderr
    report = json.loads(complete.stdout)
    assert report["error"] == ""
    assert report["prompt_tokens"] > 0 and report["output_tokens"] > 0
    assert report["layers"]["related"] > 0
