"""Adaptive budget probe: the budget chosen on this machine, and cold prompts under it.

For each model, two engines over the same workspace (a copy of the stdlib's asyncio
package): one with the adaptive budget (no ``contextBudget``: it calibrates at load
and chooses), one with the old default given explicitly (``contextBudget`` 1024). Both
run with ``kvReuse`` off, so every request evaluates its whole prompt: a cold prompt at
a new position, the case ``coldPromptMs`` bounds. Positions (the start of a code line,
as when the user has just moved there) are spread over one stdlib file and alternate
between the two engines so that load from other processes falls on both alike.

    .venv/bin/python benchmarks/bench_budget.py --positions 20

Prints, per model and budget: the budget and its reason, prompt tokens, and the
prompt-evaluation time (prefill_ms) and time to first token at P50/P90.
"""

from __future__ import annotations

import argparse
import asyncio  # only for its source file
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import pct

from lsp_assist.backends.models import embedded_model_path, small_model_path
from lsp_assist.config import parse_settings
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.session import Session
from lsp_assist.serving.status import status_json


def positions(text: str, count: int) -> list[tuple[int, int]]:
    """Return ``count`` (line, indentation column) of code lines spread over ``text``."""
    lines = text.split("\n")
    code = [
        i
        for i, line in enumerate(lines)
        if line.strip() and not line.lstrip().startswith(("#", '"', "'", "@")) and i > 40
    ]
    step = max(1, len(code) // count)
    chosen = code[::step][:count]
    return [(i, len(lines[i]) - len(lines[i].lstrip())) for i in chosen]


def engine_for(model: Path, workspace: Path, cache: Path, budget: int | None) -> CompletionEngine:
    """Return an engine over ``workspace`` with the adaptive budget (None) or ``budget``."""
    raw: dict[str, Any] = {
        "modelPath": str(model),
        "kvReuse": False,
        "maxTokens": 1,
        "metrics": False,
        "persist": False,
        "watch": False,
        "cacheDir": str(cache),
        "promptTimeoutMs": 600000,
        "generationTimeoutMs": 600000,
    }
    if budget is not None:
        raw["contextBudget"] = budget
    settings, warnings = parse_settings(raw)
    assert not warnings, warnings
    engine = CompletionEngine(Session(settings, workspace=workspace))
    assert engine.session.index is not None
    engine.session.index.scan()
    if engine.session.load_backend() is None:
        raise SystemExit(engine.session.model_error)
    return engine


def probe(model: Path, workspace: Path, target: Path, count: int) -> dict[str, Any]:
    """Run the adaptive and the 1024 engine over ``count`` positions of ``target``."""
    text = target.read_text()
    cache = workspace.parent / "cache"
    engines = {
        "adaptive": engine_for(model, workspace, cache, None),
        "1024": engine_for(model, workspace, cache, 1024),
    }
    uri = target.as_uri()
    for engine in engines.values():
        engine.session.buffers.open(uri, text, version=1, language_id="python")
    times: dict[str, dict[str, list[float]]] = {
        name: {"prefill": [], "ttft": [], "tokens": []} for name in engines
    }
    reasons: dict[str, str] = {}
    for k, (line, column) in enumerate(positions(text, count)):
        order = list(engines.items())
        if k % 2:
            order.reverse()
        for name, engine in order:
            doc = engine.session.buffers.snapshot(uri)
            assert doc is not None
            outcome = engine.complete(CompletionQuery(snapshot=doc, line=line, column=column))
            assert not outcome.error, outcome.error
            times[name]["prefill"].append(outcome.prefill_ms)
            times[name]["ttft"].append(outcome.ttft_ms)
            times[name]["tokens"].append(outcome.prompt_tokens)
    for name, engine in engines.items():
        reasons[name] = status_json(engine)["budget"]["reason"]
        engine.session.close()
    return {"times": times, "reasons": reasons}


def main() -> int:
    """Run the probe for both packaged models and print the figures side by side."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--positions", type=int, default=20)
    parser.add_argument("--file", default="base_events.py", help="a file of asyncio/")
    parser.add_argument("--models", default="gemma,smollm2")
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures here")
    args = parser.parse_args()
    source = Path(asyncio.__file__).parent
    models = {"gemma": embedded_model_path, "smollm2": small_model_path}
    results: dict[str, Any] = {}
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "asyncio"
        shutil.copytree(source, workspace, ignore=shutil.ignore_patterns("__pycache__"))
        for name in args.models.split(","):
            result = probe(models[name](), workspace, workspace / args.file, args.positions)
            results[name] = result
            print(f"\n{name} ({args.positions} positions of asyncio/{args.file}, cold)")
            for budget, reason in result["reasons"].items():
                t = result["times"][budget]
                print(f"  {budget:>8}: {reason}")
                print(
                    f"            prompt tokens P50 {pct(t['tokens'], 50):.0f}; "
                    f"prefill P50 {pct(t['prefill'], 50):.0f} ms, P90 {pct(t['prefill'], 90):.0f}"
                    f" ms; TTFT P50 {pct(t['ttft'], 50):.0f} ms, P90 {pct(t['ttft'], 90):.0f} ms"
                )
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
