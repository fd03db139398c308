"""SAFIM (``lsp-assist bench --safim``): loading and sampling, the scoring, the server's edit.

The loading tests read a hand-made data folder and the real SAFIM files: the full ones
where present (LSP_ASSIST_SAFIM_DATA or ../shared/benchmarks/safim), else the seeded sample
of real tasks committed in fixtures/safim (72 tasks, its README says how it was drawn), so
nothing skips for lack of data; the scoring tests compile and run hand-made programs per
language (a language without its compiler here is checked to report "not run"); marked
slow, SmolLM2 through both arms end to end.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.evaluation.infill import safim as sf
from lsp_assist.evaluation.infill.safim_run import (
    apply_item,
    offset_at,
    plain_ids,
    previous_records,
)

SAMPLE = Path(__file__).parent / "fixtures" / "safim"
"""The committed sample of real SAFIM tasks (6 per split x language, seed 14)."""
SAMPLE_PER_CELL, SAMPLE_SEED = 6, 14


def _data() -> Path:
    """Return the full SAFIM files where they are here, else the committed sample."""
    try:
        return sf.data_dir()
    except sf.SafimError:
        return SAMPLE


def _task(
    lang: str, program: str, truth: str, tests: list[tuple[str, list[str]]], split: str = "block"
) -> sf.Task:
    return sf.Task(
        split=split,
        lang=lang,
        task_id=f"{split}_completion_000001",
        program=program,
        ground_truth=truth,
        tests=tuple(sf.UnitTest(i, tuple(o)) for i, o in tests),
    )


def _write_split(folder: Path, split: str, items: list[dict[str, Any]]) -> None:
    with gzip.open(folder / f"{split}_completion.jsonl.gz", "wt", encoding="utf-8") as handle:
        for item in items:
            handle.write(json.dumps(item) + "\n")


# -- loading and sampling --------------------------------------------------------------------


def test_read_split_normalises_line_ends_and_keeps_the_tests(tmp_path: Path) -> None:
    _write_split(
        tmp_path,
        "block",
        [
            {
                "lang": "python",
                "task_id": "block_completion_000001",
                "eval_prompt": "a = 1\r\nif a:\r\n    {{completion}}\r\n",
                "ground_truth": "print(a)\r\n    print(a)",
                "unit_tests": [{"input": "", "output": ["1\n1"]}],
            },
            {"lang": "java", "task_id": "x", "eval_prompt": "{{completion}}", "ground_truth": ""},
            {"lang": "python", "task_id": "y", "eval_prompt": "no mask", "ground_truth": ""},
        ],
    )
    _write_split(
        tmp_path,
        "api",
        [
            {
                "lang": "python",
                "task_id": "block_completion_000001",
                "eval_prompt": "x = {{completion}}\n",
                "ground_truth": "f(1)",
            }
        ],
    )
    (task,) = sf.read_split(tmp_path, "block", ["python"])
    assert task.program == "a = 1\nif a:\n    {{completion}}\n"
    assert task.ground_truth == "print(a)\n    print(a)"
    assert task.tests == (sf.UnitTest("", ("1\n1",)),)
    assert task.prefix() == "a = 1\nif a:\n    " and task.suffix() == "\n"
    assert task.cursor() == (2, 4)
    tasks = sf.load_tasks(tmp_path, ["block", "api"], ["python"])
    assert [t.id for t in tasks] == [
        "block/python/block_completion_000001",
        "api/python/block_completion_000001",
    ]  # ids unique
    assert tasks[1].tests == ()
    assert sf.data_dir(tmp_path) == tmp_path
    with pytest.raises(sf.SafimError):
        sf.read_split(tmp_path, "control")


def test_the_committed_sample_is_real_safim_drawn_by_the_sampler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sf.DATA_ENV, str(SAMPLE))
    assert sf.data_dir() == SAMPLE  # the bench reads it as it reads the full files
    assert (SAMPLE / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
    tasks = sf.load_tasks(SAMPLE)
    cells: dict[tuple[str, str], int] = {}
    for task in tasks:
        cells[(task.split, task.lang)] = cells.get((task.split, task.lang), 0) + 1
        assert task.ground_truth.strip() and "\r" not in task.program
        assert bool(task.tests) == (task.split != "api")  # block and control have unit tests
    assert cells == {(s, lang): SAMPLE_PER_CELL for s in sf.SPLITS for lang in sf.LANGUAGES}
    assert sum(p.stat().st_size for p in SAMPLE.iterdir()) < 200_000
    monkeypatch.delenv(sf.DATA_ENV)
    full = _data()
    if full != SAMPLE:  # the full files are here: the sample is exactly what they give
        written = sf.write_sample(full, tmp_path, SAMPLE_PER_CELL, SAMPLE_SEED)
        assert written == {split: SAMPLE_PER_CELL * len(sf.LANGUAGES) for split in sf.SPLITS}
        for split in sf.SPLITS:
            name = f"{split}_completion.jsonl.gz"
            assert (tmp_path / name).read_bytes() == (SAMPLE / name).read_bytes()


def test_cursor_counts_utf16_columns() -> None:
    task = _task("python", "s = '\U0001f600é' + {{completion}}\n", "x", [])
    assert task.cursor() == (0, len("s = '") + 2 + 1 + len("' + "))
    blank = task.blanked()
    assert offset_at(blank, *task.cursor()) == len(task.prefix())


def test_the_seeded_sample_per_split_and_language() -> None:
    folder = _data()
    everything = sf.load_tasks(folder, ["control", "api"], ["python", "csharp"])
    one = sf.sample_tasks(everything, 3, 14)
    assert one == sf.sample_tasks(everything, 3, 14)  # deterministic
    cells: dict[tuple[str, str], int] = {}
    for task in one:
        cells[(task.split, task.lang)] = cells.get((task.split, task.lang), 0) + 1
    assert cells == {(s, lang): 3 for s in ("control", "api") for lang in ("python", "csharp")}
    assert [t.split for t in one] == ["control"] * 6 + ["api"] * 6  # the table's order
    bigger = sf.sample_tasks(everything, 5, 14)
    assert {t.id for t in one} <= {t.id for t in bigger}  # a sample holds the smaller ones
    assert {t.id for t in sf.sample_tasks(everything, 3, 15)} != {t.id for t in one}
    # a cell's sample does not depend on the other cells asked for
    alone = sf.sample_tasks([t for t in everything if t.lang == "csharp"], 3, 14)
    assert [t.id for t in alone] == [t.id for t in one if t.lang == "csharp"]
    assert len(sf.sample_tasks(everything, 0, 14)) == len(everything)


# -- running programs ------------------------------------------------------------------------


def test_output_comparison_is_safims() -> None:
    assert sf.outputs_match("1 2  \r\n3\n\n", "1 2\n3")  # stripped lines
    assert sf.outputs_match("1 2 3", "1 2\n3")  # the same tokens
    assert sf.outputs_match("0.1000000000001\n", "0.1")  # numbers within 1e-12
    assert sf.outputs_match("YES", "yes")
    assert not sf.outputs_match("0.1001", "0.1")
    assert not sf.outputs_match("1 3", "1 2")
    assert not sf.outputs_match("2", "2 2")
    assert not sf.outputs_match("Abc", "abc")  # only yes/no/true/false ignore case


PROGRAMS = {
    "python": ("n = int(input())\nprint({{completion}})\n", "n * 2", "2 * n", "n + 1", "n *"),
    "java": (
        "import java.util.*;\npublic class Sol {\n  public static void main(String[] a) {\n"
        "    Scanner s = new Scanner(System.in);\n    int n = s.nextInt();\n"
        "    System.out.println({{completion}});\n  }\n}\n",
        "n * 2",
        "2 * n",
        "n + 1",
        "n *",
    ),
    "cpp": (
        "#include <iostream>\nint main() {\n  int n;\n  std::cin >> n;\n"
        "  std::cout << ({{completion}}) << std::endl;\n}\n",
        "n * 2",
        "2 * n",
        "n + 1",
        "n *",
    ),
    "csharp": (
        "using System;\nclass P {\n  static void Main() {\n"
        "    int n = int.Parse(Console.ReadLine());\n    Console.WriteLine({{completion}});\n"
        "  }\n}\n",
        "n * 2",
        "2 * n",
        "n + 1",
        "n *",
    ),
}


@pytest.mark.parametrize("lang", sf.LANGUAGES)
def test_right_wrong_and_uncompilable_completions(lang: str) -> None:
    program, truth, right, wrong, broken = PROGRAMS[lang]
    task = _task(lang, program, truth, [("3\n", ["6"]), ("5\n", ["10"])])
    if not sf.runtime_available(lang):
        outcome = sf.score(task, right)
        assert outcome["status"] == "not_run" and not outcome["passed"]
        pytest.skip(f"no compiler for {lang} here (reported as not run)")
    good = sf.score(task, right)
    assert good["passed"] and good["status"] == "passed" and not good["exact_match"]
    assert "shortcut" not in good  # it ran
    bad = sf.score(task, wrong)
    assert bad["status"] == "wrong_answer" and not bad["passed"] and not bad["compile_error"]
    worse = sf.score(task, broken)
    assert worse["compile_error"] and worse["status"] == "compile_error" and not worse["passed"]
    exact = sf.score(task, f" {truth}\n")
    assert exact["exact_match"]  # stripped
    assert sf.score(task, truth)["passed"]


def test_a_failing_test_stops_the_run_and_a_loop_times_out() -> None:
    task = _task(
        "python",
        "n = int(input())\nprint({{completion}})\n",
        "n",
        [("1", ["1"]), ("2", ["3"]), ("3", ["3"])],
    )
    outcome = sf.score(task, "n if n != 2 else 0")
    assert outcome["status"] == "wrong_answer"
    assert sf.run_program("python", task.filled("n"), task.tests)["tests_passed"] == 1
    slow = sf.run_program("python", "while True: pass\n", task.tests, timeout=0.5)
    assert slow["status"] == "timeout"
    crash = sf.run_program("python", "raise SystemExit(3)\n", task.tests)
    assert crash["status"] == "runtime_error"


def test_the_program_runs_in_a_scratch_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    program = "import os\nopen('left.txt', 'w').write('x')\nprint(os.getcwd() != {{completion}})\n"
    task = _task("python", program, "1", [("", ["True"])])
    assert sf.score(task, repr(str(tmp_path)))["passed"]
    assert not list(tmp_path.iterdir())


def test_java_class_name() -> None:
    assert sf.java_class("class A {}\npublic class Main2 { }") == "Main2"
    assert sf.java_class("class B {\n public static void main(String[] a) {} }") == "B"


# -- api, exact, suffix duplication, parse errors --------------------------------------------------


def test_api_match_rule() -> None:
    assert sf.api_match("np.sum(grad,  axis=0)", "np.sum(grad, axis=0)", "python")
    assert sf.api_match("torch.sum(grad, axis=0)", "np.sum(grad, axis=0)", "python")  # args only
    assert not sf.api_match("np.sum(grad, axis=1)", "np.sum(grad, axis=0)", "python")
    assert sf.api_match("new  Gson()", "new Gson()", "java")
    assert not sf.api_match("new Gson(x)", "new Gson()", "java")
    task = _task("java", "Gson g = {{completion}};\n", "new Gson()", [], split="api")
    assert sf.score(task, "new Gson( )")["passed"]
    assert not sf.score(task, "new Gson(1)")["passed"]


def test_suffix_duplication() -> None:
    control = _task(
        "cpp",
        "int f(int x){\n  if({{completion}}) x++;\n  return x;\n}\n",
        "x==1",
        [],
        split="control",
    )
    assert sf.right_text(control) == ") x++;"
    assert sf.suffix_overlap(control, "x==1)") == ")"
    assert sf.suffix_overlap(control, "x==1) x++;") == ") x++;"
    assert sf.suffix_overlap(control, "x==1") == ""
    called = _task(
        "cpp", "int f(int x){\n  if({{completion}}) x++;\n}\n", "g(x)", [], split="control"
    )
    assert sf.suffix_overlap(called, "g(y)") == ""  # the ground truth ends so too
    assert sf.suffix_overlap(control, "f(x) < 2") == ""
    assert sf.suffix_overlap(control, "f(x) < g(1)") == ""  # its own bracket, balanced
    assert sf.suffix_overlap(control, "f(x) < g(1))") == ")"  # one too many
    block = _task("python", "for i in range(3):\n    {{completion}}\nprint(i)\n", "pass", [])
    assert sf.right_text(block) == "print(i)"
    assert sf.suffix_overlap(block, "pass\nprint(i)") == "print(i)"
    assert sf.score(block, "pass\nprint(i)\n")["suffix_duplicated"]
    assert not sf.score(block, "i += 0")["suffix_duplicated"]


def test_parse_errors_of_a_block_cut_mid_statement() -> None:
    block = _task(
        "python", "def f(x):\n    {{completion}}\n\nprint(f(1))\n", "return x + 1", [("", ["2"])]
    )
    reference = sf.parse_errors("python", block.filled(block.ground_truth))
    assert reference == 0
    assert sf.score(block, "return (x +", reference_errors=reference)["new_parse_errors"] > 0
    assert sf.score(block, "return x", reference_errors=reference)["new_parse_errors"] == 0
    assert sf.parse_errors("csharp", "class A {}") is None  # no grammar here


# -- the server's edit and the plain prompt --------------------------------------------------------


def _range(a: tuple[int, int], b: tuple[int, int]) -> list[int]:
    return [a[0], a[1], b[0], b[1]]


def test_an_item_is_applied_over_its_range() -> None:
    task = _task(
        "cpp", "int main(){\n  if({{completion}}) return 1;\n}\n", "a", [], split="control"
    )
    line, col = task.cursor()
    program, completion, eaten = apply_item(task, "a > 0", None)
    assert completion == "a > 0" and program == task.filled("a > 0") and not eaten
    # an empty range at the cursor is the same
    assert apply_item(task, "a > 0", _range((line, col), (line, col)))[1] == "a > 0"
    # a range over the ')' with text that writes it back: nothing duplicated
    program, completion, eaten = apply_item(task, "a > 0)", _range((line, col), (line, col + 1)))
    assert completion == "a > 0" and not eaten and program == task.filled("a > 0")
    assert not sf.score(task, completion, program)["suffix_duplicated"]
    # the same text at an empty range duplicates the bracket
    assert sf.score(task, "a > 0)")["suffix_duplicated"]
    # a range that eats the ')' without writing it back
    program, completion, eaten = apply_item(task, "a > 0", _range((line, col), (line, col + 1)))
    assert eaten and program == "int main(){\n  if(a > 0 return 1;\n}\n"
    # a range from the line's start whose text writes that start back: the same edit
    program, completion, eaten = apply_item(task, "  if(a > 0", _range((line, 0), (line, col)))
    assert completion == "a > 0" and program == task.filled("a > 0") and not eaten
    # an edit that changes text before the cursor: no completion to compare
    assert apply_item(task, "x", _range((line, 0), (line, col)))[1] is None


def test_plain_prompt_ids_fit_the_context() -> None:
    ids, cut = plain_ids([10, 11, 12], [20, 21], (1, 2, 3), [9], 100)
    assert ids == [9, 1, 10, 11, 12, 2, 20, 21, 3] and not cut
    ids, cut = plain_ids(list(range(100, 200)), list(range(300, 400)), (1, 2, 3), [], 43)
    assert cut and len(ids) == 43
    assert ids[:2] == [1, 170] and ids[-1] == 3  # the prefix keeps its end (30 of 40)
    assert ids[ids.index(2) + 1 :] == [*range(300, 310), 3]  # the suffix its start (a quarter)
    assert plain_ids([10, 11], [20], None, [], 10) == ([10, 11], False)


def test_resume_reads_only_a_run_asked_the_same_way(tmp_path: Path) -> None:
    record = {"task": "block/python/x", "arms": {"plain": {"passed": True}}}
    result = {"meta": {"model": "/m.gguf", "seed": 14}, "records": [record]}
    (tmp_path / "results.json").write_text(json.dumps(result), encoding="utf-8")
    assert previous_records(tmp_path, Path("/m.gguf"), 14) == {"block/python/x": record}
    assert previous_records(tmp_path, Path("/m.gguf"), 15) == {}
    assert previous_records(tmp_path, Path("/other.gguf"), 14) == {}
    assert previous_records(tmp_path / "none", Path("/m.gguf"), 14) == {}
    assert previous_records(tmp_path, Path("/m.gguf"), 14, {"contextLength": "1024"}) == {}
    result["meta"]["settings"] = {"contextLength": "1024"}
    (tmp_path / "results.json").write_text(json.dumps(result), encoding="utf-8")
    assert previous_records(tmp_path, Path("/m.gguf"), 14, {"contextLength": "1024"})
    assert previous_records(tmp_path, Path("/m.gguf"), 14) == {}
    # a run from before --trigger asked automatically: its answers are no invoked run's
    asked = (tmp_path, Path("/m.gguf"), 14, {"contextLength": "1024"})
    assert previous_records(*asked, "automatic")
    assert previous_records(*asked, "invoked") == {}
    result["meta"]["trigger"] = "invoked"
    (tmp_path / "results.json").write_text(json.dumps(result), encoding="utf-8")
    assert previous_records(*asked, "invoked")
    assert previous_records(*asked, "automatic") == {}
    assert previous_records(*asked) == {}


def test_table_from_records() -> None:
    def arm(passed: bool, compile_error: bool = False, status: str = "passed") -> dict[str, Any]:
        return {
            "passed": passed,
            "compile_error": compile_error,
            "status": status,
            "exact_match": passed,
            "suffix_duplicated": not passed,
            "new_parse_errors": 0,
            "empty": False,
            "latency_ms": 100.0,
        }

    records = [
        {"lang": "python", "split": "block", "arms": {"plain": arm(True), "server": arm(False)}},
        {
            "lang": "python",
            "split": "block",
            "arms": {"plain": arm(False, True, "compile_error"), "server": arm(True)},
        },
        {"lang": "csharp", "split": "control", "arms": {"plain": arm(False, status="not_run")}},
    ]
    summary = sf.summarize(records[:2], "plain")
    assert summary["pass_at_1"] == 0.5 and summary["compile_errors"] == 0.5
    assert sf.summarize(records[2:], "plain")["run"] == 0
    text = sf.table(records)
    assert "| python | block | plain FIM | 2 (2) | 50% | 50% |" in text
    assert "| csharp | control | plain FIM | 1 (0) | - |" in text


def test_cli_refuses_unknown_names(capsys: pytest.CaptureFixture[str]) -> None:
    from lsp_assist.cli.main import main

    assert main(["bench", "--safim", "--splits", "block,loops"]) == 2
    assert "--splits" in capsys.readouterr().err
    assert main(["bench", "--safim", "--languages", "go"]) == 2
    assert main(["bench", "--safim", "--arms", "peer"]) == 2
    assert main(["bench", "--safim", "--tasks", "-1"]) == 2


def test_cli_passes_the_trigger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lsp_assist.cli.main import main
    from lsp_assist.evaluation.infill import safim_run

    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    with pytest.raises(ValueError, match="trigger"):
        safim_run.run_safim(safim_run.SafimConfig(model=model, trigger="manual"), "test")
    seen: list[safim_run.SafimConfig] = []

    def stop(config: safim_run.SafimConfig, command_line: str) -> dict[str, Any]:
        seen.append(config)
        raise RuntimeError("stopped before the model")

    monkeypatch.setattr(safim_run, "run_safim", stop)
    argv = ["bench", "--safim", "--splits", "control,api", "--model", str(model)]
    assert main([*argv, "--trigger", "invoked"]) == 1
    assert main(argv) == 1
    assert [c.trigger for c in seen] == ["invoked", "automatic"]


def test_the_report_names_the_trigger() -> None:
    assert sf.trigger_words({}) == sf.trigger_words({"trigger": "automatic"})
    assert sf.trigger_words({}).startswith("one automatic inline request (the trigger rules")
    assert sf.trigger_words({"trigger": "invoked"}).startswith(
        "one invoked inline request (the user asked"
    )


# -- the server arm's trigger, through the real server ---------------------------------------


@pytest.mark.slow
def test_an_invoked_request_is_answered_where_an_automatic_one_is_skipped() -> None:
    from lsp_assist.backends import small_model_path
    from lsp_assist.evaluation.infill.safim_run import run_server

    program = "n = int(input())\nif {{completion}} and n > 0:\n    print('even')\n"
    task = _task("python", program, "n % 2 == 0", [("4\n", ["even"])], split="control")
    assert task.suffix().split("\n", 1)[0].strip() == "and n > 0:"  # > maxCharsRightOfCursor

    def ask(trigger: str) -> dict[str, Any]:
        got: list[dict[str, Any]] = []
        settings = {"threads": "1", "contextLength": "512"}
        run_server([task], Path(small_model_path()), settings, lambda _, a: got.append(a), trigger)
        return got[0]

    automatic = ask("automatic")
    assert automatic["skipped"] == "text right of cursor" and automatic["suggestion"] == ""
    invoked = ask("invoked")
    assert not invoked.get("skipped") and invoked.get("request_id")


# -- both arms, end to end ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_bench_safim_end_to_end_with_smollm2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_assist.backends import small_model_path
    from lsp_assist.cli.main import main

    folder = _data()
    monkeypatch.setenv(sf.DATA_ENV, str(folder))  # the full files, else the sample
    out = tmp_path / "out"
    argv = [
        "bench",
        "--safim",
        "--model",
        str(small_model_path()),
        "--tasks",
        "1",
        "--languages",
        "python,csharp",
        "--seed",
        "3",
        "--out",
        str(out),
        "--setting",
        "threads=1",
        "--setting",
        "contextLength=512",  # the path, not the score: short prompts on a shared CPU
    ]
    assert main(argv) == 0
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    records = saved["records"]
    assert [(r["split"], r["lang"]) for r in records] == [
        (s, lang) for s in sf.SPLITS for lang in ("python", "csharp")
    ]
    everything = {t.id: t for t in sf.load_tasks(folder, sf.SPLITS, ["python", "csharp"])}
    for record in records:
        task = everything[record["task"]]
        assert set(record["arms"]) == {"plain", "plain_line", "plain_trunc", "server"}
        for name in ("plain", "server"):
            answer = record["arms"][name]
            assert answer["latency_ms"] is not None
            if answer["completion"] is not None:  # each score is what the answer gives again
                again = sf.score(
                    task,
                    answer["completion"],
                    None,
                    reference_errors=record["reference_parse_errors"],
                )
                assert answer["exact_match"] == again["exact_match"]
                assert answer["suffix_duplicated"] == again["suffix_duplicated"]
                if not answer.get("suffix_eaten"):
                    assert answer["passed"] == again["passed"]
        if task.lang != "csharp" or task.split == "api" or shutil.which("mcs"):
            assert record["arms"]["plain"]["status"] != "not_run"
        server = record["arms"]["server"]
        assert not server.get("skipped") and server.get("request_id")
    assert saved["cells"] == sf.cells(records)  # the table is recomputed from the records
    text = (out / "safim.md").read_text(encoding="utf-8")
    assert "| python | block | lsp-assist serve |" in text
    assert "| csharp | api | plain FIM |" in text
    # run again: every answer is kept, nothing is asked again
    capsys.readouterr()
    assert main(argv) == 0
    assert "answers kept" in capsys.readouterr().err
    again = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert again["records"] == records
    assert again["sessions"] == saved["sessions"] and set(saved["sessions"]) == {"plain", "server"}
    assert again["meta"]["resumed_from"]["date"] == saved["meta"]["date"]
    # an answer kept from a run before the derived arms existed gets them on resume
    for record in again["records"]:
        del record["arms"]["plain_line"], record["arms"]["plain_trunc"]
    (out / "results.json").write_text(json.dumps(again), encoding="utf-8")
    assert main(argv) == 0
    derived = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert derived["records"] == records


def test_safim_truncation_cuts_a_block_until_the_program_parses() -> None:
    program = "def f(a):\n    if a:\n        {{completion}}\n    return a\n"
    task = _task("python", program, "a += 1", [])
    ref = sf.parse_errors("python", task.filled("a += 1"))
    rambling = "a += 1\n    return a\n\nprint(f(2)) )"
    assert sf.parse_errors("python", task.filled(rambling)) > ref  # type: ignore[operator]
    # the last line goes (an unmatched bracket); what is left parses
    assert sf.safim_truncate(task, rambling, ref) == "a += 1\n    return a\n"
    assert sf.safim_truncate(task, "a += 1", ref) == "a += 1"


def test_safim_truncation_of_control_and_api() -> None:
    cpp = _task("cpp", "int main(){\n  if({{completion}}) return 1;\n}\n", "a", [], "control")
    assert sf.safim_truncate(cpp, "a > (b + 1)) return 2;", 0) == "a > (b + 1)"
    py = _task("python", "if {{completion}}:\n    pass\n", "a", [], "control")
    assert sf.safim_truncate(py, "\na > 0:\n    pass", 0) == "a > 0:"
    api = _task("python", "x = {{completion}}\n", "f(1)", [], "api")
    assert sf.safim_truncate(api, "np.zeros((n, m))\ny = 2", 0) == "np.zeros((n, m))"
