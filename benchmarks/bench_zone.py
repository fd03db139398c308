"""Probe the editing zone on real code (issue 10, part 1): does it fill its grant?

At sampled positions of real files (the installed standard library and large
installed packages) the cursor is put at the indentation of a blanked code line (a
new statement, as in the issue's ``asyncio/base_events.py:1389:9`` case) and the
layered prompt is built with the model's own tokenizer (vocabulary-only load of the
embedded Gemma-3-270M unless --model is given). Reported: the distribution of zone
lines and of the zone's share of its grant, and the count of positions where the
zone has fewer than min(20, lines above the cursor) lines above the cursor while it
uses less than half of its grant (target: zero).

Run: .venv/bin/python benchmarks/bench_zone.py [--per-root 120] [--package NAME]...
     [--model GGUF] [--budget 1024] [--seed 11] [--json FILE]
To measure another checkout (e.g. the code before a change), copy this script into
a benchmarks/ folder at its root and run it from there: it imports lsp_assist from the checkout
it sits in.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import re
import statistics
import sys
import sysconfig
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import pct  # noqa: E402

from lsp_assist.backends.vocab import Vocabulary  # noqa: E402
from lsp_assist.config import ContextSettings, IndexSettings  # noqa: E402
from lsp_assist.context.engine import ContextEngine  # noqa: E402
from lsp_assist.context.model import Cursor  # noqa: E402
from lsp_assist.context.tokens import CachedCounter  # noqa: E402

EXCLUDE = ["test/**", "tests/**", "idlelib/**", "lib2to3/**", "turtledemo/**", "ensurepip/**"]
MIN_LINES = 20
_LINES = re.compile(r"lines (\d+)-(\d+)")


def package_root(name: str) -> Path:
    """Return the folder of an installed package."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"package {name!r} is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def code_lines(lines: list[str]) -> list[int]:
    """Return indexes of indented code lines (not blank, not a comment or string)."""
    out = []
    for i, line in enumerate(lines):
        stripped = line.strip()
        if i and line.startswith("    ") and stripped and not stripped.startswith(("#", '"', "'")):
            out.append(i)
    return out


def probe_root(
    root: Path, per_root: int, rng: random.Random, counter: CachedCounter, info: Any, budget: int
) -> list[dict[str, Any]]:
    """Return one record per sampled position under ``root``."""
    from lsp_assist.index.workspace import WorkspaceIndex

    index = WorkspaceIndex([root], IndexSettings(exclude_globs=EXCLUDE, watch=False))
    index.scan()
    settings = ContextSettings(context_budget=budget)
    engine = ContextEngine(index, counter, info, settings, relative=index.relative)
    files = sorted(p for p in index.files() if p.suffix == ".py")
    texts = {p: index.text_of(p) or "" for p in files}
    files = [p for p in files if texts[p].count("\n") >= 40 and code_lines(texts[p].split("\n"))]
    out = []
    for path in rng.sample(files, min(per_root, len(files))):
        lines = texts[path].split("\n")
        line = rng.choice(code_lines(lines))
        indent = len(lines[line]) - len(lines[line].lstrip())
        blanked = list(lines)
        blanked[line] = lines[line][:indent]
        cursor = Cursor(
            path=path, language="python", text="\n".join(blanked), line=line, column=indent
        )
        prompt = engine.build(cursor)
        zone = {layer.name: layer for layer in prompt.layers}["editing_zone"]
        found = _LINES.search(zone.items[0].reason) if zone.items else None
        start = int(found.group(1)) - 1 if found else line
        above = line - start
        share = zone.tokens / zone.budget if zone.budget else 1.0
        out.append(
            {
                "file": index.relative(path),
                "root": root.name,
                "line": line + 1,
                "column": indent + 1,
                "zone_lines": zone.text.count("\n") + 1,
                "lines_above": above,
                "available_above": line,
                "tokens": zone.tokens,
                "grant": zone.budget,
                "share": share,
                "starved": above < min(MIN_LINES, line) and share < 0.5,
            }
        )
    return out


def describe(values: list[float]) -> str:
    """Return min / P10 / P50 / P90 / max of ``values``."""
    return (
        f"{min(values):.2f} / {pct(values, 10):.2f} / {pct(values, 50):.2f} / "
        f"{pct(values, 90):.2f} / {max(values):.2f}"
    )


def main() -> int:
    """Run the probe and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--per-root", type=int, default=120)
    parser.add_argument("--package", action="append", default=[])
    parser.add_argument("--model", default="")
    parser.add_argument("--budget", type=int, default=ContextSettings().context_budget)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    from lsp_assist.backends.models import embedded_model_path

    tokenizer = Vocabulary(args.model or str(embedded_model_path()))
    counter = CachedCounter(tokenizer)
    roots = [Path(sysconfig.get_paths()["stdlib"])]
    roots += [package_root(name) for name in (args.package or ["hypothesis", "mypy"])]
    rng = random.Random(args.seed)
    records: list[dict[str, Any]] = []
    for root in roots:
        records += probe_root(root, args.per_root, rng, counter, tokenizer.info(), args.budget)
    print(f"lsp_assist from {ROOT}; {len(records)} positions; budget {args.budget}")
    print(f"{'root':<14}{'positions':>10}{'zone lines P50':>16}{'share P50':>11}{'starved':>9}")
    for root in roots:
        rs = [r for r in records if r["root"] == root.name]
        print(
            f"{root.name:<14}{len(rs):>10}"
            f"{statistics.median(r['zone_lines'] for r in rs):>16.0f}"
            f"{statistics.median(r['share'] for r in rs):>11.2f}"
            f"{sum(r['starved'] for r in rs):>9}"
        )
    lines = [float(r["zone_lines"]) for r in records]
    shares = [float(r["share"]) for r in records]
    print(f"zone lines      min / P10 / P50 / P90 / max: {describe(lines)}")
    print(f"share of grant  min / P10 / P50 / P90 / max: {describe(shares)}")
    buckets = [(1, 2), (3, 9), (10, 19), (20, 39), (40, 59), (60, 10**6)]
    print(
        "zone lines histogram: "
        + ", ".join(
            f"{a}-{b if b < 10**6 else ''}: {sum(a <= x <= b for x in lines)}" for a, b in buckets
        )
    )
    share_buckets = [(0.0, 0.25), (0.25, 0.5), (0.5, 0.75), (0.75, 0.9), (0.9, 1.01)]
    print(
        "share histogram: "
        + ", ".join(
            f"{a:.2f}-{min(b, 1.0):.2f}: {sum(a <= x < b for x in shares)}"
            for a, b in share_buckets
        )
    )
    starved = [r for r in records if r["starved"]]
    print(
        f"starved positions (< min({MIN_LINES}, lines above) lines, < 50% of grant): "
        f"{len(starved)} (target 0)"
    )
    for r in starved[:10]:
        print(
            f"  {r['root']}/{r['file']}:{r['line']}:{r['column']} {r['zone_lines']} lines, "
            f"{r['tokens']}/{r['grant']} tokens"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
