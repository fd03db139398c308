"""``lsp-assist stats``: latency percentiles, reuse and acceptance rates from the metrics log."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from datetime import datetime
from pathlib import Path

from lsp_assist.config import env_overrides, parse_settings
from lsp_assist.telemetry import (
    all_metrics_dirs,
    compute_stats,
    format_stats,
    metrics_dir,
    plot_stats,
    read_outcomes,
    read_records,
)

_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_since(value: str, *, now: float | None = None) -> float:
    """Return unix seconds for a duration back from now (``30m``, ``2h``, ``7d``) or an ISO time."""
    now = time.time() if now is None else now
    text = value.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([smhdw])", text.lower())
    if match:
        return now - float(match.group(1)) * _UNITS[match.group(2)]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"--since {value!r}: expected a duration like 30m, 2h, 7d or an ISO date/time"
        ) from None
    return moment.timestamp()


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the ``stats`` subcommand."""
    parser = subparsers.add_parser(
        "stats",
        help="print latency and acceptance statistics from the metrics log",
        description=(
            "Print P50/P90/P99 time to first token and total latency per task type, mean "
            "prompt tokens, KV reuse, draft acceptance, user acceptance, type-through hits "
            "and cancellations, from the local metrics log; then acceptance, partial "
            "acceptance and characters accepted per shown suggestion, by trigger and model, the "
            "accepted characters still present 30 s later and the share of keys with "
            "nothing shown."
        ),
    )
    parser.add_argument(
        "--workspace",
        type=Path,
        metavar="DIR",
        help="read the metrics of this workspace (default: every workspace and the user-wide log)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--since",
        metavar="DURATION_OR_ISO",
        help="only requests since then: 30m, 2h, 7d, or an ISO date/time",
    )
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="also write a PNG plot")
    parser.add_argument(
        "--metrics", type=Path, metavar="FILE", help="read this metrics file or directory"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the statistics; return the exit code."""
    try:
        since = parse_since(args.since) if args.since else None
    except ValueError as exc:
        print(f"lsp-assist stats: {exc}", file=sys.stderr)
        return 2
    sources: list[Path]
    if args.metrics is not None:
        sources = [args.metrics]
    else:
        settings, warnings = parse_settings(env_overrides())
        for warning in warnings:
            print(f"lsp-assist stats: {warning}", file=sys.stderr)
        if args.workspace is not None:
            sources = [metrics_dir(settings, args.workspace)]
        else:
            sources = all_metrics_dirs(settings) or [metrics_dir(settings, None)]
    where = ", ".join(str(s) for s in sources)
    records = read_records(sources, since)
    outcomes = read_outcomes(sources, since)
    stats = compute_stats(records, outcomes.shown, outcomes.retained, outcomes.keys)
    if args.json:
        output = json.dumps(stats, indent=2)
    elif not records and not outcomes.shown and not outcomes.keys:
        output = f"no requests recorded in {where}"
    else:
        output = format_stats(stats)
    try:
        print(output, flush=True)
    except BrokenPipeError:  # e.g. piped into head
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    if args.plot is not None:
        written = plot_stats(records, args.plot)
        print(f"plot written to {written}", file=sys.stderr)
    return 0
