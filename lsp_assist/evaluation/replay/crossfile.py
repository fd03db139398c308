"""The cross-file line benchmark (``bench --crossfile``): its tasks, scores, figures and table.

A task is one line of a package whose completion uses a name defined in another file of
the package (:func:`~lsp_assist.evaluation.replay.tasks.cross_names_of`: a top-level
definition elsewhere and none in its own file, used bare through an import that binds it
or as ``module.name``), served as a user at that line is served: the file with that line
and everything after it removed, the line's indentation in place (auto-indent), the
cursor after it, one automatic inline request. Lines are those a replay region may hold
(inside a function body, code, ASCII, at most 120 characters, outside docstrings and
multi-line strings), 8 characters at least, unique in the package (so a prompt holding
one can only have leaked it), with every cross-file name already written above the line
(the file as the user has it binds it). Files are visited in an order shuffled by the
seed, at most :data:`PER_FILE` lines of a file, at least :data:`LINE_GAP` lines apart.

Scores, first line of the suggestion against the line (both stripped): exact match,
identifier match (the first cross-file name is an identifier of the suggestion), edit
similarity (metrics.py), and the **keys** a typist saves on the line: with this one
suggestion on screen at the line's start, the replay's user (user.decide) takes it
with Tab when right in full, word by word when its first words are right, else types over
it, and it stays on screen while the typed keys agree with it; saved = 1 - keys pressed /
keys needed. No model and no pygls here: crossfile_run.py runs the rows.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lsp_assist.documents import language_for_path
from lsp_assist.evaluation.metrics import first_line, score
from lsp_assist.evaluation.replay.run import PLAIN_SETTINGS
from lsp_assist.evaluation.replay.tasks import cross_names_of, eligible_lines, keys_between
from lsp_assist.evaluation.replay.user import decide
from lsp_assist.evaluation.tasks import MIN_CHARS, Task, definition_needles, line_counts
from lsp_assist.index import Symbol

ROW_NAMES = ("plain", "default", "oracle")
"""The rows, in the table's order."""
ROW_LABELS = {
    "plain": "plain FIM of the file",
    "default": "default",
    "oracle": "default + the needed definition (oracle)",
}
PER_FILE = 2
"""Lines taken from one file at most."""
LINE_GAP = 10
"""Lines of one file are at least this far apart (a build at one never anchors the next)."""
DEFAULT_TASKS = 30
"""Tasks per package by default: 60 over the two packages of docs/evaluation.md."""
MIN_TASKS = 60
"""What issue 46 asks of a run: this many tasks over at least two packages, one TypeScript."""


def row_settings(name: str, tasks: Sequence[CrossTask]) -> dict[str, Any]:
    """Return what row ``name`` sets over the defaults: ``plain`` the replay's plain row
    (the editing zone alone, at the same budget), ``oracle`` every task's pins."""
    if name == "plain":
        return dict(PLAIN_SETTINGS)
    if name == "oracle":
        return {"relatedPins": [pin for task in tasks for pin in task.pins()]}
    return {}


@dataclass(frozen=True, slots=True)
class CrossTask:
    """One cross-file line of a package: where it is, what it uses from other files."""

    task: Task
    """The line as the bench's hole tasks describe one (``kind`` cross_file, ``key`` the
    first cross-file name, ``needles`` texts of its definition)."""
    package: str
    names: tuple[str, ...]
    """The names the line uses that only another file defines, in order."""
    definitions: tuple[str, ...]
    """Each name's definition as ``PATH:NAME`` (workspace-relative), in order."""

    @property
    def id(self) -> str:
        """The task's id."""
        return self.task.id

    def buffer(self, text: str) -> str:
        """Return the file as the user has it at the line: everything before the line, then
        the line's indentation (the cursor after it)."""
        lines = text.split("\n")
        head = "".join(f"{line}\n" for line in lines[: self.task.line])
        return head + self.task.target[: self.task.indent]

    def pins(self) -> list[str]:
        """Return the ``relatedPins`` entries that place this line's definitions at it."""
        where = f"{self.task.path}:{self.task.line + 1}"
        return [f"{where}={definition}" for definition in self.definitions]

    def to_json(self) -> dict[str, Any]:
        """Return the task as a JSON object."""
        out = asdict(self)
        out["task"] = self.task.to_json()
        out["names"], out["definitions"] = list(self.names), list(self.definitions)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CrossTask:
        """Return the task a :meth:`to_json` object describes."""
        return cls(
            task=Task.from_json(data["task"]),
            package=str(data["package"]),
            names=tuple(data["names"]),
            definitions=tuple(data["definitions"]),
        )


# -- choosing the lines ----------------------------------------------------------------------


def definition_of(index: Any, path: Path, name: str) -> Symbol | None:
    """Return the top-level definition of ``name`` in another file that ``path`` means: one
    in a file ``path`` imports first, else the first by path."""
    found: list[Symbol] = [
        s for s in index.lookup(name) if s.parent is None and s.path != path and s.kind != "module"
    ]
    if not found:
        return None
    entry = index.file(path)
    imported: set[Path] = set()
    for imp in entry.imports if entry is not None else ():
        target = index.resolve_import(path, imp)
        if target is not None:
            imported.add(target)
    return min(found, key=lambda s: (s.path not in imported, str(s.path), s.start_line))


def _written_above(name: str, before: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(name)}(?![\w])", before) is not None


def file_lines(
    index: Any, path: Path, text: str, unique: dict[str, int]
) -> list[tuple[int, tuple[str, ...], tuple[Symbol, ...]]]:
    """Return the lines of one file fit to be a task: (line, names, their definitions)."""
    language = language_for_path(path) or ""
    lines = text.split("\n")
    ok = eligible_lines(text, language)
    out: list[tuple[int, tuple[str, ...], tuple[Symbol, ...]]] = []
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if not ok[i] or len(stripped) < MIN_CHARS or unique.get(stripped, 0) != 1:
            continue
        names = cross_names_of(index, path, raw, language)
        before = "\n".join(lines[:i])
        found = [definition_of(index, path, name) for name in names]
        defined = [sym for sym in found if sym is not None]
        if names and len(defined) == len(names) and all(_written_above(n, before) for n in names):
            out.append((i, names, tuple(defined)))
    return out


def _spaced(picks: Iterable[int], gap: int) -> list[int]:
    out: list[int] = []
    for line in picks:
        if all(abs(line - other) >= gap for other in out):
            out.append(line)
    return out


def choose_tasks(
    index: Any, package: str, count: int, seed: int, per_file: int = PER_FILE, gap: int = LINE_GAP
) -> list[CrossTask]:
    """Return ``count`` cross-file lines of the scanned ``index`` (fewer when the package has
    fewer): files in an order shuffled by ``seed``, at most ``per_file`` lines of each, at
    least ``gap`` lines apart."""
    files = sorted(p for p in index.files() if language_for_path(p) is not None)
    unique = line_counts(index, files)
    rng = random.Random(seed)
    rng.shuffle(files)
    tasks: list[CrossTask] = []
    for path in files:
        if len(tasks) >= count:
            break
        text = index.text_of(path)
        if not text or "\r" in text:
            continue
        found = {line: (names, syms) for line, names, syms in file_lines(index, path, text, unique)}
        if not found:
            continue
        order = sorted(found)
        rng.shuffle(order)
        picks = _spaced(order, gap)[: min(per_file, count - len(tasks))]
        raw_lines = text.split("\n")
        for line in sorted(picks):
            names, syms = found[line]
            tasks.append(
                _task(index, package, len(tasks) + 1, path, raw_lines[line], line, names, syms)
            )
    return tasks


def _task(
    index: Any,
    package: str,
    number: int,
    path: Path,
    raw: str,
    line: int,
    names: tuple[str, ...],
    syms: tuple[Symbol, ...],
) -> CrossTask:
    rel = index.relative(path)
    indent = len(raw) - len(raw.lstrip())
    task = Task(
        id=f"{package}-{number:03d}",
        kind="cross_file",
        path=rel,
        language=language_for_path(path) or "",
        line=line,
        indent=indent,
        target=raw.rstrip(),
        called=names[0],
        definition=index.relative(syms[0].path),
        needles=definition_needles(index, syms[0]),
        key=names[0],
    )
    definitions = tuple(f"{index.relative(s.path)}:{s.name}" for s in syms)
    return CrossTask(task=task, package=package, names=names, definitions=definitions)


# -- scores ------------------------------------------------------------------------------------


def line_keys(target: str, suggestion: str) -> tuple[int, int]:
    """Return the keys that type ``target`` (a line from its indentation) without
    suggestions and with ``suggestion`` on screen at its start (its first line; it stays
    while the keys typed agree with it, and nothing else is ever shown)."""
    needed = keys_between(target, 0, len(target))
    shown: str | None = first_line(suggestion) and suggestion.split("\n", 1)[0].rstrip()
    plan: tuple[str, ...] = ()
    p = pressed = 0
    while p < len(target):
        action = decide(target, p, shown, plan)
        pressed += 1
        p += len(action.text)
        plan = action.plan
        if shown and action.kind != "tab" and shown.startswith(action.text):
            shown = shown[len(action.text) :]
        else:
            shown = None
    return needed, pressed


def score_answer(task: CrossTask, suggestion: str) -> dict[str, Any]:
    """Return the line metrics of one suggestion and the keys it saves."""
    needed, pressed = line_keys(task.task.expected, suggestion)
    return {**score(task.task, suggestion), "keys_needed": needed, "keys_pressed": pressed}


def carries(task: CrossTask, prompt: str) -> bool:
    """True when ``prompt`` holds the line's first definition (one of its needles)."""
    return any(needle in prompt for needle in task.task.needles)


# -- figures and table -------------------------------------------------------------------------


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def figures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Return one row's figures over ``records`` (one per task)."""
    n = len(records)
    needed = sum(int(r.get("keys_needed", 0)) for r in records)
    pressed = sum(int(r.get("keys_pressed", 0)) for r in records)
    prompted = [int(r["prompt_tokens"]) for r in records if r.get("prompt_tokens")]
    latency = sorted(float(r["client_ms"]) for r in records if r.get("client_ms") is not None)
    return {
        "tasks": n,
        "exact": sum(bool(r.get("exact_match")) for r in records),
        "identifier": sum(bool(r.get("identifier_match")) for r in records),
        "edit_similarity": (
            sum(float(r.get("edit_similarity", 0.0)) for r in records) / n if n else None
        ),
        "keys_needed": needed,
        "keys_pressed": pressed,
        "keys_saved": 1 - pressed / needed if needed else None,
        "empty": sum(not first_line(str(r.get("suggestion", ""))) for r in records),
        "skipped": sum(bool(r.get("skipped")) for r in records),
        "definition_share": _share([bool(r.get("carries_definition")) for r in records]),
        "prompt_tokens_mean": sum(prompted) / len(prompted) if prompted else None,
        "round_trip_p50_ms": latency[len(latency) // 2] if latency else None,
        "leaks": sum(bool(r.get("leaked")) for r in records),
    }


def summarize(records: Sequence[dict[str, Any]], rows: Sequence[str]) -> dict[str, Any]:
    """Return the figures per package and row, and over every package per row."""
    packages = list(dict.fromkeys(str(r["package"]) for r in records))
    out: dict[str, Any] = {}
    for package in [*packages, "all"]:
        mine = [r for r in records if package in ("all", r["package"])]
        out[package] = {row: figures([r for r in mine if r["row"] == row]) for row in rows}
    return out


def _fmt(value: float | None, form: str) -> str:
    return "-" if value is None else format(value, form)


def table(result: dict[str, Any]) -> str:
    """Return table.md: per package and over all, one line per row."""
    meta = result["meta"]
    lines = [
        f"# Cross-file lines: {meta['model_label']}",
        "",
        f"`{meta['command']}`, {meta['date']}, commit {meta['commit']}, load "
        f"{meta['load_start']}-{meta.get('load_end', '?')}, {meta.get('wall_min', '?')} min; "
        f"settings of every row: {meta['settings']}",
        "",
    ]
    head = (
        "| row | tasks | exact | identifier | edit sim. | keys saved | definition in prompt "
        "| prompt tokens | empty | round trip P50 |"
    )
    for package, rows in result["summary"].items():
        info = meta["packages"].get(package, {})
        title = "all packages" if package == "all" else f"{package} ({info.get('language', '')})"
        lines += [f"## {title}", "", head, "|---|---|---|---|---|---|---|---|---|---|"]
        for name, f in rows.items():
            if not f["tasks"]:
                continue
            lines.append(
                f"| {ROW_LABELS.get(name, name)} | {f['tasks']} | {f['exact']} | "
                f"{f['identifier']} | {_fmt(f['edit_similarity'], '.3f')} | "
                f"{_fmt(f['keys_saved'], '.1%')} | {_fmt(f['definition_share'], '.0%')} | "
                f"{_fmt(f['prompt_tokens_mean'], '.0f')} | {f['empty']} | "
                f"{_fmt(f['round_trip_p50_ms'], '.0f')} ms |"
            )
        lines.append("")
    return "\n".join(lines)
