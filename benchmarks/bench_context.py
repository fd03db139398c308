"""Benchmark the context engine on the installed standard library (issue 6).

Side by side, layered against baseline, with the model's own tokenizer
(vocabulary-only load of the embedded Gemma-3-270M unless --model is given):

1. prompt tokens over sampled cursor positions: mean and P90 (target layered <= 1/4);
2. build time of the layered prompt: first build in a file (after didOpen, when the
   index holds the buffer's tree), and per keystroke (target P50 <= 15 ms, P99 <= 50 ms);
3. replayed typing sessions: the share of prompt tokens identical to the previous
   keystroke's prompt (longest common token prefix / prompt length; target >= 90%);
4. context quality without a model: at lines that call a function imported from
   another module, is the called definition's signature in the prompt, at what cost.

Run: .venv/bin/python benchmarks/bench_context.py [--samples 200] [--sessions 20]
     [--model GGUF] [--root DIR] [--budget 1024] [--json FILE]
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import pct  # noqa: E402

from lsp_assist.config import ContextSettings, IndexSettings  # noqa: E402
from lsp_assist.context import PromptMemory  # noqa: E402
from lsp_assist.context.engine import ContextEngine  # noqa: E402
from lsp_assist.context.model import AssembledPrompt, Cursor  # noqa: E402
from lsp_assist.context.tokens import CachedCounter  # noqa: E402

EXCLUDE = ["test/**", "tests/**", "idlelib/**", "lib2to3/**", "turtledemo/**", "ensurepip/**"]


def common_prefix(a: list[int], b: list[int]) -> int:
    """Return the length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def body_lines(text: str) -> list[int]:
    """Return indexes of indented, non-blank, non-comment lines (inside a def or class)."""
    out = []
    for i, line in enumerate(text.split("\n")):
        stripped = line.strip()
        code = stripped and not stripped.startswith(("#", '"', "'"))
        if line.startswith("    ") and code and len(stripped) >= 8:
            out.append(i)
    return out


def load_vocabulary(model: str) -> tuple[Any, Any, str]:
    """Return the vocabulary-only tokenizer of ``model`` (default the embedded model),
    its ModelInfo and its path."""
    from lsp_assist.backends.models import embedded_model_path

    try:
        from lsp_assist.backends.vocab import Vocabulary as Reader
    except ImportError:  # older checkouts (measured with PYTHONPATH): the context's reader
        from lsp_assist.context.tokens import VocabTokenizer as Reader  # type: ignore

    model_path = model or str(embedded_model_path())
    tokenizer = Reader(model_path)
    return tokenizer, tokenizer.info(), model_path


def scanned_index(root: Path, exclude: list[str]) -> tuple[Any, float, float]:
    """Return the scanned index of ``root``, the scan's seconds and the reverse-import map's."""
    from lsp_assist.index.workspace import WorkspaceIndex

    t0 = time.perf_counter()
    index = WorkspaceIndex([root], IndexSettings(exclude_globs=exclude, watch=False))
    index.scan()
    scan_s = time.perf_counter() - t0
    # The index builds its reverse-import map lazily on the first importers_of call
    # (once per workspace, not per request): build it before measuring.
    t1 = time.perf_counter()
    index.importers_of(root / "__init__.py")
    return index, scan_s, time.perf_counter() - t1


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--root", default=sysconfig.get_paths()["stdlib"])
    parser.add_argument("--model", default="")
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--budget", type=int, default=ContextSettings().context_budget)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    load_before = os.getloadavg()[0]
    tokenizer, info, model_path = load_vocabulary(args.model)
    root = Path(args.root).resolve()
    index, scan_s, importers_s = scanned_index(root, EXCLUDE)
    files = sorted(p for p in index.files() if p.suffix == ".py")
    print(
        f"model {Path(model_path).name}; root {root}: {len(files)} files indexed in "
        f"{scan_s:.1f} s (+{importers_s:.1f} s reverse-import map)"
    )
    settings = ContextSettings(context_budget=args.budget)
    counter = CachedCounter(tokenizer)

    def new_engine() -> ContextEngine:
        return ContextEngine(index, counter, info, settings, relative=index.relative)

    layered_engine = new_engine()
    baseline_engine = new_engine()
    rng = random.Random(args.seed)
    texts: dict[Path, str] = {}
    candidates = []
    for path in files:
        text = index.text_of(path) or ""
        if text.count("\n") >= 40:
            texts[path] = text
            candidates.append(path)

    # 1-2: sampled positions
    layered_tokens: list[int] = []
    baseline_tokens: list[int] = []
    cold_ms: list[float] = []
    warm_ms: list[float] = []
    baseline_ms: list[float] = []
    ratios: list[float] = []
    layer_sums: dict[str, list[int]] = {}
    for _ in range(args.samples):
        path = rng.choice(candidates)
        text = texts[path]
        lines = text.split("\n")
        line = rng.choice(body_lines(text) or [len(lines) // 2])
        indent = len(lines[line]) - len(lines[line].lstrip())
        col = rng.randint(indent, len(lines[line]))
        siblings = [p for p in candidates if p.parent == path.parent and p != path]
        open_files = tuple(rng.sample(siblings, min(2, len(siblings))))
        for other in reversed(open_files):
            layered_engine.note_opened(other)
        cursor = Cursor(
            path=path, language="python", text=text, line=line, column=col, open_files=open_files
        )
        # as in the server: didOpen hands the buffer to the index, which parses it
        index.open_buffer(path, text)
        # as a completion builds: the session's memory read, the build remembered
        memory = PromptMemory()
        first = layered_engine.build(cursor, memory=memory)
        memory.remember(first.note)
        cold_ms.append(first.build_ms)
        # the next keystroke at the same place: a character typed at the cursor
        typed_line = lines[line][:col] + "x" + lines[line][col:]
        text2 = "\n".join([*lines[:line], typed_line, *lines[line + 1 :]])
        second = layered_engine.build(
            Cursor(
                path=path,
                language="python",
                text=text2,
                line=line,
                column=col + 1,
                open_files=open_files,
            ),
            memory=memory,
        )
        warm_ms.append(second.build_ms)
        base = baseline_engine.build(cursor, strategy="baseline")
        baseline_ms.append(base.build_ms)
        assert first.total_tokens <= first.budget and base.total_tokens <= base.budget
        layered_tokens.append(first.total_tokens)
        baseline_tokens.append(base.total_tokens)
        ratios.append(first.total_tokens / max(1, base.total_tokens))
        # buffers stay open (editor tabs): closing one makes the index rebuild its
        # reverse-import map at the next importers_of (~1 s here), an index cost
        for name, n in first.layer_tokens().items():
            layer_sums.setdefault(name, []).append(n)

    # 3: typing sessions
    shares: dict[str, list[float]] = {"layered": [], "baseline": []}
    session_ms: list[float] = []
    keystrokes = 0
    for _ in range(args.sessions):
        path = rng.choice(candidates)
        text = texts[path]
        lines = text.split("\n")
        line = rng.choice(body_lines(text) or [len(lines) // 2])
        target = lines[line]
        indent = len(target) - len(target.lstrip())
        engines = {"layered": new_engine(), "baseline": new_engine()}
        prev: dict[str, AssembledPrompt | None] = {"layered": None, "baseline": None}
        for k in range(indent, len(target) + 1):
            current = target[:k]
            text_k = "\n".join([*lines[:line], current, *lines[line + 1 :]])
            cursor = Cursor(path=path, language="python", text=text_k, line=line, column=k)
            keystrokes += 1
            for name, engine in engines.items():
                prompt = engine.build(cursor, strategy=name)
                if name == "layered":
                    session_ms.append(prompt.build_ms)
                before = prev[name]
                if before is not None:
                    same = common_prefix(before.tokens, prompt.tokens)
                    shares[name].append(same / max(1, len(prompt.tokens)))
                prev[name] = prompt

    # 4: definition hit rate at calls of imported functions
    hits = {"layered": 0, "baseline": 0}
    hit_tokens: dict[str, list[int]] = {"layered": [], "baseline": []}
    probes = 0
    quality_engine = new_engine()
    order = list(candidates)
    rng.shuffle(order)
    for path in order:
        if probes >= 100:
            break
        entry = index.file(path)
        if entry is None:
            continue
        imported: dict[str, Path] = {}
        for imp in entry.imports:
            target_path = index.resolve_import(path, imp)
            if target_path is None or target_path == path:
                continue
            for name in imp.names:
                defs = [s for s in index.lookup(name) if s.path == target_path]
                if defs and defs[0].kind in ("function", "class"):
                    imported[name] = target_path
        if not imported:
            continue
        lines = texts[path].split("\n")
        for i, text_line in enumerate(lines):
            m = re.search(r"\b(" + "|".join(map(re.escape, sorted(imported))) + r")\(", text_line)
            if not m or text_line.lstrip().startswith(("def ", "class ", "#", "from ", "import ")):
                continue
            name = m.group(1)
            sym = next(s for s in index.lookup(name) if s.path == imported[name])
            cursor = Cursor(path=path, language="python", text=texts[path], line=i, column=m.end())
            probes += 1
            needle = sym.signature.strip().split("\n")[0][:60]
            for strategy in ("layered", "baseline"):
                prompt = quality_engine.build(cursor, strategy=strategy)
                hit_tokens[strategy].append(prompt.total_tokens)
                if needle and needle in prompt.prompt:
                    hits[strategy] += 1
            break

    mean_l, mean_b = statistics.mean(layered_tokens), statistics.mean(baseline_tokens)
    # the times depend on what else runs on the machine: keep the 1-minute load average
    load = (round(load_before, 2), round(os.getloadavg()[0], 2))
    result: dict[str, Any] = {
        "model": Path(model_path).name,
        "root": str(root),
        "files": len(files),
        "samples": args.samples,
        "budget": args.budget,
        "baseline_budget": baseline_engine.baseline.budget(None),
        "layered_tokens_mean": round(mean_l, 1),
        "layered_tokens_p90": pct([float(x) for x in layered_tokens], 90),
        "baseline_tokens_mean": round(mean_b, 1),
        "baseline_tokens_p90": pct([float(x) for x in baseline_tokens], 90),
        "ratio_of_means": round(mean_l / mean_b, 3),
        "ratio_median_per_position": round(statistics.median(ratios), 3),
        "layer_tokens_mean": {k: round(statistics.mean(v), 1) for k, v in layer_sums.items()},
        "build_ms_first_p50": round(pct(cold_ms, 50), 2),
        "build_ms_first_p99": round(pct(cold_ms, 99), 2),
        "build_ms_keystroke_p50": round(pct(warm_ms + session_ms, 50), 2),
        "build_ms_keystroke_p99": round(pct(warm_ms + session_ms, 99), 2),
        "baseline_build_ms_p50": round(pct(baseline_ms, 50), 2),
        "sessions": args.sessions,
        "keystrokes": keystrokes,
        "stable_share_layered": round(statistics.mean(shares["layered"]), 4),
        "stable_share_layered_p10": round(pct(shares["layered"], 10), 4),
        "stable_share_baseline": round(statistics.mean(shares["baseline"]), 4),
        "definition_probes": probes,
        "definition_hit_layered": round(hits["layered"] / max(1, probes), 3),
        "definition_hit_baseline": round(hits["baseline"] / max(1, probes), 3),
        "definition_probe_tokens_layered": round(statistics.mean(hit_tokens["layered"] or [0]), 1),
        "definition_probe_tokens_baseline": round(
            statistics.mean(hit_tokens["baseline"] or [0]), 1
        ),
        "load_average_1min_start_end": list(load),
        "token_cache_hits": counter.hits,
        "token_cache_misses": counter.misses,
    }
    print()
    print(f"{'':34}{'layered':>12}{'baseline':>12}")
    print(f"{'prompt tokens, mean':34}{mean_l:12.0f}{mean_b:12.0f}")
    print(
        f"{'prompt tokens, P90':34}{result['layered_tokens_p90']:12.0f}"
        f"{result['baseline_tokens_p90']:12.0f}"
    )
    print(
        f"{'stable share between keystrokes':34}{result['stable_share_layered']:12.1%}"
        f"{result['stable_share_baseline']:12.1%}"
    )
    print(
        f"{'called definition in prompt':34}{result['definition_hit_layered']:12.1%}"
        f"{result['definition_hit_baseline']:12.1%}"
    )
    print(
        f"{'build ms, P50 (first in file)':34}{result['build_ms_first_p50']:12.2f}"
        f"{result['baseline_build_ms_p50']:12.2f}"
    )
    print()
    print(
        f"layered/baseline tokens (ratio of means): {result['ratio_of_means']:.3f} (target <= 0.25)"
    )
    print(
        f"layered build ms per keystroke: P50 {result['build_ms_keystroke_p50']:.2f}, "
        f"P99 {result['build_ms_keystroke_p99']:.2f} (target <= 15 / <= 50); first build in a "
        f"file: P50 {result['build_ms_first_p50']:.2f}, P99 {result['build_ms_first_p99']:.2f}"
    )
    print(f"layer tokens, mean: {result['layer_tokens_mean']}")
    print(f"{keystrokes} keystrokes in {args.sessions} sessions; {probes} definition probes")
    print(f"load average (1 min) at start / end: {load[0]:.2f} / {load[1]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
