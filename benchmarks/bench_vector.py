"""Vector retrieval (issue 15): recall against the lexical similar-code search, and its cost.

For each workspace (default: three real packages) the script scans the index, embeds
every definition chunk with the packaged all-MiniLM-L6-v2 through llama.cpp (timed:
chunks/s, ms per chunk, the model's and the matrix's memory), then runs two probes:

1. **definitions** (bench_anticipate.py's positions): a one-line call of a function
   defined in another file is blanked, the cursor at its indentation; a hit is the
   called definition's first line inside what was retrieved.
2. **similar code**: the cursor on the second body line of a function whose name is
   also defined in another file of the workspace (an override, a sibling
   implementation), the rest of the function removed; a hit is one of those other
   definitions retrieved.

Arms, all filling the same token budget (``--budget-tokens``, counted with the prompt
model's tokenizer) with whole chunks, best first, from every file but the current one:
``lexical`` (the similar layer's Jaccard windows, its threshold, over all files),
``vector`` (cosine over definition chunks, ``--threshold``), ``hybrid`` (the two fused by
reciprocal rank, as the similar layer merges them). With ``--engine`` the definitions
probe also runs through the context engine at its default budget with ``layerVector``
off and on (the query waited for, so quality is measured apart from timing): the hit
rate, and the positions only one of the two finds.

Cost: the query's embedding (ms P50/P99, one thread), the search over the matrix, and
the stdlib's chunk count with the measured ms per chunk (what a full embedding would
take) and its matrix size.

Run: .venv/bin/python benchmarks/bench_vector.py [--roots DIR|PACKAGE ...]
     [--positions 60] [--budget-tokens 256] [--threshold 0.5] [--threads 1]
     [--engine] [--cache DIR] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import sysconfig
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

import lsp_assist  # noqa: E402,I001
from bench_anticipate import needles, sample_positions, workspaces  # noqa: E402
from bench_common import pct  # noqa: E402
from bench_context import EXCLUDE, load_vocabulary, scanned_index  # noqa: E402

from lsp_assist.backends.embedding import Embedder, minilm_gguf_path  # noqa: E402
from lsp_assist.config import ContextSettings  # noqa: E402
from lsp_assist.context.similar import SimilarCode, SimilarHit  # noqa: E402
from lsp_assist.context.vector_layer import VectorLayer, merge, query_text  # noqa: E402
from lsp_assist.index.model import Symbol  # noqa: E402
from lsp_assist.index.vectors import VectorIndex, chunk_file  # noqa: E402

LEXICAL_LINES = 40
"""The lexical arm's query: the lines before the cursor, about what the zone holds."""
CANDIDATES = 10
SWEEP = (0.3, 0.4, 0.5, 0.6, 0.7)
"""Vector thresholds whose recall is reported too."""


def rss_mb() -> float:
    """Return this process's current resident memory in MB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def fill(hits: list[SimilarHit], budget: int, count: Any) -> tuple[list[SimilarHit], int]:
    """Return the hits that fit ``budget`` tokens whole, best first, and the tokens used."""
    kept, used = [], 0
    for hit in hits:
        cost = count(hit.chunk.text)
        if used + cost <= budget:
            kept.append(hit)
            used += cost
    return kept, used


def covers(hits: list[SimilarHit], path: Path, line: int) -> bool:
    """True when a kept chunk of ``path`` holds ``line``."""
    return any(
        h.chunk.path == path and h.chunk.start_line <= line <= h.chunk.end_line for h in hits
    )


def twin_positions(
    index: Any, files: list[Path], texts: dict[Path, str], rng: random.Random, n: int
) -> list[tuple[Path, Symbol, list[Symbol]]]:
    """Functions whose name another file also defines (>= 4 lines, not dunders)."""
    by_name: dict[str, list[Symbol]] = defaultdict(list)
    for path in files:
        for sym in index.symbols_of(path):
            long_enough = sym.end_line - sym.start_line >= 3
            if sym.kind in ("function", "method") and not sym.name.startswith("__") and long_enough:
                by_name[sym.name].append(sym)
    out = []
    for syms in by_name.values():
        if len({s.path for s in syms}) < 2:
            continue
        for sym in syms:
            others = [s for s in syms if s.path != sym.path]
            out.append((sym.path, sym, others))
    rng.shuffle(out)
    return out[:n]


def main() -> int:
    """Run the probes and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--roots", nargs="*", default=[], help="directories, or names of installed packages"
    )
    parser.add_argument("--model", default="", help="the prompt model (its tokenizer)")
    parser.add_argument("--positions", type=int, default=60, help="per workspace and probe")
    parser.add_argument("--per-file", type=int, default=3)
    parser.add_argument("--budget-tokens", type=int, default=256)
    parser.add_argument("--threshold", type=float, default=ContextSettings().vector_threshold)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--engine", action="store_true")
    parser.add_argument(
        "--cache", default="", help="keep the vectors here (a rerun embeds nothing; cost 0)"
    )
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    sweep = tuple(sorted({*SWEEP, args.threshold}))
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve()
    if not args.roots:
        args.roots = [str(stdlib / "asyncio"), str(stdlib / "email"), "httpx"]

    load_start = os.getloadavg()[0]
    tokenizer, info, model_path = load_vocabulary(args.model)
    print(
        f"lsp_assist from {Path(lsp_assist.__file__).parent}; "
        f"prompt tokens: {Path(model_path).name}"
    )

    def count(text: str) -> int:
        return len(tokenizer.tokenize(text))

    rss0 = rss_mb()
    t0 = time.perf_counter()
    embedder = Embedder(minilm_gguf_path(), threads=args.threads)
    model_s = time.perf_counter() - t0
    model_mb = rss_mb() - rss0
    print(
        f"embedding model: {embedder.path.name}, dim {embedder.dim}, "
        f"loaded in {model_s:.2f} s, +{model_mb:.0f} MB RSS"
    )

    ns = argparse.Namespace(roots=args.roots)
    rows: list[dict[str, Any]] = []
    costs: dict[str, Any] = {"workspaces": []}
    query_ms: list[float] = []
    search_ms: list[float] = []
    for root, exclude in workspaces(ns):
        index, scan_s, _ = scanned_index(root, exclude)
        name = root.name if exclude == EXCLUDE else exclude[1].strip("!/")
        files = sorted(p for p in index.files() if p.suffix == ".py")
        texts = {p: index.text_of(p) or "" for p in files}
        before = rss_mb()
        cache = Path(args.cache) / name if args.cache else None
        vectors = VectorIndex(index, lambda: embedder, model_id="minilm", cache_dir=cache)
        t1 = time.perf_counter()
        stats = vectors.sync()
        embed_s = time.perf_counter() - t1
        ws_cost = {
            "workspace": name,
            "files": len(files),
            "chunks": stats.chunks,
            "embed_s": round(embed_s, 1),
            "chunks_per_s": round(stats.chunks / max(embed_s, 1e-9), 1),
            "ms_per_chunk": round(1000 * stats.embed_seconds / max(1, stats.embedded), 2),
            "matrix_mb": round(stats.matrix_bytes / 1e6, 2),
            "rss_growth_mb": round(rss_mb() - before, 1),
        }
        costs["workspaces"].append(ws_cost)
        print(
            f"{name}: {len(files)} files scanned in {scan_s:.1f} s; {stats.chunks} chunks embedded "
            f"in {embed_s:.1f} s ({ws_cost['chunks_per_s']} chunks/s, "
            f"{ws_cost['ms_per_chunk']} ms/chunk)"
        )
        similar = SimilarCode()
        rng = random.Random(args.seed)
        defs = sample_positions(index, files, texts, rng, args.positions, args.per_file)
        twins = twin_positions(index, files, texts, rng, args.positions)

        probes: list[tuple[str, Path, list[str], int, int, list[tuple[Path, int]], Any]] = []
        for pos in defs:
            lines = texts[pos.path].split("\n")
            lines[pos.line] = lines[pos.line][: pos.indent]
            targets = [(pos.symbol.path, pos.symbol.start_line)]
            probes.append(("definitions", pos.path, lines, pos.line, pos.indent, targets, pos))
        for path, sym, others in twins:
            lines = texts[path].split("\n")
            cut = sym.start_line + 2
            body = lines[cut]
            indent = len(body) - len(body.lstrip())
            kept_lines = [*lines[:cut], body[:indent], *lines[sym.end_line + 1 :]]
            targets = [(o.path, o.start_line) for o in others]
            probes.append(("similar", path, kept_lines, cut, indent, targets, sym))

        layer = VectorLayer(vectors, text_of=index.text_of, relative=index.relative)
        for probe, path, lines, line, col, targets, _ in probes:
            lex_query = (
                "\n".join(lines[max(0, line - LEXICAL_LINES) : line]) + "\n" + lines[line][:col]
            )
            others = [(p, texts[p]) for p in files if p != path]
            lexical = similar.search(
                lex_query,
                others,
                threshold=ContextSettings().similar_threshold,
                relative=index.relative,
                exclude=lambda p, a, b: False,
                limit=CANDIDATES,
            )
            q = query_text(lines, line, col)
            layer.prefetch(path, q)
            t2 = time.perf_counter()
            every = layer.search(
                path,
                threshold=min(sweep),
                wait_ms=10_000,
                exclude=lambda p, a, b: False,
                limit=CANDIDATES,
            )
            # the wait for the query's embedding on the layer's thread, plus the search
            query_ms.append((time.perf_counter() - t2) * 1000)
            t3 = time.perf_counter()
            layer.search(path, threshold=min(sweep), wait_ms=0, exclude=lambda p, a, b: False)
            search_ms.append((time.perf_counter() - t3) * 1000)
            row: dict[str, Any] = {
                "workspace": name,
                "probe": probe,
                "path": index.relative(path),
                "line": line + 1,
            }
            for t in sweep:
                vec = [h for h in every if h.score >= t]
                arms = [("vector", vec), ("hybrid", merge(lexical, vec))]
                if t == sweep[0]:
                    arms.append(("lexical", lexical))
                for arm, hits in arms:
                    kept, used = fill(hits, args.budget_tokens, count)
                    hit = any(covers(kept, p, ln) for p, ln in targets)
                    row[f"{arm}@{t}_hit" if arm != "lexical" else "lexical_hit"] = hit
                    if t == args.threshold or arm == "lexical":
                        row[f"{arm}_hit"] = hit
                        row[f"{arm}_tokens"] = used
            rows.append(row)

        if args.engine and defs:
            from lsp_assist.context.engine import ContextEngine
            from lsp_assist.context.model import Cursor

            for on in (False, True):
                settings = ContextSettings(
                    layer_vector=on, vector_wait_ms=5000, vector_threshold=args.threshold
                )
                engine = ContextEngine(index, tokenizer, info, settings, relative=index.relative)
                engine.vectors = layer
                for pos, row in zip(
                    defs,
                    [r for r in rows if r["workspace"] == name and r["probe"] == "definitions"],
                    strict=True,
                ):
                    lines = texts[pos.path].split("\n")
                    lines[pos.line] = lines[pos.line][: pos.indent]
                    blanked = "\n".join(lines)
                    index.open_buffer(pos.path, blanked)
                    cursor = Cursor(
                        path=pos.path,
                        language="python",
                        text=blanked,
                        line=pos.line,
                        column=pos.indent,
                    )
                    prompt = engine.build(cursor)
                    key = "engine_on" if on else "engine_off"
                    row[f"{key}_hit"] = any(n in prompt.prompt for n in needles(index, pos.symbol))
                    row[f"{key}_tokens"] = prompt.total_tokens
                    index.open_buffer(pos.path, texts[pos.path])
        layer.stop()

    # the standard library's size, for the cost of a full embedding
    std_index, _, _ = scanned_index(stdlib, EXCLUDE)
    std_chunks = 0
    for path in std_index.files():
        entry = std_index.file(path)
        text = std_index.text_of(path)
        if entry is not None and text is not None:
            std_chunks += len(chunk_file(std_index.relative(path), entry.symbols, text))
    ms_chunk = statistics.mean(w["ms_per_chunk"] for w in costs["workspaces"])
    costs.update(
        {
            "model_load_s": round(model_s, 2),
            "model_rss_mb": round(model_mb, 1),
            "query_ms_p50": round(pct(query_ms, 50), 2),
            "query_ms_p99": round(pct(query_ms, 99), 2),
            "search_ms_p50": round(pct(search_ms, 50), 3),
            "search_ms_p99": round(pct(search_ms, 99), 3),
            "stdlib_files": len(std_index.files()),
            "stdlib_chunks": std_chunks,
            "stdlib_embed_minutes_at_measured_rate": round(std_chunks * ms_chunk / 60000, 1),
            "stdlib_matrix_mb": round(std_chunks * embedder.dim * 4 / 1e6, 1),
            "threads": args.threads,
            "load_average_start_end": [round(load_start, 2), round(os.getloadavg()[0], 2)],
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3, 1),
        }
    )

    def summary(subset: list[dict[str, Any]]) -> dict[str, Any]:
        n = max(1, len(subset))
        out: dict[str, Any] = {"positions": len(subset)}
        for arm in ("lexical", "vector", "hybrid", "engine_off", "engine_on"):
            if subset and f"{arm}_hit" in subset[0]:
                out[f"{arm}_recall"] = round(sum(r[f"{arm}_hit"] for r in subset) / n, 3)
                out[f"{arm}_tokens"] = round(statistics.mean(r[f"{arm}_tokens"] for r in subset), 1)
        if subset and "engine_on_hit" in subset[0]:
            out["engine_only_on"] = sum(
                r["engine_on_hit"] and not r["engine_off_hit"] for r in subset
            )
            out["engine_only_off"] = sum(
                r["engine_off_hit"] and not r["engine_on_hit"] for r in subset
            )
        out["vector_only"] = sum(r["vector_hit"] and not r["lexical_hit"] for r in subset)
        out["lexical_only"] = sum(r["lexical_hit"] and not r["vector_hit"] for r in subset)
        return out

    groups: dict[str, list[dict[str, Any]]] = {}
    for probe in ("definitions", "similar"):
        groups[probe] = [r for r in rows if r["probe"] == probe]
        for ws in sorted({r["workspace"] for r in rows}):
            groups[f"{probe} {ws}"] = [r for r in groups[probe] if r["workspace"] == ws]
    result = {k: summary(v) for k, v in groups.items()}
    print(f"\nrecall at {args.budget_tokens} tokens (vector threshold {args.threshold}):")
    print(
        f"{'':28}{'n':>4}{'lexical':>9}{'vector':>8}{'hybrid':>8}{'tok L/V/H':>16}"
        f"{'V only':>7}{'L only':>7}"
    )
    for key, s in result.items():
        if not s["positions"]:
            continue
        print(
            f"{key:28}{s['positions']:4d}{s['lexical_recall']:9.1%}{s['vector_recall']:8.1%}"
            f"{s['hybrid_recall']:8.1%}{s['lexical_tokens']:6.0f}/{s['vector_tokens']:.0f}/{s['hybrid_tokens']:.0f}"
            f"{s['vector_only']:7d}{s['lexical_only']:7d}"
        )
        if "engine_on_recall" in s:
            print(
                f"{'':28}engine: off {s['engine_off_recall']:.1%} "
                f"({s['engine_off_tokens']:.0f} tok), "
                f"on {s['engine_on_recall']:.1%} ({s['engine_on_tokens']:.0f} tok); "
                f"found only with vectors {s['engine_only_on']}, "
                f"only without {s['engine_only_off']}"
            )
    print("\nrecall by vector threshold (vector / hybrid):")
    for probe in ("definitions", "similar"):
        subset = groups[probe]
        if not subset:
            continue
        cells = []
        for t in sweep:
            v = sum(r[f"vector@{t}_hit"] for r in subset) / len(subset)
            h = sum(r[f"hybrid@{t}_hit"] for r in subset) / len(subset)
            cells.append(f"{t}: {v:.1%} / {h:.1%}")
            result[probe][f"vector@{t}"] = round(v, 3)
            result[probe][f"hybrid@{t}"] = round(h, 3)
        print(f"  {probe:12} " + "   ".join(cells))
    print("\ncost:")
    for w in costs["workspaces"]:
        print(f"  {w}")
    for k, v in costs.items():
        if k != "workspaces":
            print(f"  {k}: {v}")
    if args.json:
        Path(args.json).write_text(
            json.dumps({"summary": result, "cost": costs, "rows": rows}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
