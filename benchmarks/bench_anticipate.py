"""Probe the related layer at the start of a statement (issue 10, part 4).

Each position is a one-line statement (in a function or at module level) that calls a
function or class defined in another file of the workspace, reached through an import
(``name(`` imported by name, or ``module.name(`` through an imported module; re-exports
followed). The line is blanked (only its indentation is left) in the text the engine
sees and in the index (opened as a buffer, as ``didOpen`` does), and the cursor is at
the indentation: nothing of the call is typed yet. Two other files of the same
directory are open (``--open``), as in bench_context.py's sampled positions. Reported
per workspace and in total:

1. how often the called definition (its signature) is in the layered prompt at the
   default budget (target >= 85 %), and in the baseline's prompt;
2. mean prompt tokens of both, the related layer's tokens and items;
3. that the blanked line never appears in either prompt as a line (the run fails
   otherwise; a signature like ``def f(x):`` may contain the call ``f(x)``);
4. the hit rate by how the rest of the file uses the called name: elsewhere in the
   enclosing function, only elsewhere in the file, or nowhere else (its only use was
   the blanked line), and by call form.

Positions are lines whose stripped text occurs once in the workspace (so the blanked
line cannot legitimately come back from another place), sampled with a fixed seed.

Run: .venv/bin/python benchmarks/bench_anticipate.py [--roots DIR ...]
     [--positions 120] [--per-file 3] [--seed 7] [--model GGUF] [--budget 1024]
     [--json FILE]
The code measured is whichever ``lsp_assist`` is first on the path: set PYTHONPATH to
another checkout to measure that one (the script prints which it imported).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import sys
import sysconfig
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))  # after PYTHONPATH: a checkout named there is the one measured

import lsp_assist  # noqa: E402,I001  (first, so bench_context's sys.path entry cannot shadow it)
from bench_common import pct  # noqa: E402
from bench_context import EXCLUDE, load_vocabulary, scanned_index  # noqa: E402

from lsp_assist.config import ContextSettings  # noqa: E402
from lsp_assist.context.engine import ContextEngine  # noqa: E402
from lsp_assist.context.model import Cursor  # noqa: E402
from lsp_assist.context.syntax import get_parser  # noqa: E402
from lsp_assist.evaluation.tasks import definition_in  # noqa: E402
from lsp_assist.index.model import Symbol  # noqa: E402

STATEMENTS = frozenset(
    {"expression_statement", "return_statement", "raise_statement", "assert_statement"}
)
CALLABLE = ("function", "class")


@dataclass(frozen=True, slots=True)
class Position:
    """One probe: a blanked call line and the definition it calls."""

    path: Path
    line: int
    indent: int
    name: str
    form: str
    """``name`` (imported by name) or ``module.name`` (through an imported module)."""
    symbol: Symbol
    usage: str
    """function, file or none: where else the file uses the called name."""
    text: str
    """The stripped call line (what must not reach the prompt)."""


def reachable(index: Any, path: Path) -> tuple[dict[str, Symbol], dict[str, Path]]:
    """Return the callables ``path`` imports by name and its imported modules by alias."""
    entry = index.file(path)
    names: dict[str, Symbol] = {}
    modules: dict[str, Path] = {}
    if entry is None:
        return names, modules
    for imp in entry.imports:
        target = index.resolve_import(path, imp)
        if target is None or target == path:
            continue
        if not imp.names:  # import a.b.c: reached as a.b.c.name
            modules[imp.module.rsplit(".", 1)[-1]] = target
            continue
        for name in imp.names:
            sym = definition_in(index, target, name, kinds=CALLABLE)
            if sym is not None and sym.path != path:
                names[name] = sym
            elif target.stem == name:  # from pkg import module
                modules[name] = target
    return names, modules


def statement_at(root: Any, line: int, indent: int) -> Any | None:
    """Return the one-line simple statement starting at (line, indent), or None."""
    node = root.named_descendant_for_point_range((line, indent), (line, indent))
    while (
        node is not None
        and node.parent is not None
        and node.parent.start_point == (line, indent)
        and node.parent.type not in ("block", "module")
    ):
        node = node.parent
    if node is None or node.parent is None or node.parent.type not in ("block", "module"):
        return None
    if node.start_point != (line, indent) or node.end_point[0] != line:
        return None
    return node if node.type in STATEMENTS and not node.has_error else None


def enclosing_function(node: Any) -> tuple[int, int] | None:
    """Return the line span of the innermost function around ``node``."""
    while node is not None:
        if node.type == "function_definition":
            return node.start_point[0], node.end_point[0]
        node = node.parent
    return None


def usage_of(
    lines: list[str], line: int, pattern: re.Pattern[str], span: tuple[int, int] | None
) -> str:
    """Return where else (function, file, none) the file uses what ``pattern`` matches."""
    where = "none"
    for i, text in enumerate(lines):
        stripped = text.lstrip()
        if i == line or stripped.startswith(("import ", "from ")) or not pattern.search(text):
            continue
        if span is not None and span[0] <= i <= span[1]:
            return "function"
        where = "file"
    return where


def positions_of(index: Any, path: Path, text: str, unique: Counter[str]) -> list[Position]:
    """Return every eligible probe position of one file."""
    names, modules = reachable(index, path)
    # (the reference as a regular expression, the name, the form, the definition)
    calls: list[tuple[str, str, str, Symbol]] = []
    for name, sym in names.items():
        calls.append((r"(?<![\w.])" + re.escape(name), name, "name", sym))
    for alias, target in modules.items():
        for sym in index.symbols_of(target):
            if sym.parent is None and sym.kind in CALLABLE and sym.path != path:
                ref = r"(?<![\w.])" + re.escape(alias) + r"\." + re.escape(sym.name)
                calls.append((ref, sym.name, "module.name", sym))
    if not calls:
        return []
    any_call = re.compile("|".join(sorted({re.escape(c[1]) for c in calls})) + r"\s*\(")
    parser = get_parser("python")
    root = parser.parse(text.encode("utf-8")).root_node
    lines = text.split("\n")
    found: list[Position] = []
    for i, raw in enumerate(lines):
        stripped = raw.strip()
        if not stripped or unique[stripped] != 1 or not any_call.search(stripped):
            continue
        matches = [(m.start(), c) for c in calls if (m := re.search(c[0] + r"\s*\(", raw))]
        if not matches:
            continue
        indent = len(raw) - len(raw.lstrip())
        node = statement_at(root, i, indent)
        if node is None:
            continue
        _, (ref, name, form, sym) = min(matches, key=lambda pair: pair[0])
        usage = usage_of(lines, i, re.compile(ref + r"\b"), enclosing_function(node))
        found.append(Position(path, i, indent, name, form, sym, usage, stripped))
    return found


def sample_positions(
    index: Any,
    files: list[Path],
    texts: dict[Path, str],
    rng: random.Random,
    n: int,
    per_file: int,
) -> list[Position]:
    """Return up to ``n`` positions, at most ``per_file`` from each file, files shuffled."""
    unique = Counter(x.strip() for t in texts.values() for x in t.split("\n"))
    order = list(files)
    rng.shuffle(order)
    chosen: list[Position] = []
    for path in order:
        if len(chosen) >= n:
            break
        found = positions_of(index, path, texts[path], unique)
        chosen += rng.sample(found, min(per_file, len(found), n - len(chosen)))
    return chosen


def needles(index: Any, sym: Symbol) -> list[str]:
    """Return texts that show the definition is in a prompt: its signature or first line."""
    out = [sym.signature.strip()[:60]]
    text = index.text_of(sym.path) or ""
    lines = text.split("\n")
    if sym.start_line < len(lines) and sym.name in lines[sym.start_line]:
        out.append(lines[sym.start_line].strip())
    return [n for n in out if n]


def workspaces(args: argparse.Namespace) -> list[tuple[Path, list[str]]]:
    """Return the probed workspaces: (root, exclude globs).

    An installed package is indexed from site-packages with everything but the package
    excluded, so its absolute imports (``from mypy.nodes import ...``) resolve as they
    do in a checkout of its repository.
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    out: list[tuple[Path, list[str]]] = []
    for spec in args.roots or [str(stdlib), "mypy", "hypothesis"]:
        if "/" in spec:
            out.append((Path(spec).resolve(), list(EXCLUDE)))
        else:
            keep = ["/*", f"!/{spec}/", f"/{spec}/typeshed/", "test/", "tests/"]
            out.append((site, keep))
    return out


def main() -> int:
    """Run the probe and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--roots", nargs="*", default=[], help="directories, or names of installed packages"
    )
    parser.add_argument("--model", default="")
    parser.add_argument("--positions", type=int, default=120, help="per workspace")
    parser.add_argument("--per-file", type=int, default=3)
    parser.add_argument("--open", type=int, default=2, help="other open files (same directory)")
    parser.add_argument("--budget", type=int, default=ContextSettings().context_budget)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", default="")
    parser.add_argument("--strategies", nargs="+", default=["layered", "baseline"])
    args = parser.parse_args()

    load_start = os.getloadavg()[0]
    tokenizer, info, model_path = load_vocabulary(args.model)
    print(f"lsp_assist from {Path(lsp_assist.__file__).parent}; model {Path(model_path).name}")
    settings = ContextSettings(context_budget=args.budget)
    rows: list[dict[str, Any]] = []
    leaks: list[str] = []
    for root, exclude in workspaces(args):
        index, scan_s, _ = scanned_index(root, exclude)
        name = root.name if exclude == EXCLUDE else exclude[1].strip("!/")
        files = sorted(p for p in index.files() if p.suffix == ".py")
        texts = {p: index.text_of(p) or "" for p in files}
        rng = random.Random(args.seed)
        chosen = sample_positions(index, files, texts, rng, args.positions, args.per_file)
        print(f"{name} ({root}): {len(files)} files in {scan_s:.1f} s, {len(chosen)} positions")
        engine = ContextEngine(index, tokenizer, info, settings, relative=index.relative)
        open_rng = random.Random(args.seed)
        for pos in chosen:
            lines = texts[pos.path].split("\n")
            lines[pos.line] = lines[pos.line][: pos.indent]
            blanked = "\n".join(lines)
            index.open_buffer(pos.path, blanked)
            # other open tabs, as in bench_context: files of the same directory
            siblings = [p for p in files if p.parent == pos.path.parent and p != pos.path]
            open_files = tuple(open_rng.sample(siblings, min(args.open, len(siblings))))
            for other in reversed(open_files):
                engine.note_opened(other)
            cursor = Cursor(
                path=pos.path,
                language="python",
                text=blanked,
                line=pos.line,
                column=pos.indent,
                open_files=open_files,
            )
            row: dict[str, Any] = {
                "root": name,
                "path": index.relative(pos.path),
                "line": pos.line + 1,
                "name": pos.name,
                "form": pos.form,
                "usage": pos.usage,
                "definition": index.relative(pos.symbol.path),
            }
            wanted = needles(index, pos.symbol)
            for strategy in args.strategies:
                prompt = engine.build(cursor, strategy=strategy)
                row[f"{strategy}_hit"] = any(n in prompt.prompt for n in wanted)
                row[f"{strategy}_tokens"] = prompt.total_tokens
                if strategy == "layered":
                    related = next(x for x in prompt.layers if x.name == "related")
                    row["related_tokens"] = related.tokens
                    row["related_items"] = len(related.items)
                    row["build_ms"] = prompt.build_ms
                if any(x.strip() == pos.text for x in prompt.prompt.split("\n")):
                    leaks.append(f"{strategy} {row['path']}:{row['line']} {pos.text!r}")
            rows.append(row)
            index.open_buffer(pos.path, texts[pos.path])

    def summary(subset: list[dict[str, Any]]) -> dict[str, Any]:
        n = max(1, len(subset))
        return {
            "positions": len(subset),
            "layered_hit": round(sum(r["layered_hit"] for r in subset) / n, 3),
            "baseline_hit": round(sum(r.get("baseline_hit", 0) for r in subset) / n, 3),
            "layered_tokens_mean": round(
                statistics.mean([r["layered_tokens"] for r in subset] or [0]), 1
            ),
            "baseline_tokens_mean": round(
                statistics.mean([r.get("baseline_tokens", 0) for r in subset] or [0]), 1
            ),
            "related_tokens_mean": round(
                statistics.mean([r["related_tokens"] for r in subset] or [0]), 1
            ),
            "related_items_mean": round(
                statistics.mean([r["related_items"] for r in subset] or [0]), 2
            ),
            "build_ms_p50": round(pct([r["build_ms"] for r in subset], 50), 2),
            "build_ms_p99": round(pct([r["build_ms"] for r in subset], 99), 2),
        }

    groups: dict[str, list[dict[str, Any]]] = {"all": rows}
    for key in ("root", "usage", "form"):
        for value in sorted({r[key] for r in rows}):
            groups[f"{key}={value}"] = [r for r in rows if r[key] == value]
    result = {name: summary(subset) for name, subset in groups.items()}
    print()
    print(
        f"{'':26}{'n':>5}{'layered':>9}{'baseline':>9}{'tok L':>7}{'tok B':>7}"
        f"{'related':>8}{'items':>6}"
    )
    for name, s in result.items():
        print(
            f"{name:26}{s['positions']:5d}{s['layered_hit']:9.1%}{s['baseline_hit']:9.1%}"
            f"{s['layered_tokens_mean']:7.0f}{s['baseline_tokens_mean']:7.0f}"
            f"{s['related_tokens_mean']:8.0f}{s['related_items_mean']:6.1f}"
        )
    overall = result["all"]
    print(
        f"\nlayered build ms P50 {overall['build_ms_p50']:.1f}, P99 {overall['build_ms_p99']:.1f}; "
        f"blanked line in a prompt: {len(leaks)} times (must be 0); budget {args.budget}; "
        f"load average {load_start:.1f} -> {os.getloadavg()[0]:.1f}"
    )
    if args.json:
        Path(args.json).write_text(
            json.dumps({"summary": result, "leaks": leaks, "positions": rows}, indent=2) + "\n"
        )
    for leak in leaks:
        print("LEAK", leak)
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
