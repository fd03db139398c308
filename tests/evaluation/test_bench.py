"""A small bench and an eval through the real server (tiny GGUF), checked against their records.

Slow: each starts ``lsp-assist serve`` once per row (and llama_cpp.server for the peer).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from lsp_assist.cli.main import main
from lsp_assist.evaluation.metrics import NEW_TOKENS_LIMIT
from lsp_assist.evaluation.tasks import HOLE_KINDS
from tests.support.tiny_gguf import char_words, write_tiny_gguf

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ws"
FAST = ["--setting", "maxTokens=8", "--setting", "threads=1"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # one token per character: any source text tokenizes, FIM tokens included
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    return write_tiny_gguf(path, words=char_words(), context_length=4096)


@pytest.fixture(scope="module")
def bench(tiny: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench")
    work = out / "work"
    cache = out / "user-cache"
    with pytest.MonkeyPatch.context() as patch:
        # --model2 Q8_0 writes the requantized tiny model under the user cache
        patch.setenv("XDG_CACHE_HOME", str(cache))
        code = main(
            [
                "bench",
                str(FIXTURE),
                "--model",
                str(tiny),
                "--model2",
                "Q8_0",
                "--tasks",
                "3",
                "--typing-lines",
                "1",
                "--rows",
                "baseline,retrieval,model2,peer",
                "--out",
                str(out),
                "--work",
                str(work),
                "--keep",
                *FAST,
            ]
        )
    result = json.loads((out / "results.json").read_text())
    return {"code": code, "out": out, "work": work, "result": result, "cache": cache}


def test_the_bench_writes_its_outputs(bench: dict[str, Any]) -> None:
    out: Path = bench["out"]
    assert bench["code"] == 0
    for name in ("table.md", "results.json", "latency.png", "tokens.png", "ttft_vs_tokens.png"):
        assert (out / name).stat().st_size > 0, name
    result = bench["result"]
    assert [r["name"] for r in result["rows"]] == ["baseline", "retrieval", "model2", "peer"]
    assert result["meta"]["tasks"]["cross_file"] == 2 and result["meta"]["tasks"]["in_file"] == 1


def test_every_row_runs_every_task_and_keystroke(bench: dict[str, Any]) -> None:
    result = bench["result"]
    tasks = result["tasks"]
    typed = [t for t in tasks if t["kind"] == "typing"]
    keystrokes = sum(len(t["target"].rstrip()) - t["indent"] + 1 for t in typed)
    for row in result["rows"]:
        records = [r for r in result["records"] if r["row"] == row["name"]]
        holes = [r for r in records if r["kind"] in HOLE_KINDS]
        assert len(holes) == len(tasks) - len(typed)
        typing = [r for r in records if r["kind"] == "typing"]
        assert len(typing) == keystrokes
        assert [r["first_at_line"] for r in typing].count(True) == len(typed)
        for r in holes:
            assert r["prompt_tokens"] > 0 and r["ttft_ms"] > 0, r
            assert r["latency_ms"] >= r["ttft_ms"]
        if row["name"] != "peer":
            # the server's own metrics log joined in: the parts of the time from arrival
            for r in holes:
                parts = r["queue_ms"] + r["context_ms"] + r["prefill_ms"] + r["debounce_ms"]
                assert parts <= r["ttft_ms"] + 5, r


def test_model2_is_the_model_requantized_and_its_own_row(bench: dict[str, Any], tiny: Path) -> None:
    from gguf import GGUFReader

    result = bench["result"]
    made = bench["cache"] / "lsp-assist" / "models" / "tiny.q8_0.gguf"
    reader = GGUFReader(made)
    assert int(reader.fields["general.file_type"].parts[-1][0]) == 7  # LLAMA_FTYPE_MOSTLY_Q8_0
    assert any(t.tensor_type.name == "Q8_0" for t in reader.tensors)
    sessions = {r["name"]: r["session"] for r in result["rows"]}
    assert sessions["model2"]["settings"]["modelPath"] == str(made)
    assert sessions["retrieval"]["settings"]["modelPath"] == str(tiny.resolve())
    # the defaults (drafting off) with the second model; everything else as the other rows
    assert sessions["model2"]["settings"]["draft"] == "off"
    label = next(r["label"] for r in result["rows"] if r["name"] == "model2")
    assert "tiny.q8_0.gguf" in label
    mine = [r for r in result["records"] if r["row"] == "model2"]
    assert {r["task"] for r in mine} == {t["id"] for t in result["tasks"]}


def test_the_target_line_never_reaches_a_prompt(bench: dict[str, Any]) -> None:
    result = bench["result"]
    tasks = {t["id"]: t for t in result["tasks"]}
    for r in result["records"]:
        if r["kind"] not in HOLE_KINDS:
            continue
        task = tasks[r["task"]]
        prompt = r["prompt"]
        assert r["leaked"] is False
        assert not any(x.strip() == task["target"].strip() for x in prompt.split("\n"))
        # the file around the hole is in the prompt: the line is missing because it was
        # removed, not because the file was left out (the baseline has the whole file)
        if r["row"] == "baseline":
            lines = (FIXTURE / task["path"]).read_text().split("\n")
            before = next(x for x in reversed(lines[: task["line"]]) if x.strip())
            assert before.strip() in prompt, (task, prompt[-300:])


def test_the_workspace_copy_is_restored_after_each_task(bench: dict[str, Any]) -> None:
    copies = list(bench["work"].glob("lsp-assist-bench-*/workspace/ws"))
    assert len(copies) == 1
    for path in FIXTURE.rglob("*"):
        if path.is_file():
            assert (copies[0] / path.relative_to(FIXTURE)).read_bytes() == path.read_bytes()


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def _cells(table: str, part: int = 0) -> dict[str, list[str]]:
    """Return the rows of the ``part``-th table of a report, by label."""
    tables: list[dict[str, list[str]]] = []
    for line in table.splitlines():
        if line.startswith("| row"):
            tables.append({})
        elif line.startswith("| ") and tables:
            cells = [c.strip() for c in line.strip("|").split("|")]
            tables[-1][cells[0]] = cells[1:]
    return tables[part]


def _share(flags: list[bool]) -> str:
    return f"{100 * sum(flags) / len(flags):.0f}%" if flags else "-"


def test_the_table_says_what_the_records_say(bench: dict[str, Any]) -> None:
    result = bench["result"]
    table = _cells((bench["out"] / "table.md").read_text())
    base_cost = None
    for row in result["rows"]:
        records = [r for r in result["records"] if r["row"] == row["name"]]
        holes = [r for r in records if r["kind"] in HOLE_KINDS]
        cross = [r for r in holes if r["kind"] == "cross_file"]
        tokens = [float(r["prompt_tokens"]) for r in holes]
        ttft = [float(r["ttft_ms"]) for r in holes]
        whole = [float(r["latency_ms"]) for r in holes]
        typing = [r for r in records if r["kind"] == "typing" and not r["first_at_line"]]
        model = [r for r in records if r.get("prompt_tokens") and not r.get("cache_hit")]
        cost = float(np.mean([r["prompt_tokens"] + r["output_tokens"] for r in holes]))
        base_cost = base_cost or cost
        cells = table[row["label"]]
        assert cells[0] == _share([r["carries_definition"] for r in cross])
        assert cells[1] == f"{np.mean(tokens):,.0f} / {_pct(tokens, 90):,.0f}"
        assert cells[2] == " / ".join(f"{_pct(ttft, q):,.0f}" for q in (50, 90, 99))
        assert cells[3] == " / ".join(f"{_pct(whole, q):,.0f}" for q in (50, 90, 99))
        assert cells[4] == _share([r["new_tokens"] > NEW_TOKENS_LIMIT for r in typing])
        assert cells[5] == f"{cost / base_cost:.2f}"
        assert cells[6] == _share([r["exact_match"] for r in holes])
        edit = float(np.mean([r["edit_similarity"] for r in holes]))
        assert math.isclose(float(cells[7]), edit, abs_tol=0.005)
        assert cells[8] == _share([r["identifier_match"] for r in holes])
        reused = sum(r["reused_tokens"] for r in model)
        assert cells[10] == f"{100 * reused / sum(r['prompt_tokens'] for r in model):.0f}%"
    assert table["baseline: whole file + open files"][5] == "1.00"
    typing_table = _cells((bench["out"] / "table.md").read_text(), 1)
    for row in result["rows"]:
        records = [r for r in result["records"] if r["row"] == row["name"]]
        typing = [r for r in records if r["kind"] == "typing" and not r["first_at_line"]]
        cells = typing_table[row["label"]]
        assert cells[0] == str(len(typing))
        assert cells[1] == str(sum(1 for r in typing if r.get("cache_hit")))
        assert cells[3] == f"{np.mean([r['new_tokens'] for r in typing]):,.1f}"


def test_the_table_is_recomputed_from_the_records_alone(
    bench: dict[str, Any], tmp_path: Path
) -> None:
    saved = json.loads((bench["out"] / "results.json").read_text())
    for row in saved["rows"]:
        row["summary"] = {}  # nothing but the records is read
    (tmp_path / "results.json").write_text(json.dumps(saved))
    again = tmp_path / "again"
    assert main(["bench", "--from-json", str(tmp_path / "results.json"), "--out", str(again)]) == 0
    assert (again / "table.md").read_text() == (bench["out"] / "table.md").read_text()


def test_eval_scores_holes_per_language(tiny: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "lsp_assist.cli.main",
            "eval",
            str(FIXTURE),
            "--model",
            str(tiny),
            "--tasks",
            "4",
            "--json",
            "--out",
            str(tmp_path),
            *FAST,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=280,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    summary = json.loads(run.stdout)["summary"]
    assert summary["overall"]["tasks"] == 4
    assert set(summary["by_language"]) <= {"python", "javascript"}
    assert sum(s["tasks"] for s in summary["by_language"].values()) == 4
    saved = json.loads((tmp_path / "eval.json").read_text())
    records = saved["records"]
    assert len(records) == 4 and all(r["prompt_tokens"] > 0 for r in records)
    parsed = [r["parses"] for r in records if r["parses"] is not None]
    expected = sum(parsed) / len(parsed) if parsed else None
    assert summary["overall"]["parses"] == expected
    assert "| all | 4 |" in (tmp_path / "eval.md").read_text()
