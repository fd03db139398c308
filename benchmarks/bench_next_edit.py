"""Benchmark next edits (issue 22) on real code nobody here wrote: the stdlib.

Cases are generated from the installed standard library with Python's own ``ast`` as the
oracle (independent of the tree-sitter engine under test):

- ``rename-def``: a module-level function with 3+ references, the name bound nowhere
  else in the module; the user selects the name in its ``def`` and types a new one key
  by key. Expected: every reference, renamed.
- ``rename-local``: a local variable (assigned, not a parameter) of a function without
  nested scopes, used 3+ times; the user renames its second occurrence. Expected: the
  other occurrences, renamed.
- ``add-param``: a module-level function with plain positional parameters and 3+ plain
  calls in the file; the user appends a parameter to the ``def``, then adds an argument
  to the first call. Expected: the same argument appended to the other calls.

Each case runs through a real ``Session``: the edits are ``Buffers.change`` calls (the
index's incremental reparse included), the answer is ``NextEdits.propose``. Reported per
kind: exact (the first proposed edit is one of the expected edits), recall (expected
edits proposed), noise (proposed edits that are not expected), and the latency from the
last didChange to the answer, P50/P90/P99 (targets: exact >= 90 % on renames, P99 <= 50 ms).

``--source model`` (or ``both``) runs the model source too, with ``--model`` (a preset or
a GGUF path): the window around the cursor rewritten by the model after the last step
(the symbolic source is asked at every step, the model once, as a client asks after a
burst of typing); it adds the prompt tokens evaluated (not reused) and the tokens written
per case, the share of expected edits inside the model's window (``reach``: lines 4 above
to 8 below the cursor, all it can see) and the recall among those (``rec.in``). The same
cases (same seed) for every source, so the rows compare.

Run: nice -n 19 .venv/bin/python benchmarks/bench_next_edit.py [--per-kind 200]
     [--seed 22] [--json FILE] [--source symbolic|model|both --model coder-1.5b
     --threads 2 --format auto|sweep|instruct]
"""

from __future__ import annotations

import argparse
import ast
import json
import random
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_common import pct  # noqa: E402
from lsp_assist.backends import CancelToken  # noqa: E402
from lsp_assist.config import parse_settings  # noqa: E402
from lsp_assist.context import edit_window  # noqa: E402
from lsp_assist.documents import Position  # noqa: E402
from lsp_assist.serving import NextEdits, Session  # noqa: E402

Edit = tuple[int, int, int, int, str]
"""(start line, start column, end line, end column, text) in code points."""


@dataclass
class Case:
    kind: str
    path: Path
    text: str
    steps: list[tuple[int, int, int, int, str]]
    """The user's edits, in order (positions in code points, before each edit)."""
    expected: set[Edit]
    cursor: tuple[int, int]


@dataclass
class Tally:
    cases: int = 0
    exact: int = 0
    expected: int = 0
    found: int = 0
    proposed: int = 0
    noise: int = 0
    latencies: list[float] = field(default_factory=list)
    in_window: int = 0
    """Expected edits inside the model source's window (what it can reach at all)."""
    found_in_window: int = 0
    evaluated: list[int] = field(default_factory=list)
    """Prompt tokens evaluated (not reused) per case, model source."""
    written: list[int] = field(default_factory=list)
    """Tokens the model wrote per case."""


def _col(lines: list[str], row: int, byte_col: int) -> int:
    return len(lines[row].encode("utf-8")[:byte_col].decode("utf-8", "ignore"))


def _names(tree: ast.AST) -> dict[str, list[ast.Name]]:
    found: dict[str, list[ast.Name]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.setdefault(node.id, []).append(node)
    return found


def _bound_names(tree: ast.AST) -> dict[str, int]:
    """How many times each name is bound anywhere (defs, params, stores, imports)."""
    counts: dict[str, int] = {}

    def add(name: str) -> None:
        counts[name] = counts.get(name, 0) + 1

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            add(node.name)
        elif isinstance(node, ast.arg):
            add(node.arg)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            add(node.id)
        elif isinstance(node, ast.alias):
            add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                add(name)
        elif isinstance(node, ast.keyword) and node.arg:
            add(node.arg)  # a keyword argument of the same spelling: leave it out
        elif isinstance(node, ast.Attribute):
            add(node.attr)  # an attribute of the same spelling: leave it out
    return counts


def _def_name_at(lines: list[str], node: ast.FunctionDef) -> tuple[int, int] | None:
    row = node.lineno - 1
    line = lines[row]
    at = line.find("def " + node.name)
    return (row, at + 4) if at >= 0 else None


def cases_of(path: Path, text: str, rng: random.Random) -> Iterator[Case]:
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    lines = text.split("\n")
    names = _names(tree)
    bound = _bound_names(tree)
    module_defs = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    for fn in module_defs:
        refs = names.get(fn.name, [])
        if len(refs) < 3 or bound.get(fn.name, 0) != 1:
            continue
        where = _def_name_at(lines, fn)
        if where is None:
            continue
        new = fn.name + "_renamed"
        row, col = where
        expected = set()
        for ref in refs:
            rrow = ref.lineno - 1
            rcol = _col(lines, rrow, ref.col_offset)
            if rrow == row and rcol > col:  # after the edit on its line: shifted
                rcol += len(new) - len(fn.name)
            expected.add((rrow, rcol, rrow, rcol + len(fn.name), new))
        steps = [(row, col, row, col + len(fn.name), "")]
        steps += [(row, col + i, row, col + i, ch) for i, ch in enumerate(new)]
        yield Case("rename-def", path, text, steps, expected, (row, col))
        yield from _add_param(path, text, lines, fn, names, bound)
    for fn in [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        inner = [
            n
            for n in ast.walk(fn)
            if n is not fn
            and isinstance(
                n,
                ast.FunctionDef
                | ast.AsyncFunctionDef
                | ast.Lambda
                | ast.ClassDef
                | ast.ListComp
                | ast.SetComp
                | ast.DictComp
                | ast.GeneratorExp,
            )
        ]
        if inner:
            continue
        params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
        local: dict[str, list[ast.Name]] = {}
        for node in ast.walk(fn):
            if isinstance(node, ast.Name):
                local.setdefault(node.id, []).append(node)
        declared = {
            n for g in ast.walk(fn) if isinstance(g, ast.Global | ast.Nonlocal) for n in g.names
        }
        for name, uses in local.items():
            stores = [u for u in uses if not isinstance(u.ctx, ast.Load)]
            if len(uses) < 3 or not stores or name in params or name in declared:
                continue
            if bound.get(name, 0) != len(stores):
                continue  # the same spelling bound elsewhere in the module
            uses.sort(key=lambda u: (u.lineno, u.col_offset))
            site = uses[1]
            row = site.lineno - 1
            col = _col(lines, row, site.col_offset)
            new = name + "_v2"
            expected = set()
            for use in uses:
                if use is site:
                    continue
                urow = use.lineno - 1
                ucol = _col(lines, urow, use.col_offset)
                if urow == row and ucol > col:  # after the edit on its line: shifted
                    ucol += len(new) - len(name)
                expected.add((urow, ucol, urow, ucol + len(name), new))
            steps = [(row, col, row, col + len(name), new)]
            yield Case("rename-local", path, text, steps, expected, (row, col))
            break


def _add_param(
    path: Path,
    text: str,
    lines: list[str],
    fn: ast.FunctionDef,
    names: dict[str, list[ast.Name]],
    bound: dict[str, int],
) -> Iterator[Case]:
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
        return
    count = len(args.args)
    calls: list[ast.Call] = []
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == fn.name
        ):
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                return
            if len(node.args) != count or not node.args:
                return
            calls.append(node)
    if len(calls) < 3 or count == 0:
        return
    calls.sort(key=lambda c: (c.lineno, c.col_offset))
    last_param = args.args[-1]
    prow = last_param.end_lineno - 1  # type: ignore[operator]
    pcol = _col(lines, prow, last_param.end_col_offset)  # type: ignore[arg-type]
    if last_param.annotation is not None:
        return
    first = calls[0]
    arow = first.args[-1].end_lineno - 1  # type: ignore[operator]
    if arow == prow:
        return  # keep the two edits' positions independent of each other
    acol = _col(lines, arow, first.args[-1].end_col_offset)  # type: ignore[arg-type]
    steps = [(prow, pcol, prow, pcol, ", extra_arg"), (arow, acol, arow, acol, ", extra_value")]
    shift = len(", extra_arg")
    expected = set()
    for call in calls[1:]:
        end = call.args[-1]
        row = end.end_lineno - 1  # type: ignore[operator]
        col = _col(lines, row, end.end_col_offset)  # type: ignore[arg-type]
        if row == prow and col > pcol:
            col += shift
        expected.add((row, col, row, col, ", extra_value"))
    yield Case("add-param", path, text, steps, expected, (arow, acol))


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    skip = {"test", "site-packages", "idlelib", "lib2to3", "tkinter", "turtledemo"}
    files = [
        p
        for p in sorted(root.rglob("*.py"))
        if not skip & set(p.relative_to(root).parts) and p.stat().st_size < 400_000
    ]
    return files


def run_case(
    session: Session, engine: NextEdits, case: Case, n: int, tally: Tally
) -> tuple[list[Edit], float]:
    buffers = session.buffers
    assert session.workspace is not None
    uri = (session.workspace / f"case{n}_{case.path.name}").as_uri()
    buffers.open(uri, case.text, version=1, language_id="python")
    version = 1
    elapsed = 0.0
    answer = None
    model = engine.mode != "symbolic"
    for step, (row, col, erow, ecol, new) in enumerate(case.steps):
        version += 1
        began = time.perf_counter()
        buffers.change(uri, version, [(Position(row, col), Position(erow, ecol), new)])
        if model and step < len(case.steps) - 1:
            continue
        answer = engine.propose(uri, version, Position(*case.cursor))
        if answer.job is not None:
            outcome = engine.rewrite(answer.job, CancelToken())
            answer = engine.merge(answer, outcome)
            tally.evaluated.append(outcome.prompt_tokens - outcome.reused_tokens)
            tally.written.append(outcome.output_tokens)
        elapsed = (time.perf_counter() - began) * 1000
    assert answer is not None
    proposed = [
        (e.start.line, e.start.column, e.end.line, e.end.column, e.text)
        for e in answer.edits
        if e.view.uri == uri
    ]
    buffers.close(uri)
    return proposed, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-kind", type=int, default=200)
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--source", choices=("symbolic", "model", "both"), default="symbolic")
    parser.add_argument("--model", default="coder-0.5b", help="preset or GGUF (model source)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--format", choices=("auto", "sweep", "instruct"), default="auto")
    parser.add_argument("--show", action="store_true", help="print each case's edits")
    opts = parser.parse_args()
    rng = random.Random(opts.seed)
    files = stdlib_files()
    rng.shuffle(files)
    chosen: dict[str, list[Case]] = {"rename-def": [], "rename-local": [], "add-param": []}
    for path in files:
        if all(len(v) >= opts.per_kind for v in chosen.values()):
            break
        try:
            text = path.read_text("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "\r" in text or "\t" in text:
            continue
        per_file: dict[str, int] = {}
        for case in cases_of(path, text, rng):
            if len(chosen[case.kind]) < opts.per_kind and per_file.get(case.kind, 0) < 3:
                chosen[case.kind].append(case)
                per_file[case.kind] = per_file.get(case.kind, 0) + 1
    tallies = {kind: Tally() for kind in chosen}
    with tempfile.TemporaryDirectory() as tmp:
        options: dict[str, Any] = {"persist": False, "metrics": False, "watch": False}
        if opts.source != "symbolic":
            options |= {
                "nextEdit": opts.source,
                "nextEditFormat": opts.format,
                "threads": opts.threads,
                **(
                    {"modelPath": opts.model}
                    if opts.model.endswith(".gguf")
                    else {"model": opts.model}
                ),
            }
        settings, _ = parse_settings(options)
        assert not _, _
        session = Session(settings, workspace=Path(tmp))
        if opts.source != "symbolic" and session.load_backend() is None:
            sys.exit(f"no model: {session.model_error}")
        engine = NextEdits(session)
        n = 0
        for kind, cases in chosen.items():
            tally = tallies[kind]
            for case in cases:
                n += 1
                proposed, ms = run_case(session, engine, case, n, tally)
                if opts.show:
                    print(f"{kind} {case.path.name} cursor {case.cursor}")
                    print(f"  expected {sorted(case.expected)[:4]}\n  proposed {proposed[:4]}")
                tally.cases += 1
                tally.latencies.append(ms)
                tally.expected += len(case.expected)
                tally.proposed += len(proposed)
                tally.found += len(set(proposed) & case.expected)
                window = edit_window(case.text.split("\n"), case.cursor[0])
                reach = {e for e in case.expected if window.first <= e[0] < window.end}
                tally.in_window += len(reach)
                tally.found_in_window += len(set(proposed) & reach)
                tally.noise += sum(1 for p in proposed if p not in case.expected)
                tally.exact += bool(proposed) and proposed[0] in case.expected
        session.close()
    report: dict[str, Any] = {}
    model = f", model {opts.model}, format {opts.format}" if opts.source != "symbolic" else ""
    print(f"source {opts.source}{model}, seed {opts.seed}")
    print(
        f"{'kind':<14}{'cases':>6}{'exact':>8}{'recall':>8}{'noise':>8}"
        f"{'P50 ms':>8}{'P90 ms':>8}{'P99 ms':>8}{'eval':>6}{'wrote':>6}{'reach':>7}{'rec.in':>7}"
    )
    for kind, t in tallies.items():
        row = {
            "cases": t.cases,
            "exact": t.exact / t.cases if t.cases else 0.0,
            "recall": t.found / t.expected if t.expected else 0.0,
            "noise": t.noise / t.proposed if t.proposed else 0.0,
            "in_window": t.in_window / t.expected if t.expected else 0.0,
            "recall_in_window": t.found_in_window / t.in_window if t.in_window else 0.0,
            "p50_ms": pct(t.latencies, 50),
            "p90_ms": pct(t.latencies, 90),
            "p99_ms": pct(t.latencies, 99),
            "evaluated_mean": sum(t.evaluated) / len(t.evaluated) if t.evaluated else 0.0,
            "written_mean": sum(t.written) / len(t.written) if t.written else 0.0,
        }
        report[kind] = row
        print(
            f"{kind:<14}{t.cases:>6}{row['exact']:>8.1%}{row['recall']:>8.1%}{row['noise']:>8.1%}"
            f"{row['p50_ms']:>8.1f}{row['p90_ms']:>8.1f}{row['p99_ms']:>8.1f}"
            f"{row['evaluated_mean']:>6.0f}{row['written_mean']:>6.0f}"
            f"{row['in_window']:>7.0%}{row['recall_in_window']:>7.0%}"
        )
    if opts.json:
        opts.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
