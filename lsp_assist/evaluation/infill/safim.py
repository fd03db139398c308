"""SAFIM (syntax-aware fill-in-the-middle): the tasks, the seeded sample, the scoring, the report.

This module owns what ``lsp-assist bench --safim`` measures (docs/evaluation.md, "SAFIM"):
the tasks of the three SAFIM files (block, control, api; Python, Java, C++, C#) read
from ``../shared/benchmarks/safim`` (or ``LSP_ASSIST_SAFIM_DATA``), a seeded sample per
split and language, and the scores of one completed program: compiled and run on each
unit test in a scratch folder with timeouts (SAFIM's output comparison: ExecEval's
stripped lines, else tokens with numbers within 1e-12), the api split by SAFIM's match
rule, exact match, whether the answer duplicates the text right of the cursor, and new
parse errors where a grammar exists. Running the arms is safim_run.py. No pygls.
"""

from __future__ import annotations

import ast
import contextlib
import gzip
import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from lsp_assist.errors import LspAssistError
from lsp_assist.evaluation.infill.harness import report_head, share, trigger_words
from lsp_assist.evaluation.infill.sandbox import kill_group, limit_memory, scratch_env
from lsp_assist.telemetry import percentile

SPLITS = ("block", "control", "api")
"""The SAFIM splits, in the table's order (file ``<split>_completion.jsonl.gz``)."""
LANGUAGES = ("python", "java", "cpp", "csharp")
"""SAFIM's languages, in the table's order."""
ARMS = ("plain", "server")
"""The arms ``--arms`` picks from."""
ARM_LABELS = {
    "plain": "plain FIM",
    "plain_line": "plain FIM, first line",
    "plain_trunc": "plain FIM, SAFIM's truncation",
    "server": "lsp-assist serve",
}
"""Each arm's name in the table (``plain_line``: the plain answer cut at its first line break;
``plain_trunc``: cut by SAFIM's syntax-aware truncation, :func:`safim_truncate`; both scored
beside it, not run separately)."""
MASK = "{{completion}}"
"""Where the masked part was in a task's ``eval_prompt``."""
EXTENSIONS = {"python": "py", "java": "java", "cpp": "cpp", "csharp": "cs"}
"""A task's file extension per language (the server's workspace and the scratch folder)."""
TEST_TIMEOUT_S = 10.0
"""How long one unit test may run."""
COMPILE_TIMEOUT_S = 60.0
"""How long one compilation may run."""
DATA_ENV = "LSP_ASSIST_SAFIM_DATA"
"""The environment variable naming the data folder."""
_PRECISION = Decimal("1e-12")
_BOOL_TOKENS = {"yes", "no", "true", "false"}


class SafimError(LspAssistError):
    """The SAFIM data cannot be found or read."""


@dataclass(frozen=True, slots=True)
class UnitTest:
    """One unit test: the program's stdin and the outputs that count as right (any one)."""

    input: str
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Task:
    """One SAFIM task: the program with the mask, the masked part, the unit tests."""

    split: str
    lang: str
    task_id: str
    program: str
    """``eval_prompt`` with line endings as LF (ExecEval converts CRLF before compiling)."""
    ground_truth: str
    tests: tuple[UnitTest, ...]

    @property
    def id(self) -> str:
        """Return a unique id (SAFIM's ids repeat across splits): ``split/lang/task_id``."""
        return f"{self.split}/{self.lang}/{self.task_id}"

    @property
    def file_name(self) -> str:
        """Return the task's file name (``control_completion_000016.py``)."""
        return f"{self.task_id}.{EXTENSIONS.get(self.lang, 'txt')}"

    def prefix(self) -> str:
        """Return the program before the mask."""
        return self.program.split(MASK, 1)[0]

    def suffix(self) -> str:
        """Return the program after the mask."""
        return self.program.split(MASK, 1)[1]

    def blanked(self) -> str:
        """Return the program with the mask removed (what the editor shows)."""
        return self.prefix() + self.suffix()

    def filled(self, completion: str) -> str:
        """Return the program with ``completion`` where the mask was."""
        return self.prefix() + completion + self.suffix()

    def cursor(self) -> tuple[int, int]:
        """Return the mask's position as LSP counts it: 0-based line, UTF-16 column."""
        prefix = self.prefix()
        last = prefix.rsplit("\n", 1)[-1]
        return prefix.count("\n"), len(last.encode("utf-16-le")) // 2


# -- the tasks and the sample -------------------------------------------------------------


def data_dir(given: Path | None = None) -> Path:
    """Return the folder with the SAFIM files: ``given``, ``$LSP_ASSIST_SAFIM_DATA``, or
    ``shared/benchmarks/safim`` beside or inside the repository."""
    candidates = [given] if given is not None else []
    if os.environ.get(DATA_ENV):
        candidates.append(Path(os.environ[DATA_ENV]))
    root = Path(__file__).resolve().parents[3]  # the checkout (lsp_assist/evaluation/infill/)
    candidates += [root.parent / "shared/benchmarks/safim", root / "shared/benchmarks/safim"]
    for folder in candidates:
        if (folder / "block_completion.jsonl.gz").is_file():
            return folder
    where = ", ".join(str(c) for c in candidates)
    raise SafimError(f"no SAFIM data (block_completion.jsonl.gz) in {where}; set {DATA_ENV}")


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n")


def read_split(folder: Path, split: str, languages: Iterable[str] = LANGUAGES) -> list[Task]:
    """Return the tasks of one split file in these languages, in the file's order."""
    wanted = set(languages)
    path = folder / f"{split}_completion.jsonl.gz"
    if not path.is_file():
        raise SafimError(f"no {path.name} in {folder}")
    tasks = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for raw in handle:
            if not raw.strip():
                continue
            item = json.loads(raw)
            if item["lang"] not in wanted or item["eval_prompt"].count(MASK) != 1:
                continue
            tests = tuple(
                UnitTest(str(t.get("input", "")), tuple(str(o) for o in t.get("output", [])))
                for t in item.get("unit_tests") or []
            )
            tasks.append(
                Task(
                    split=split,
                    lang=str(item["lang"]),
                    task_id=str(item["task_id"]),
                    program=_lf(str(item["eval_prompt"])),
                    ground_truth=_lf(str(item["ground_truth"])),
                    tests=tests,
                )
            )
    return tasks


def load_tasks(
    folder: Path, splits: Sequence[str] = SPLITS, languages: Sequence[str] = LANGUAGES
) -> list[Task]:
    """Return every task of these splits and languages."""
    return [task for split in splits for task in read_split(folder, split, languages)]


def sample_tasks(tasks: Sequence[Task], per_cell: int, seed: int) -> list[Task]:
    """Return ``per_cell`` tasks of each split x language chosen with ``seed`` (0: all).

    Each cell's tasks are shuffled by a generator seeded with the seed, the split and
    the language, so a cell's sample does not depend on the other cells asked for and a
    sample holds every smaller sample of the same seed. Returned in split, language and
    id order.
    """
    cells: dict[tuple[str, str], list[Task]] = {}
    for task in tasks:
        cells.setdefault((task.split, task.lang), []).append(task)
    picked: list[Task] = []
    for (split, lang), members in cells.items():
        members = sorted(members, key=lambda t: t.task_id)
        if 0 < per_cell < len(members):
            random.Random(f"{seed}/{split}/{lang}").shuffle(members)
            members = members[:per_cell]
        picked += members
    order = {name: i for i, name in enumerate(SPLITS)}
    langs = {name: i for i, name in enumerate(LANGUAGES)}
    return sorted(picked, key=lambda t: (order.get(t.split, 9), langs.get(t.lang, 9), t.task_id))


def write_sample(
    source: Path,
    dest: Path,
    per_cell: int,
    seed: int,
    languages: Sequence[str] = LANGUAGES,
) -> dict[str, int]:
    """Write the seeded sample (:func:`sample_tasks`) of the SAFIM files in ``source`` to
    ``dest`` as files of the same format: each chosen task's line as it stands in its
    file, in the file's order, gzipped without a time stamp (the same bytes each time).
    Return how many tasks each split's file holds. The tests' committed sample
    (tests/evaluation/fixtures/safim) is made so."""
    dest.mkdir(parents=True, exist_ok=True)
    written = {}
    for split in SPLITS:
        chosen = {
            (t.lang, t.task_id)
            for t in sample_tasks(read_split(source, split, languages), per_cell, seed)
        }
        kept = []
        with gzip.open(source / f"{split}_completion.jsonl.gz", "rb") as src:
            for raw in src:
                if raw.strip():
                    item = json.loads(raw)
                    if (item["lang"], item["task_id"]) in chosen:
                        kept.append(raw if raw.endswith(b"\n") else raw + b"\n")
        data = gzip.compress(b"".join(kept), mtime=0)
        (dest / f"{split}_completion.jsonl.gz").write_bytes(data)
        written[split] = len(kept)
    return written


# -- running a program --------------------------------------------------------------------


def outputs_match(got: str, want: str) -> bool:
    """Return whether a program's output counts as ``want`` (ExecEval's rule, as SAFIM uses).

    Right when the stripped outputs have as many lines and each line, stripped, is equal;
    else when they have as many whitespace-separated tokens and each pair is equal as
    numbers within 1e-12, or as words (yes/no/true/false without case).
    """
    got_lines, want_lines = got.strip().split("\n"), want.strip().split("\n")
    if len(got_lines) == len(want_lines) and all(
        a.strip() == b.strip() for a, b in zip(got_lines, want_lines, strict=True)
    ):
        return True
    got_tokens, want_tokens = got.split(), want.split()
    if len(got_tokens) != len(want_tokens):
        return False
    for a, b in zip(got_tokens, want_tokens, strict=True):
        try:
            if abs(Decimal(a) - Decimal(b)) > _PRECISION:
                return False
            continue
        except (InvalidOperation, ValueError):
            pass
        a = a.lower() if a.lower() in _BOOL_TOKENS else a
        b = b.lower() if b.lower() in _BOOL_TOKENS else b
        if a != b:
            return False
    return True


def java_class(program: str) -> str:
    """Return the class a Java program's file must be named after (the public one, else Main)."""
    found = re.search(r"public\s+(?:final\s+|abstract\s+)*class\s+(\w+)", program)
    if found:
        return found.group(1)
    found = re.search(r"\bclass\s+(\w+)[^{]*\{[^}]*?static\s+void\s+main", program, re.S)
    return found.group(1) if found else "Main"


def csharp_compiler() -> str | None:
    """Return the C# compiler on PATH (``mcs`` with ``mono`` to run it), or None."""
    if shutil.which("mcs") and shutil.which("mono"):
        return "mcs"
    return None


def runtime_available(lang: str) -> bool:
    """Return whether this machine can compile and run ``lang``'s programs."""
    need = {"python": [], "java": ["javac", "java"], "cpp": ["g++"]}.get(lang)
    if need is None:
        return lang == "csharp" and csharp_compiler() is not None
    return all(shutil.which(tool) for tool in need)


def _run(
    argv: list[str], folder: Path, stdin: str, timeout: float, *, limit: bool
) -> tuple[int | None, str, str]:
    """Run ``argv`` in ``folder``; return its exit code (None: timed out), stdout, stderr."""
    process = subprocess.Popen(
        argv,
        cwd=folder,
        env=scratch_env(folder),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=limit_memory if limit and os.name == "posix" else None,
    )
    try:
        out, err = process.communicate(stdin.encode("utf-8"), timeout=timeout)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        kill_group(process)
        out, err = process.communicate()
        code = None
    return code, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _build(lang: str, program: str, folder: Path) -> tuple[list[str] | None, str]:
    """Write and compile ``program`` in ``folder``; return the command that runs it (None:
    a compile error) and the compiler's last message."""
    if lang == "python":
        try:
            compile(program, "main.py", "exec")
        except (SyntaxError, ValueError) as exc:
            return None, f"SyntaxError: {exc}"[:300]
        (folder / "main.py").write_text(program, encoding="utf-8")
        return [sys.executable, "-I", "main.py"], ""
    if lang == "java":
        name = java_class(program)
        (folder / f"{name}.java").write_text(program, encoding="utf-8")
        compile_argv = ["javac", "-nowarn", "-encoding", "UTF-8", f"{name}.java"]
        run_argv = ["java", "-Xmx1g", "-Xss256m", "-cp", ".", name]
    elif lang == "cpp":
        (folder / "main.cpp").write_text(program, encoding="utf-8")
        compile_argv = ["g++", "-O2", "-std=c++17", "-o", "main", "main.cpp"]
        run_argv = ["./main"]
    else:  # csharp
        (folder / "main.cs").write_text(program, encoding="utf-8")
        compile_argv = ["mcs", "-nowarn:0168,0219", "-out:main.exe", "main.cs"]
        run_argv = ["mono", "main.exe"]
    code, out, err = _run(compile_argv, folder, "", COMPILE_TIMEOUT_S, limit=False)
    if code != 0:
        lines = (err or out).strip().splitlines()
        return None, ("compile timeout" if code is None else (lines[0] if lines else ""))[:300]
    return run_argv, ""


def run_program(
    lang: str, program: str, tests: Sequence[UnitTest], timeout: float = TEST_TIMEOUT_S
) -> dict[str, Any]:
    """Compile ``program`` and run it on each test in a fresh scratch folder; return the outcome.

    ``status`` is ``passed`` (every test's output matches), ``wrong_answer``,
    ``runtime_error``, ``timeout`` (one test ran past ``timeout``), ``compile_error``, or
    ``not_run`` (no compiler for the language, or no tests). Stops at the first failing
    test, as SAFIM's runs do. The folder is removed afterwards; never the workspace.
    """
    if not tests:
        return {"status": "not_run", "error": "no unit tests", "tests_passed": 0}
    if not runtime_available(lang):
        return {"status": "not_run", "error": f"no compiler for {lang}", "tests_passed": 0}
    folder = Path(tempfile.mkdtemp(prefix="lsp-assist-safim-run-"))
    try:
        argv, message = _build(lang, program, folder)
        if argv is None:
            return {"status": "compile_error", "error": message, "tests_passed": 0}
        passed = 0
        for test in tests:
            code, out, err = _run(argv, folder, test.input, timeout, limit=lang != "java")
            if code is None:
                return {"status": "timeout", "error": "timeout", "tests_passed": passed}
            if code != 0:
                tail = err.strip().splitlines()[-1:] or [f"exit code {code}"]
                return {"status": "runtime_error", "error": tail[0][:300], "tests_passed": passed}
            if not any(outputs_match(out, want) for want in test.outputs):
                return {"status": "wrong_answer", "error": "", "tests_passed": passed}
            passed += 1
        return {"status": "passed", "error": "", "tests_passed": passed}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- the scores of one completion ------------------------------------------------------------


def api_match(completion: str, truth: str, lang: str) -> bool:
    """Return SAFIM's api match: whitespace removed, equal; for Python, when both parse as
    a call, the same positional and keyword arguments (SAFIM compares only those)."""
    a, b = re.sub(r"\s+", "", completion), re.sub(r"\s+", "", truth)
    if lang == "python":
        one: ast.expr | None = None
        two: ast.expr | None = None
        with contextlib.suppress(SyntaxError, ValueError):
            one, two = ast.parse(a, mode="eval").body, ast.parse(b, mode="eval").body
        if isinstance(one, ast.Call) and isinstance(two, ast.Call):
            return _call_args(one) == _call_args(two)
    return a == b


def _call_args(call: ast.Call) -> tuple[list[str], dict[str | None, str]]:
    return [ast.dump(a) for a in call.args], {k.arg: ast.dump(k.value) for k in call.keywords}


def right_text(task: Task) -> str:
    """Return the text right of the cursor an answer could repeat: the rest of the mask's
    line, or (when that is blank) the next non-blank line, stripped."""
    for line in task.suffix().split("\n"):
        if line.strip():
            return line.strip()
    return ""


def suffix_overlap(task: Task, completion: str) -> str:
    """Return the start of the text right of the cursor that the completion repeats at its
    end where the ground truth does not ('' when none): a duplicated closing bracket, or
    the next line written again."""
    right = right_text(task)
    tail = completion.rstrip()
    truth = task.ground_truth.rstrip()
    for k in range(len(right), 0, -1):
        head = right[:k]
        if tail.endswith(head) and not truth.endswith(head):
            closer = _CLOSERS.get(head[0])
            if closer is not None and tail.count(closer) >= tail.count(head[0]):
                continue  # a bracket the completion opened itself: ``f(x)`` before ``)``
            return head
    return ""


_CLOSERS = {")": "(", "]": "[", "}": "{"}


def parse_errors(lang: str, program: str) -> int | None:
    """Return the ERROR and MISSING nodes of ``program``'s syntax tree (None: no grammar)."""
    from lsp_assist.context import get_parser

    parser = get_parser(lang)
    if parser is None:
        return None
    tree = parser.parse(program.encode("utf-8"))
    count = 0
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.is_error or node.is_missing:
            count += 1
        if node.has_error:
            stack.extend(node.children)
    return count


def score(
    task: Task,
    completion: str | None,
    program: str | None = None,
    timeout: float = TEST_TIMEOUT_S,
    reference_errors: int | None = None,
) -> dict[str, Any]:
    """Return one answer's scores.

    ``completion`` is the text where the mask was (None when the answer's edit reached
    beyond the cursor's surroundings); ``program`` the completed program (default: the
    task's program with the completion). ``passed`` is pass@1: unit tests for block and
    control (the ground truth itself passes without a run, as in SAFIM), the match rule
    for api.
    """
    text = completion if completion is not None else ""
    program = program if program is not None else task.filled(text)
    exact = completion is not None and text.strip() == task.ground_truth.strip()
    if task.split == "api":
        passed = completion is not None and api_match(text, task.ground_truth, task.lang)
        outcome: dict[str, Any] = {"status": "passed" if passed else "wrong_answer", "error": ""}
    elif completion is not None and text == task.ground_truth:
        outcome = {"status": "passed", "error": "", "shortcut": True}
    else:
        outcome = run_program(task.lang, program, task.tests, timeout)
    errors = parse_errors(task.lang, program)
    if errors is not None and reference_errors is not None:
        errors = max(0, errors - reference_errors)
    overlap = suffix_overlap(task, text) if completion is not None else ""
    return {
        "completion": completion,
        "exact_match": exact,
        "passed": outcome["status"] == "passed",
        "status": outcome["status"],
        "run_error": outcome.get("error", ""),
        "compile_error": outcome["status"] == "compile_error",
        "empty": not text.strip(),
        "suffix_duplicated": bool(overlap),
        "suffix_overlap": overlap,
        "new_parse_errors": errors,
    }


def program_key(task: Task, program: str) -> str:
    """Return a key for a completed program (two arms giving the same program share a run)."""
    return task.id + ":" + hashlib.sha256(program.encode("utf-8")).hexdigest()[:20]


def first_line(completion: str) -> str:
    """Return the completion cut at its first line break (the model alone, one line)."""
    return completion.split("\n", 1)[0]


def _cut_at_close(text: str, *, below_zero: bool) -> str:
    """Cut ``text`` after the ``)`` that closes depth 0 (``below_zero``: before the first
    unmatched one)."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if below_zero and depth < 0:
                return text[:i]
            if not below_zero and depth == 0 and c == ")":
                return text[: i + 1]
    return text


def safim_truncate(task: Task, completion: str, reference_errors: int | None) -> str:
    """Return the completion cut as SAFIM's post-processing cuts it (its ``generate.py``
    flags per split; a model's own answer scored beside the server's, as the paper does).

    block (``truncate_line_until_block``): drop the last line until the completed
    program has no more parse errors than the reference (C#: no grammar here, kept
    whole); control (``truncate_control``): Python the first non-empty line, the C
    family up to the first unmatched ``)``; api (``truncate_api_call``): up to the
    ``)`` that brings the bracket depth back to 0.
    """
    if task.split == "control":
        if task.lang == "python":
            return next((line for line in completion.split("\n") if line.strip()), "")
        return _cut_at_close(completion, below_zero=True)
    if task.split == "api":
        return _cut_at_close(completion, below_zero=False)
    lines = completion.split("\n")
    for end in range(len(lines), 0, -1):
        candidate = "\n".join(lines[:end])
        errors = parse_errors(task.lang, task.filled(candidate))
        if errors is None:
            return completion
        if errors <= (reference_errors or 0):
            return candidate
    return lines[0]


# -- summary and report ----------------------------------------------------------------------


def summarize(records: Sequence[dict[str, Any]], arm: str) -> dict[str, Any]:
    """Return one arm's figures over these records (docs/evaluation.md, "SAFIM")."""
    mine = [r["arms"][arm] for r in records if arm in r.get("arms", {})]
    ran = [a for a in mine if a["status"] != "not_run"]
    latency = [float(a["latency_ms"]) for a in mine if a.get("latency_ms") is not None]
    parsed = [a for a in mine if a.get("new_parse_errors") is not None]
    return {
        "tasks": len(mine),
        "run": len(ran),
        "pass_at_1": share([bool(a["passed"]) for a in ran]),
        "compile_errors": share([bool(a["compile_error"]) for a in ran]),
        "exact_match": share([bool(a["exact_match"]) for a in mine]),
        "suffix_duplicated": share([bool(a["suffix_duplicated"]) for a in mine]),
        "parse_errors": share([bool(a["new_parse_errors"]) for a in parsed]),
        "empty": sum(1 for a in mine if a["empty"]),
        "errors": sum(1 for a in mine if a.get("error")),
        "latency_ms": {f"p{q}": percentile(latency, q) for q in (50, 90)},
    }


def arms_of(records: Sequence[dict[str, Any]]) -> list[str]:
    """Return the arms present in the records, in the table's order."""
    present = {arm for r in records for arm in r.get("arms", {})}
    return [arm for arm in ARM_LABELS if arm in present]


def cells(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Return the table's rows: per language x split x arm, the summary of those records."""
    rows = []
    for lang in LANGUAGES:
        for split in SPLITS:
            mine = [r for r in records if r["lang"] == lang and r["split"] == split]
            if not mine:
                continue
            for arm in arms_of(mine):
                rows.append(
                    {"lang": lang, "split": split, "arm": arm, "summary": summarize(mine, arm)}
                )
    return rows


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


TABLE_COLUMNS = (
    "language",
    "split",
    "arm",
    "tasks (run)",
    "pass@1",
    "compile err.",
    "exact",
    "suffix dup.",
    "new parse err.",
    "empty",
    "latency P50 / P90 ms",
)


def table(records: Sequence[dict[str, Any]]) -> str:
    """Return the markdown table: one row per language x split x arm."""
    from lsp_assist.evaluation.report import markdown

    rows = []
    for cell in cells(records):
        s = cell["summary"]
        lat = " / ".join("-" if v is None else f"{v:,.0f}" for v in s["latency_ms"].values())
        rows.append(
            [
                cell["lang"],
                cell["split"],
                ARM_LABELS[cell["arm"]],
                f"{s['tasks']} ({s['run']})",
                _pct(s["pass_at_1"]),
                "-" if cell["split"] == "api" else _pct(s["compile_errors"]),
                _pct(s["exact_match"]),
                _pct(s["suffix_duplicated"]),
                _pct(s["parse_errors"]),
                str(s["empty"]),
                lat,
            ]
        )
    return markdown(TABLE_COLUMNS, rows)


def report_markdown(result: dict[str, Any]) -> str:
    """Return safim.md: what ran, the table, the definitions."""
    meta = result["meta"]
    per_cell = "all tasks" if not meta["tasks"] else f"{meta['tasks']} tasks"
    out = [
        "# lsp-assist bench --safim: SAFIM block, control and api infilling",
        "",
        *report_head(meta),
        f"Model {meta['model_label']}, {meta['quantization']}; {per_cell} per split x "
        f"language (seed {meta['seed']}), {meta['sampled']} tasks of {meta['available']}.",
        "",
        table(result["records"]),
        "Arms: **plain FIM** the model alone: its FIM tokens around the program before and "
        "after the mask, greedy to its end-of-text or "
        f"{meta['plain_max_tokens']} tokens; **plain FIM, first line** that answer cut at "
        "its first line break; **lsp-assist serve** the program opened in a scratch "
        f"workspace (alone), the cursor at the mask, {trigger_words(meta)}, the "
        f"answer's insertText applied over its range (settings: {meta['server_settings']}).",
        "",
        "Columns: pass@1 = every unit test's output right (SAFIM's rule), over the tasks "
        "run (not run: no compiler); api: SAFIM's match rule; compile err. = share of runs "
        "that did not compile (Python: a SyntaxError); exact = the answer, stripped, equals "
        "the ground truth, stripped; suffix dup. = the answer ends with the start of the "
        "text right of the cursor where the ground truth does not; new parse err. = the "
        "completed program has more tree-sitter errors than with the ground truth "
        "(languages with a grammar); empty = no answer.",
        "",
    ]
    return "\n".join(out)


def write_outputs(out: Path, result: dict[str, Any]) -> tuple[Path, Path]:
    """Write results.json (meta, every record) and safim.md into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    data = out / "results.json"
    partial = out / "results.json.tmp"
    partial.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    partial.replace(data)
    text = out / "safim.md"
    text.write_text(report_markdown(result), encoding="utf-8")
    return text, data
