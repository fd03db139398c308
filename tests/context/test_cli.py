"""``lsp-assist context FILE:LINE:COL`` on a small workspace, text and JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_assist.cli.main import main
from tests.support.workspace import write_files

from .conftest import CART, FILES

pytest.importorskip("llama_cpp")


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    return write_files(tmp_path, FILES)


def _small_model() -> str:
    from lsp_assist.backends.models import small_model_path
    from lsp_assist.errors import ModelLoadError

    try:
        return str(small_model_path())
    except ModelLoadError as exc:
        pytest.skip(str(exc))


def _location(workspace: Path) -> str:
    offset = CART.index("result = compute_total(") + len("result = compute_total(")
    line = CART.count("\n", 0, offset) + 1
    col = offset - (CART.rfind("\n", 0, offset) + 1) + 1
    return f"{workspace / 'shop' / 'cart.py'}:{line}:{col}"


def test_context_json(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["context", _location(workspace), "--json", "--workspace", str(workspace)]
    args += ["--setting", "denyGlobs=**/secrets.py"]
    code = main([*args, "--model", _small_model(), "--budget", "600"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert data["strategy"] == "layered"
    assert data["budget"] == 600
    assert 0 < data["total_tokens"] <= 600
    names = [layer["name"] for layer in data["layers"]]
    assert names[-1] == "editing_zone" and "related" in names
    related = next(layer for layer in data["layers"] if layer["name"] == "related")
    assert {"source", "symbol", "score", "reason"} <= set(related["items"][0])
    assert any(item["symbol"] == "compute_total" for item in related["items"])
    assert data["prompt"]["format"] == "repo"
    assert "def compute_total" in data["prompt"]["prompt"]
    assert "hunter2" not in data["prompt"]["prompt"]


def test_context_text_baseline(workspace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["context", _location(workspace), "--strategy", "baseline"]
    code = main([*args, "--workspace", str(workspace), "--model", _small_model()])
    assert code == 0
    out = capsys.readouterr().out
    assert out.startswith("strategy baseline")
    assert "== editing_zone" in out


def test_context_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["context", f"{tmp_path / 'nope.py'}:1:1"]) == 2
