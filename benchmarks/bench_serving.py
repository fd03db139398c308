"""Benchmark the serving layer through the real server over stdio (issue 5).

Replays a typing session into ``lsp-assist serve`` with a real LSP client:

1. server overhead: for each inline completion, the client's round trip minus the
   engine's own time (reported by lspAssist.status) -> P50/P90 (target P50 <= 5 ms);
2. type-through: after each shown suggestion the replay types that suggestion's first
   characters, one keystroke each, and asks again -> share of those keystrokes served
   from the cache and their latency (target >= 50% hits, answered in <= 10 ms).

Run: .venv/bin/python benchmarks/bench_serving.py [--model GGUF] [--keystrokes N]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench_common import pct

from lsp_assist.evaluation.client import (
    inline_request,
    line_edit,
    open_document,
    start_server,
    stop_server,
    wait_loaded,
)

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "docs" / "examples" / "shop"


async def run(model: str, keystrokes: int) -> dict[str, Any]:
    """Replay the session and return the figures."""
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-bench-"))
    workspace = tmp / "shop"
    shutil.copytree(DEMO, workspace)
    options: dict[str, Any] = {"cacheDir": str(tmp / "cache"), "debounceMs": 0, "maxTokens": 16}
    if model:
        options["modelPath"] = model
    client, _ = await start_server("bench", workspace, options)
    path = workspace / "shop" / "checkout.py"
    text = path.read_text().rstrip() + "\n"
    uri = path.as_uri()
    open_document(client, uri, text, "python")
    try:
        await wait_loaded(client)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from exc

    lines = text.split("\n")
    line = len(lines) - 1
    col = 0
    version = 1
    overhead: list[float] = []
    model_latency: list[float] = []
    tt_latency: list[float] = []
    tt_total = 0
    tt_hits = 0
    typed_target = "    return create_payment(order)\n    "

    async def ask(automatic: bool) -> tuple[str, float, dict[str, Any]]:
        return await inline_request(client, uri, line, col, automatic=automatic)

    def type_char(char: str) -> None:
        nonlocal line, col, version
        version += 1
        client.text_document_did_change(line_edit(uri, version, line, col, col, char))
        if char == "\n":
            line, col = line + 1, 0
        else:
            col += 1

    done = 0
    source = iter(typed_target * 100)
    while done < keystrokes:
        suggestion, elapsed, last = await ask(automatic=True)
        if last and not last.get("cache_hit") and last.get("engine_ms"):
            overhead.append(elapsed - float(last["engine_ms"]))
            model_latency.append(elapsed)
        # Type through the suggestion shown (up to 6 characters), asking at each keystroke.
        for char in suggestion[:6]:
            if char == "\n" or done >= keystrokes:
                break
            type_char(char)
            done += 1
            tt_total += 1
            _, tt_elapsed, tt_last = await ask(automatic=True)
            if tt_last.get("cache_hit"):
                tt_hits += 1
                tt_latency.append(tt_elapsed)
        # Then type one character of the scripted text (a keystroke the cache cannot know).
        type_char(next(source))
        done += 1
    await stop_server(client)
    shutil.rmtree(tmp, ignore_errors=True)
    return {
        "requests_to_model": len(overhead),
        "overhead_p50_ms": statistics.median(overhead) if overhead else 0.0,
        "overhead_p90_ms": pct(overhead, 90),
        "model_round_trip_p50_ms": statistics.median(model_latency) if model_latency else 0.0,
        "typethrough_keystrokes": tt_total,
        "typethrough_hit_rate": tt_hits / tt_total if tt_total else 0.0,
        "typethrough_p50_ms": statistics.median(tt_latency) if tt_latency else 0.0,
        "typethrough_p90_ms": pct(tt_latency, 90),
    }


def main() -> None:
    """Parse flags, run, print the figures against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="GGUF (default: the embedded model)")
    parser.add_argument("--keystrokes", type=int, default=200)
    args = parser.parse_args()
    r = asyncio.run(run(args.model, args.keystrokes))
    print(f"{'measure':<40}{'value':>12}{'target':>14}")
    print(f"{'requests that reached the model':<40}{r['requests_to_model']:>12}")
    print(f"{'model round trip P50 (ms)':<40}{r['model_round_trip_p50_ms']:>12.1f}")
    print(f"{'server overhead P50 (ms)':<40}{r['overhead_p50_ms']:>12.2f}{'<= 5':>14}")
    print(f"{'server overhead P90 (ms)':<40}{r['overhead_p90_ms']:>12.2f}")
    print(f"{'type-through keystrokes':<40}{r['typethrough_keystrokes']:>12}")
    print(f"{'type-through hit rate':<40}{r['typethrough_hit_rate']:>12.1%}{'>= 50%':>14}")
    print(f"{'type-through hit latency P50 (ms)':<40}{r['typethrough_p50_ms']:>12.2f}{'<= 10':>14}")
    print(f"{'type-through hit latency P90 (ms)':<40}{r['typethrough_p90_ms']:>12.2f}")


if __name__ == "__main__":
    main()
