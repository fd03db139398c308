"""HumanEval's multi-line and random-span infilling sets: the tasks, an answer's edit, its scores.

This module owns the official construction's other two sets (Bavarian et al. 2022,
"Efficient Training of Language Models to Fill in the Middle", and its harness
github.com/openai/human-eval-infilling) built from the same 164 problems as
humaneval.py's single-line set: ``multi``, every run of consecutive non-blank lines of
a canonical solution (5,815 tasks, as the official set), and ``span``, 10 random spans
of a canonical solution per problem with both ends mid-line (1,640). It owns each
set's tasks and seeded sample (humaneval.round_robin), where the editor's cursor
stands, an answer applied as an editor applies it (its text over its range), that
answer's scores, and the plain answer truncated as published (:func:`truncate_plain`).
Running the arms is humaneval_run.py; docs/evaluation.md, "HumanEval infilling". No
pygls.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lsp_assist.documents import Document
from lsp_assist.evaluation.infill.humaneval import (
    TEST_TIMEOUT_S,
    Problem,
    fill_scores,
    round_robin,
)

SETS = ("multi", "span")
"""The sets this module builds (``single`` is humaneval.py's)."""
SPANS_PER_PROBLEM = 10
"""Random spans per problem, as the official set (1,640 for 164 problems)."""
OFFICIAL_TASKS = {"single": 1033, "multi": 5815, "span": 1640}
"""The official sets' sizes (human-eval-infilling's data files)."""


@dataclass(frozen=True, slots=True)
class SpanTask:
    """One task of the multi-line or random-span set: ``program[start:end]`` removed."""

    problem: Problem
    kind: str
    """``multi`` or ``span``."""
    name: str
    """``L0_L3`` (the solution's lines 0 to 3, 0-based, blank lines counted, as the
    official ids) or ``S1`` to ``S10``."""
    start: int
    """Offset in the program where the removed part begins: the cursor."""
    end: int
    """Offset in the program where it ends."""

    @property
    def id(self) -> str:
        """Return the task's id: the problem and the name (``HumanEval/17/L0_L3``)."""
        return f"{self.problem.task_id}/{self.name}"

    @property
    def expected(self) -> str:
        """Return the removed text."""
        return self.problem.program[self.start : self.end]

    def prefix(self) -> str:
        """Return the program before the cursor."""
        return self.problem.program[: self.start]

    def suffix(self) -> str:
        """Return the program after the removed part."""
        return self.problem.program[self.end :]

    def blanked(self) -> str:
        """Return the program with the part removed (what the editor shows)."""
        return self.prefix() + self.suffix()

    def filled(self, completion: str) -> str:
        """Return the program with ``completion`` where the part was."""
        return self.prefix() + completion + self.suffix()

    def cursor(self) -> tuple[int, int]:
        """Return the cursor as LSP counts it: 0-based line, UTF-16 column."""
        doc = Document("file:///task.py", self.blanked())
        return doc.to_lsp(doc.position_at_offset(self.start))

    def where(self, offset: int) -> list[int]:
        """Return an offset of the program as a record shows it: 1-based line, column."""
        before = self.problem.program[:offset]
        return [before.count("\n") + 1, len(before) - (before.rfind("\n") + 1)]


def line_starts(text: str) -> list[int]:
    """Return the offset where each line of ``text`` starts."""
    starts = [0]
    starts += [i + 1 for i, c in enumerate(text) if c == "\n"]
    return starts


def multi_line_tasks(problem: Problem) -> list[SpanTask]:
    """Return every run of consecutive non-blank solution lines of the problem as a task.

    As the official set: with n non-blank lines, n(n+1)/2 runs (L_a to L_b, a <= b, a run
    of one line included), the blank lines between them removed with them. Here the
    first line keeps its indentation and the last its line break, so the cursor stands
    at the indentation's end of an otherwise empty line, as single-line's does.
    """
    program = problem.program
    starts = line_starts(program)
    lines = problem.candidate_lines()
    first_line = problem.prompt.count("\n")  # the solution's line 0, as the official ids count
    tasks = []
    for a, first in enumerate(lines):
        text = program[starts[first] :].split("\n", 1)[0]
        begin = starts[first] + len(text) - len(text.lstrip(" \t"))
        for b in range(a, len(lines)):
            last = lines[b]
            end = starts[last] + len(program[starts[last] :].split("\n", 1)[0])
            name = f"L{first - first_line}_L{last - first_line}"
            tasks.append(SpanTask(problem, "multi", name, begin, end))
    return tasks


def mid_line_offsets(problem: Problem) -> list[int]:
    """Return the solution's offsets in the program with a character of the same line on
    each side (not at a line's start or end)."""
    program = problem.program
    return [
        i
        for i in range(max(1, len(problem.prompt)), len(program))
        if program[i - 1] != "\n" and program[i] != "\n"
    ]


def random_span_tasks(problem: Problem, count: int = SPANS_PER_PROBLEM) -> list[SpanTask]:
    """Return ``count`` distinct random spans of the problem's solution, both ends mid-line.

    Each span's two ends are two distinct offsets drawn uniformly from
    :func:`mid_line_offsets` (as the official set draws two uniform offsets of the
    solution, which may also fall at a line's start or end or coincide); the generator is
    seeded with the problem's id, so the set is fixed and does not depend on the others.
    """
    offsets = mid_line_offsets(problem)
    rng = random.Random(f"{problem.task_id}/random-span")
    possible = len(offsets) * (len(offsets) - 1) // 2
    chosen: list[tuple[int, int]] = []
    while len(chosen) < min(count, possible):
        a, b = sorted(rng.sample(offsets, 2))
        if (a, b) not in chosen:
            chosen.append((a, b))
    return [SpanTask(problem, "span", f"S{i}", a, b) for i, (a, b) in enumerate(chosen, 1)]


def problem_tasks(problem: Problem, kind: str) -> list[SpanTask]:
    """Return one problem's tasks of the set ``kind`` (multi or span)."""
    if kind == "multi":
        return multi_line_tasks(problem)
    if kind == "span":
        return random_span_tasks(problem)
    raise ValueError(f"no HumanEval set {kind!r} here (sets: {', '.join(SETS)})")


def all_tasks(problems: Sequence[Problem], kind: str) -> list[SpanTask]:
    """Return the whole set ``kind``, in problem order."""
    return [task for problem in problems for task in problem_tasks(problem, kind)]


def sample_tasks(problems: Sequence[Problem], kind: str, size: int, seed: int) -> list[SpanTask]:
    """Return ``size`` tasks of the set chosen with ``seed`` as the single-line sample is
    (humaneval.round_robin: one per problem per round; 0: all of them)."""
    return round_robin([problem_tasks(p, kind) for p in problems], size, seed)


# -- an answer ---------------------------------------------------------------------------


def apply_answer(
    task: SpanTask, text: str, edit_range: Sequence[int] | None
) -> tuple[str, str | None]:
    """Apply an answer as an editor applies an inline item: ``text`` over ``edit_range``
    (start line, character, end line, character; None: at the cursor) in the blanked
    program. Return the program and what stands where the removed part was (None when the
    edit changed the text before the cursor or after the removed part)."""
    blank = task.blanked()
    if edit_range is None:
        begin = end = task.start
    else:  # the server's own conversion of LSP positions (UTF-16 columns, clamped)
        doc = Document("file:///task.py", blank)
        begin = doc.offset_at(doc.from_lsp(edit_range[0], edit_range[1]))
        end = doc.offset_at(doc.from_lsp(edit_range[2], edit_range[3]))
    program = blank[:begin] + text + blank[end:]
    prefix, suffix = task.prefix(), task.suffix()
    kept = program.startswith(prefix) and program.endswith(suffix)
    if kept and len(program) >= len(prefix) + len(suffix):
        return program, program[len(prefix) : len(program) - len(suffix)]
    return program, None


def _compiles(program: str) -> bool:
    try:
        compile(program, "task.py", "exec")
    except (SyntaxError, ValueError):
        return False
    return True


def truncate_plain(task: SpanTask, answer: str) -> str:
    """Return the plain arm's answer truncated as the published multi-line harness does
    (the ``plain_trunc`` arm; docs/evaluation.md, "HumanEval infilling").

    InCoder's harness (Fried et al. 2022, whose multi-line set the official one is) cuts
    an infill by default to as many lines as the removed part has (``truncate_num_lines``:
    the removed part's and the answer's leading and trailing line breaks stripped, the
    answer's first n lines kept). Here the cursor stands at the first line's
    indentation, not a line's start, so line breaks the answer begins with are kept (not
    counted), else its next line would land after that indentation. The random-span set's
    own harness (Bavarian et al. 2022) cuts nothing (the model's end-of-text ends the
    answer: the ``plain`` arm); a span ends mid-line, so here its answer is cut the same
    way and then, where the last line kept ends with the text right of the span on its
    line, that repeated text is dropped unless dropping it breaks the program's syntax
    where keeping it did not (an answer that itself ends as the line does).
    """
    body = answer.lstrip("\n")
    lead = answer[: len(answer) - len(body)]
    count = len(task.expected.strip("\n").split("\n"))
    kept = lead + "\n".join(body.rstrip("\n").split("\n")[:count])
    rest = task.suffix().split("\n", 1)[0]
    if task.kind == "span" and rest.strip() and kept.endswith(rest):
        cut = kept[: len(kept) - len(rest)]
        if _compiles(task.filled(cut)) or not _compiles(task.filled(kept)):
            return cut
    return kept


def score(
    task: SpanTask,
    suggestion: str,
    edit_range: Sequence[int] | None = None,
    timeout: float = TEST_TIMEOUT_S,
) -> dict[str, Any]:
    """Return one answer's scores on a multi-line or random-span task: the answer applied
    (:func:`apply_answer`), what stands where the part was against the part, the
    program's tests; ``context_changed`` when the edit changed text around it."""
    program, completion = apply_answer(task, suggestion, edit_range)
    scores = fill_scores(completion or "", task.expected, program, task.problem, timeout)
    scores["empty"] = not suggestion.strip()
    return {"completion": completion, "context_changed": completion is None, **scores}
