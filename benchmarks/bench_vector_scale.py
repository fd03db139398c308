"""Vector retrieval on a 50,000-file tree (issue 15): measured at full size where it can be.

Embedding every chunk of the tree would take hours of a core here, so the script
measures the rest at full size and extrapolates only the embedding:

1. **the tree**: benchmarks/gen_tree.py's synthetic workspace (written when
   missing), scanned by the real ``WorkspaceIndex`` (its cache in ``--cache``, so a
   rerun loads it);
2. **the chunker** over every file: chunk count, and the time of ``chunk_file`` alone
   and with each file's text and entry read through the index;
3. **embedding throughput** on a sample (``--sample`` files, seeded): the packaged
   all-MiniLM-L6-v2 through llama.cpp, ``--threads`` threads: chunks/s, ms per chunk;
4. **the matrix at full size**: a real ``VectorIndex`` synced over the whole tree (the
   chunker, the file table, the float32 matrix, the SQLite cache in a fresh folder of
   its own) with a *replay* embedding that hands out the sample's real vectors again
   in turn: the pass's time is the pipeline's without the model; memory of the matrix
   (capacity and live rows) and of the process; the SQLite file's size;
5. **search at full size** (P50/P99 over ``--queries`` queries, ``query_text`` at
   random lines, embedded by the real model), as the layer calls it (limit 3,
   threshold 0.5): once over the replayed real vectors (this tree's scores: its
   generated code is alike, so many rows pass the threshold and get sorted), once with
   the matrix overwritten by random unit vectors (nothing passes: the product and the
   mask alone); and the product alone over the first 25,000 ... 400,000 rows;
6. the full tree's embedding time **extrapolated** from (2) and (3), labelled so;
7. with ``--ann``: the **approximate index** (hnswlib HNSW, what ``VectorIndex`` builds
   past ``ANN_MIN_CHUNKS``) at full size, over the sample's real vectors each with
   Gaussian noise (sigma ``NOISE`` per component, renormalised: cosine ~0.93 to its
   original, so no two rows are equal as plain replay makes them): its build time (the
   worker's one thread) and memory, search P50/P99 through ``VectorIndex.search`` as the
   layer calls it, brute force on the same matrix for comparison, and recall@10 against
   brute force (limit 10, no threshold, and the layer's call) on the ``--queries``.

The steps before 7 keep brute force (``ann_min_chunks`` out of reach).

Also timed: a full pass over the tree with nothing changed (what the 30 s poll the
vector index no longer runs cost).

Run: .venv/bin/python benchmarks/bench_vector_scale.py [--files 50000]
     [--tree /tmp/lsp-tree-50000] [--cache /tmp/vscale-cache] [--sample 300]
     [--queries 200] [--threads 1] [--ann] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

import numpy as np  # noqa: E402
from bench_common import pct  # noqa: E402

from lsp_assist.backends.embedding import Embedder, minilm_gguf_path  # noqa: E402
from lsp_assist.config import ContextSettings, IndexSettings  # noqa: E402
from lsp_assist.context.vector_layer import MAX_HITS, query_text  # noqa: E402
from lsp_assist.index.vectors import VectorIndex, chunk_file  # noqa: E402
from lsp_assist.index.vectors.ann import ANN_THREADS  # noqa: E402
from lsp_assist.index.workspace import WorkspaceIndex  # noqa: E402

SEARCH_LIMIT_MS = 20.0
"""A search slower than this at P99 would want an approximate index."""
SWEEP_ROWS = (25_000, 50_000, 100_000, 200_000, 400_000)
"""Matrix sizes (its first rows) at which the product alone is timed."""
NOISE = 0.02
"""Per-component noise added to the replayed vectors before the approximate index (step 7)."""


def rss_mb() -> float:
    """Return this process's current resident memory in MB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class Replay:
    """An embedding that hands out real vectors measured beforehand, in turn."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = vectors
        self.dim = int(vectors.shape[1])
        self._next = 0
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return the next ``len(texts)`` stored rows (wrapping around)."""
        self.calls += 1
        rows = (np.arange(len(texts)) + self._next) % len(self.vectors)
        self._next = int(rows[-1] + 1) if len(texts) else self._next
        out: np.ndarray = self.vectors[rows]
        return out


def measure_ann(
    vectors: VectorIndex,
    queries: list[tuple[Path, np.ndarray]],
    threshold: float,
    timed: Callable[..., dict[str, float]],
    seed: int,
) -> dict[str, Any]:
    """Step 7: the approximate index at full size against brute force on the same rows."""
    noise_rng = np.random.default_rng(seed + 2)
    with vectors._lock:
        n = vectors._n
        dim = vectors._matrix.shape[1]
        for start in range(0, n, 50_000):
            block = vectors._matrix[start : min(n, start + 50_000)]
            block += NOISE * noise_rng.standard_normal(block.shape).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
    res: dict[str, Any] = {"noise": NOISE, "rows": n, "dim": dim, "threads": ANN_THREADS}
    res["brute_same_rows"] = timed("brute force, noisy replayed vectors")

    def top(limit: int, thr: float, skip_own: bool, exact: bool) -> list[set[int]]:
        sets = []
        for path, q in queries:
            skip = (lambda p, s, path=path: p == path) if skip_own else None
            if exact:
                with vectors._lock:
                    hits = vectors._search_brute(q, limit, thr, skip)
            else:
                hits = vectors.search(q, limit=limit, threshold=thr, skip=skip)
            sets.append({hash((h.path, h.span)) for h in hits})
        return sets

    exact10 = top(10, -1.0, False, True)
    exact_layer = top(MAX_HITS, threshold, True, True)
    rss0 = rss_mb()
    vectors.ann_min_chunks = 1
    started = time.perf_counter()
    built = vectors.build_ann()
    res["build_s"] = round(time.perf_counter() - started, 1)
    res["built"] = built
    res["build_rss_mb"] = round(rss_mb() - rss0, 1)
    res["index_mb"] = round(vectors.stats.ann_bytes / 1e6, 1)
    res["keys"] = vectors.stats.ann_chunks
    print(
        f"approximate index: {res['keys']} keys built in {res['build_s']} s "
        f"({ANN_THREADS} thread), {res['index_mb']} MB (hnswlib, estimated), "
        f"+{res['build_rss_mb']} MB RSS"
    )
    res["search"] = timed("approximate index (hnswlib HNSW)")
    res["search_limit10"] = timed("approximate index, limit 10", 10)

    def recall(got: list[set[int]], want: list[set[int]]) -> float:
        total = sum(len(w) for w in want)
        return round(sum(len(g & w) for g, w in zip(got, want, strict=True)) / max(1, total), 4)

    res["recall_at_10"] = recall(top(10, -1.0, False, False), exact10)
    res["recall_layer_call"] = recall(top(MAX_HITS, threshold, True, False), exact_layer)
    print(
        f"recall@10 vs brute force: {res['recall_at_10']}; "
        f"the layer's call (limit {MAX_HITS}, threshold {threshold}): {res['recall_layer_call']}"
    )
    return res


def main() -> int:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--tree", default="")
    parser.add_argument("--cache", default="/tmp/vscale-cache", help="the index's cache")
    parser.add_argument("--sample", type=int, default=300, help="files embedded for real")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ann", action="store_true", help="measure the approximate index")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    tree = Path(args.tree or f"/tmp/lsp-tree-{args.files}")
    out: dict[str, Any] = {"tree": str(tree), "threads": args.threads}
    load = [round(os.getloadavg()[0], 2)]

    started = time.perf_counter()
    gen = ROOT / "benchmarks" / "gen_tree.py"
    command = [sys.executable, str(gen), "--files", str(args.files), "--out", str(tree)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    out["tree_s"] = round(time.perf_counter() - started, 1)

    rss0 = rss_mb()
    started = time.perf_counter()
    settings = IndexSettings(watch=False, persist=True)
    index = WorkspaceIndex([tree], settings, cache_dir=Path(args.cache))
    stats = index.scan()
    out.update(
        scan_s=round(time.perf_counter() - started, 1),
        scan_parsed=stats.parsed,
        files=stats.files,
        bytes_mb=round(stats.bytes / 1e6, 1),
        index_rss_mb=round(rss_mb() - rss0, 1),
    )
    print(
        f"tree {tree}: {stats.files} files, {out['bytes_mb']} MB, scanned in {out['scan_s']} s "
        f"({stats.parsed} parsed), +{out['index_rss_mb']} MB RSS"
    )

    # 2. the chunker over every file
    started = time.perf_counter()
    files = index.files()
    out["files_list_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    denied = sum(index.is_denied(p) for p in files)
    out["is_denied_every_file_s"] = round(time.perf_counter() - started, 2)
    print(
        f"index.files(): {out['files_list_s']} s; is_denied on every file: "
        f"{out['is_denied_every_file_s']} s ({denied} denied)"
    )
    chunk_s = 0.0
    n_chunks = 0
    per_file: dict[Path, int] = {}
    started = time.perf_counter()
    for path in files:
        text = index.text_of(path)
        entry = index.file(path)
        if text is None or entry is None:
            continue
        rel = index.relative(path)
        t = time.perf_counter()
        chunks = chunk_file(rel, entry.symbols, text)
        chunk_s += time.perf_counter() - t
        per_file[path] = len(chunks)
        n_chunks += len(chunks)
    out.update(
        chunks=n_chunks,
        chunks_per_file=round(n_chunks / max(1, len(per_file)), 2),
        chunks_per_kb=round(n_chunks / max(1e-9, stats.bytes / 1000), 3),
        chunk_file_s=round(chunk_s, 1),
        chunk_pass_s=round(time.perf_counter() - started, 1),
    )
    print(
        f"chunker: {n_chunks} chunks ({out['chunks_per_file']} per file), chunk_file "
        f"{out['chunk_file_s']} s, with reading texts and entries {out['chunk_pass_s']} s"
    )

    # 3. embedding throughput on a sample
    rng = random.Random(args.seed)
    sample = rng.sample(sorted(per_file), min(args.sample, len(per_file)))
    texts: list[str] = []
    for path in sample:
        entry = index.file(path)
        text = index.text_of(path) or ""
        if entry is not None:
            texts += [t for _, t in chunk_file(index.relative(path), entry.symbols, text)]
    rss1 = rss_mb()
    embedder = Embedder(minilm_gguf_path(), threads=args.threads)
    out["model_rss_mb"] = round(rss_mb() - rss1, 1)
    embedder.embed(texts[:8])  # warm-up
    started = time.perf_counter()
    sample_vectors = np.concatenate(
        [embedder.embed(texts[i : i + 4]) for i in range(0, len(texts), 4)]
    )
    embed_s = time.perf_counter() - started
    ms_chunk = 1000 * embed_s / max(1, len(texts))
    out.update(
        sample_files=len(sample),
        sample_chunks=len(texts),
        sample_embed_s=round(embed_s, 1),
        ms_per_chunk=round(ms_chunk, 1),
        chunks_per_s=round(len(texts) / max(embed_s, 1e-9), 1),
    )
    print(
        f"embedding: {len(texts)} chunks of {len(sample)} files in {embed_s:.1f} s: "
        f"{ms_chunk:.1f} ms per chunk, {out['chunks_per_s']} chunks/s ({args.threads} thread)"
    )

    # 4. the matrix and the SQLite cache at full size, the sample's vectors replayed
    store_dir = Path(tempfile.mkdtemp(prefix="vscale-vectors-"))
    replay = Replay(sample_vectors)
    rss2 = rss_mb()
    vectors = VectorIndex(
        index, lambda: replay, model_id="replay", cache_dir=store_dir, ann_min_chunks=10**12
    )
    started = time.perf_counter()
    vstats = vectors.sync()
    sync_s = time.perf_counter() - started
    db = store_dir / "index.sqlite3"
    sqlite_mb = sum(p.stat().st_size for p in store_dir.iterdir()) / 1e6
    out.update(
        matrix_chunks=vstats.chunks,
        matrix_capacity_mb=round(vstats.matrix_bytes / 1e6, 1),
        matrix_live_mb=round(vstats.chunks * replay.dim * 4 / 1e6, 1),
        sync_rss_mb=round(rss_mb() - rss2, 1),
        sync_without_model_s=round(sync_s, 1),
        sqlite_mb=round(sqlite_mb, 1),
        sqlite_file=str(db),
    )
    print(
        f"matrix: {vstats.chunks} chunks, {out['matrix_live_mb']} MB live "
        f"({out['matrix_capacity_mb']} MB allocated), +{out['sync_rss_mb']} MB RSS; "
        f"the pass without the model {sync_s:.1f} s; SQLite (vectors only) {sqlite_mb:.1f} MB"
    )

    # what the 30 s poll this index no longer runs cost: a full pass with nothing changed
    vectors.notify(None)
    started = time.perf_counter()
    vectors.sync()
    out["full_pass_unchanged_s"] = round(time.perf_counter() - started, 2)
    print(f"a full pass with nothing changed (the old poll): {out['full_pass_unchanged_s']} s")

    # 5. search at full size
    query_rng = random.Random(args.seed + 1)
    queries: list[tuple[Path, np.ndarray]] = []
    for path in query_rng.sample(sorted(per_file), args.queries):
        lines = (index.text_of(path) or "").split("\n")
        line = query_rng.randrange(1, max(2, len(lines)))
        text = query_text(lines, line, len(lines[line]) // 2 if line < len(lines) else 0)
        queries.append((path, embedder.embed([text or "def"])[0]))
    threshold = ContextSettings().vector_threshold

    def timed(label: str, limit: int = MAX_HITS) -> dict[str, float]:
        ms: list[float] = []
        found: list[int] = []
        for path, q in queries:
            t = time.perf_counter()
            hits = vectors.search(
                q, limit=limit, threshold=threshold, skip=lambda p, s, path=path: p == path
            )
            ms.append((time.perf_counter() - t) * 1000)
            found.append(len(hits))
        figures = {
            "p50_ms": round(pct(ms, 50), 2),
            "p99_ms": round(pct(ms, 99), 2),
            "hits_mean": round(sum(found) / max(1, len(found)), 2),
        }
        print(f"search ({label}): {figures}")
        return figures

    scores = np.concatenate([vectors._matrix[: vectors._n] @ q for _, q in queries[:20]])
    out["replayed_rows_over_threshold"] = round(float((scores >= threshold).mean()), 3)
    out["search_replayed"] = timed("replayed real vectors")
    # the product alone over the first k rows: where brute force stops fitting 20 ms
    sweep: dict[str, dict[str, float]] = {}
    with vectors._lock:
        for k in (*(k for k in SWEEP_ROWS if k < vectors._n), vectors._n):
            ms = []
            for _, q in queries:
                t = time.perf_counter()
                np.einsum("ij,j->i", vectors._matrix[:k], q)
                ms.append((time.perf_counter() - t) * 1000)
            sweep[str(k)] = {"p50_ms": round(pct(ms, 50), 2), "p99_ms": round(pct(ms, 99), 2)}
    out["product_by_rows"] = sweep
    print(f"the product alone by rows: {sweep}")
    if args.ann:
        out["ann"] = measure_ann(vectors, queries, threshold, timed, args.seed)
        with vectors._lock:  # the rows are overwritten next: brute force again
            vectors._ann = None
    # the same matrix filled with random unit vectors (nothing passes the threshold)
    gen_rng = np.random.default_rng(args.seed)
    with vectors._lock:
        n = vectors._n
        for start in range(0, n, 50_000):
            block = gen_rng.standard_normal((min(50_000, n - start), replay.dim)).astype(np.float32)
            block /= np.linalg.norm(block, axis=1, keepdims=True)
            vectors._matrix[start : start + len(block)] = block
    out["search_random"] = timed("random unit vectors")

    # 6. extrapolation (not run)
    out["extrapolated_full_embed_hours_one_core"] = round(n_chunks * ms_chunk / 3.6e6, 2)
    print(
        f"EXTRAPOLATED (not run): embedding all {n_chunks} chunks at {ms_chunk:.1f} ms per chunk "
        f"= {out['extrapolated_full_embed_hours_one_core']} h with {args.threads} thread"
    )
    slow = out["search_replayed"]["p99_ms"] > SEARCH_LIMIT_MS
    out["search_over_limit"] = slow
    load.append(round(os.getloadavg()[0], 2))
    out["load_average_start_end"] = load
    out["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3, 1)
    print(f"load average {load[0]} -> {load[1]}; peak RSS {out['peak_rss_mb']} MB")
    vectors.stop()
    embedder.close()
    shutil.rmtree(store_dir, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
