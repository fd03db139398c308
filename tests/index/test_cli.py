"""``lsp-assist index PATH [--json]``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_assist.cli.main import main

FIXTURES = Path(__file__).parent / "fixtures"


def test_index_json(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert main(["index", str(FIXTURES), "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    for key in (
        "files",
        "symbols",
        "bytes",
        "seconds",
        "files_per_second",
        "peak_rss_mb",
        "languages",
    ):
        assert key in data
    assert data["files"] == sum(data["languages"].values()) > 20
    assert data["languages"]["python"] == 6
    assert "100%" in err
    assert main(["index", str(FIXTURES), "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["parsed"] == 0 and again["skipped_unchanged"] == data["files"]


def test_index_text_and_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["index", str(FIXTURES / "go"), "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "3 files" in out and "go" in out
    assert main(["index", str(FIXTURES / "missing"), "--no-cache"]) == 2
