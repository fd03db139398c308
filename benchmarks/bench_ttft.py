"""Where a request's time goes, as the metrics log records it (issue 10, part 3).

Replays typing through the real server (bench_typing.py's replay: one didChange and
one automatic inline request per keystroke, waiting for each answer), then reads the
server's metrics log with ``lsp-assist stats``'s own code and prints, side by side,
the time to first token as the user feels it (from the request's arrival, the
``ttft_ms`` of the log) and as the log used to give it (from the start of the
backend's generate: ``ttft_ms - debounce_ms - queue_ms - context_ms``), with the
parts and the type-through hits apart.

Run: .venv/bin/python benchmarks/bench_ttft.py [--keystrokes 120] [--model GGUF]
     [--file tarfile.py]... [--seed 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_typing import FILES, PROMPT_TIMEOUT_MS, run  # noqa: E402

from lsp_assist.telemetry.metrics import METRICS_FILE, read_records  # noqa: E402
from lsp_assist.telemetry.stats import compute_stats, percentile  # noqa: E402


def main() -> int:
    """Replay, read the log, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="GGUF (default: the embedded model)")
    parser.add_argument("--keystrokes", type=int, default=120)
    parser.add_argument("--file", action="append", default=[], help="stdlib file (repeatable)")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args()
    cache = Path(tempfile.mkdtemp(prefix="lsp-assist-ttft-")) / "cache"
    extra = {"cacheDir": str(cache), "promptTimeoutMs": PROMPT_TIMEOUT_MS}
    load = os.getloadavg()[0]
    asyncio.run(run(args.model, args.keystrokes, args.file or FILES, args.seed, extra))
    records = read_records(sorted({p.parent for p in cache.rglob(METRICS_FILE)}))
    stats = compute_stats(records)
    model = [r for r in records if not r.cache_hit and not r.cancelled and not r.error]
    from_generate = [r.ttft_ms - r.debounce_ms - r.queue_ms - r.context_ms for r in model]
    print(
        f"lsp_assist from {ROOT}; {stats['requests']} requests "
        f"({stats['model_requests']} to the model, {stats['typethrough_hits']} type-through "
        f"hits); load {load:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    print(f"{'ms':<40}{'P50':>8}{'P90':>8}{'P99':>8}")

    def row(name: str, values: dict[str, float | None]) -> None:
        cells = "".join(f"{'-' if v is None else f'{v:.1f}':>8}" for v in values.values())
        print(f"{name:<40}{cells}")

    row("ttft, from arrival (the log's ttft_ms)", stats["ttft_ms"])
    row(
        "ttft, from generate (what it used to be)",
        {f"p{q}": percentile(from_generate, q) for q in (50, 90, 99)},
    )
    for part in ("debounce_ms", "queue_ms", "context_ms", "prefill_ms", "decode_ms"):
        row(f"  {part}", stats[part])
    row("latency (model requests)", stats["latency_ms"])
    row("type-through hits: latency", stats["typethrough_ms"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
