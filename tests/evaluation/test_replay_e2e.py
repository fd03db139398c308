"""``lsp-assist bench --replay`` end to end: the real server over stdio with SmolLM2, one region.

Slow: it starts ``lsp-assist serve`` with the model. It checks the path (flags, the
workspace copy, the keys through the server, the records, the outputs), not the score.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lsp_assist.cli.main import main
from lsp_assist.evaluation.replay.tasks import key_sequence

pytestmark = pytest.mark.slow

CODE = '''"""Orders."""


def order_total(lines: list[tuple[str, float]], rate: float) -> float:
    """Return the total of an order with its tax."""
    subtotal = 0.0
    for name, price in lines:
        subtotal += price
    tax = subtotal * rate
    return round(subtotal + tax, 2)
'''


@pytest.mark.timeout(600)
def test_bench_replay_runs_one_region_through_the_server(tmp_path: Path) -> None:
    from lsp_assist.backends import small_model_path

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.py").write_text(CODE, encoding="utf-8")
    out = tmp_path / "out"
    code = main(
        [
            "bench",
            "--replay",
            str(ws),
            "--model",
            str(small_model_path()),
            "--regions",
            "1",
            "--pace-ms",
            "200",
            "--rest-ms",
            "300",
            "--rows",
            "default",
            "--setting",
            "threads=1",
            "--setting",
            "maxTokens=16",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    result = json.loads((out / "results.json").read_text())
    # one line in each of the two tables
    assert (out / "table.md").read_text().count("| default | steady | 150 |") == 2
    (region,) = result["regions"]
    assert region["path"] == "orders.py"
    assert region["start"] >= 5 and region["end"] <= 10  # inside the body, after the docstring
    (row,) = result["rows"]
    assert "error" not in row
    keys = row["keys"]
    needed = len(key_sequence(region["target"]))
    summary = row["summary"]
    assert summary["keys_needed"] == needed == result["meta"]["keys_needed"]
    assert summary["keys_pressed"] == len(keys) <= needed
    # every key went to the server as a version of its own; 200 ms apart, each outlived
    # the client's 75 ms debounce, so each asked, bar a word accepted with the rest shown
    # (and the last key, whose timer the region's end may cut)
    assert [k["version"] for k in keys] == list(range(1, len(keys) + 1))
    stats = row["stats"]
    assert stats["requests"] + stats["not_asked"] >= len(keys) - 1
    assert row["debounce_ms"] == 75.0 and row["react_ms"] == 150.0
    assert result["meta"]["react_ms"] == [150.0]
    # the budget the server used, read from lspAssist.status, and its logged model work
    assert row["budget"]["start"]["tokens"] > 0 and row["budget"]["end"]["tokens"] > 0
    assert summary["model"]["model_requests"] >= 1
    assert summary["model"]["tokens_generated"] >= 1
    # the typed and accepted keys rebuild the region exactly
    assert "".join(k["text"] for k in keys) == region["target"]
    assert keys[0]["first"] and keys[0]["shown"] is None
    # the user's copy was never written
    assert (ws / "orders.py").read_text(encoding="utf-8") == CODE


@pytest.mark.timeout(600)
def test_bench_replay_runs_the_llm_ls_peer_row(tmp_path: Path) -> None:
    from lsp_assist.backends import small_model_path

    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "orders.py").write_text(CODE, encoding="utf-8")
    out = tmp_path / "out"
    argv = ["bench", "--replay", str(ws), "--model", str(small_model_path())]
    argv += ["--regions", "1", "--pace-ms", "200", "--rest-ms", "300", "--rows", "llmls"]
    argv += ["--setting", "threads=1", "--out", str(out)]
    assert main(argv) == 0
    result = json.loads((out / "results.json").read_text())
    (row,) = result["rows"]
    assert "error" not in row and row["label"] == "llm-ls"
    assert row["settings"] == {"threads": 1, "seed": 14}
    (region,) = result["regions"]
    keys = row["keys"]
    assert "".join(k["text"] for k in keys) == region["target"]
    stats = row["stats"]
    # every key reached the client and, 200 ms apart, outlived the 150 ms debounce: each
    # asked llm-ls, which sent it or found nothing to complete (the last key's timer may
    # be cut by the region's end)
    assert stats["keys"] == len(keys)
    assert len(keys) - 1 <= stats["requests"] + stats["skipped_empty"] <= len(keys)
    assert stats["requests"] >= 1
