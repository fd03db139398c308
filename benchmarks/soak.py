"""Soak the real server: thousands of keystrokes, cancels and file switches (issue 11).

Usage:
  .venv/bin/python benchmarks/soak.py [--requests 3000] [--model GGUF|embedded]
                                            [--trace] [--frames 8] [--json]

Starts ``lsp-assist serve`` over stdio on a copy of the demo workspace (SmolLM2 unless
``--model``; ``embedded`` is the default Gemma) and replays typing through
``tests.support.lsp_load.soak``: one didChange and one inline request per keystroke,
every 7th request cancelled by the client while the next one is sent, a file switch every
25 requests (every other one closes the file left). Every 100 requests it samples the
server's RSS, threads and open file descriptors. With ``--trace`` the server runs under
tracemalloc (a ``sitecustomize`` hook, no server change) and dumps a snapshot at each
sample: the lines whose memory grew most between the second sample and the last are
printed, which is how a leak is found.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_assist.backends.models import embedded_model_path, small_model_path  # noqa: E402
from tests.support.lsp_load import (  # noqa: E402
    LoadClient,
    SoakReport,
    snapshot_growth,
    soak,
    trace_env,
)
from tests.support.workspace import copy_demo  # noqa: E402


def run(
    requests: int, model: str, *, trace: bool = False, frames: int = 1, sample_every: int = 100
) -> tuple[SoakReport, list[str], dict[str, Any]]:
    """Soak a fresh server; return the report, the top memory growth (with trace), status
    (with what ``lspAssist.memory`` lists under ``memory``)."""
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-soak-"))
    workspace = copy_demo(tmp)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
    trace_dir = tmp / "trace" if trace else None
    if trace_dir is not None:
        env = trace_env(env, trace_dir, frames)
    client = LoadClient(env=env)
    options = {"cacheDir": str(tmp / "cache"), "modelPath": model}
    client.initialize_workspace(workspace, options)
    while True:  # the model loads in the background
        status = client.command("lspAssist.status")
        if status["model"]["loaded"] or status["model"]["error"]:
            break
        time.sleep(0.5)
    if status["model"]["error"]:
        raise SystemExit(status["model"]["error"])
    files = sorted(p for p in (workspace / "shop").glob("*.py") if p.stat().st_size > 200)
    try:
        report = soak(client, files, requests, sample_every=sample_every, trace_dir=trace_dir)
        status = client.command("lspAssist.status")
        status["memory"] = client.command("lspAssist.memory")
    finally:
        client.close()
    growth: list[str] = []
    if trace_dir is not None and len(report.samples) >= 3:
        growth = snapshot_growth(trace_dir, 2, len(report.samples))
    shutil.rmtree(tmp, ignore_errors=True)
    return report, growth, status


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--model", default="", help="GGUF, or 'embedded' (default SmolLM2)")
    parser.add_argument("--trace", action="store_true", help="tracemalloc in the server")
    parser.add_argument("--frames", type=int, default=1, help="traceback frames with --trace")
    parser.add_argument("--every", type=int, default=100, help="requests between samples")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model == "embedded":
        model = str(embedded_model_path())
    else:
        model = args.model or str(small_model_path())
    report, growth, _ = run(
        args.requests, model, trace=args.trace, frames=args.frames, sample_every=args.every
    )
    if args.json:
        print(json.dumps({"report": report.__dict__, "growth": growth}))
        return
    print(
        f"requests {report.requests}, keystrokes {report.keystrokes}, cancels {report.cancels},"
        f" file switches {report.switches}, {report.seconds:.0f} s"
    )
    print(
        f"outcomes: {report.shown} shown, {report.empty} empty, {report.cancelled} cancelled,"
        f" {len(report.errors)} errors, {report.unanswered} unanswered"
    )
    print(f"{'requests':>8} {'RSS MB':>8} {'threads':>7} {'fds':>5} {'traced MB':>9} blocks")
    for row in report.samples:
        traced = (
            f"{row['traced_mb']:>9.2f} {row['traced_blocks']:>6.0f}" if "traced_mb" in row else ""
        )
        print(
            f"{row['requests']:>8.0f} {row['rss_mb']:>8.1f} {row['threads']:>7.0f}"
            f" {row['fds']:>5.0f} {traced}"
        )
    for line in growth:
        print("  grew:", line)
    for error in report.errors[:5]:
        print("  error:", error)


if __name__ == "__main__":
    main()
