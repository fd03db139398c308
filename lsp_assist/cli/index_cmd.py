"""CLI ``lsp-assist index PATH [--json]``: index a folder and print a summary.

Owns the command's arguments, the progress bar (stderr) and the summary output
(stdout): a human-readable table, or with ``--json`` one object with files, symbols,
bytes, seconds, files_per_second, peak_rss_mb, languages, parsed and skipped_unchanged.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from lsp_assist.config import env_overrides, parse_settings, workspace_cache_dir
from lsp_assist.errors import LspAssistError
from lsp_assist.index import WorkspaceIndex

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``index`` subcommand."""
    parser = subparsers.add_parser(
        "index",
        help="index a folder (symbols, imports, summaries) and print a summary",
        description="Index a folder with the workspace index and print what it found.",
    )
    parser.add_argument("path", type=Path, metavar="PATH", help="folder to index")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="do not read or write the persistent index cache",
    )
    parser.set_defaults(func=run)


class _Bar:
    """A progress bar on a stream, redrawn at most every 0.1 s."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.last = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - self.last < 0.1:
            return
        self.last = now
        width = 30
        filled = width * done // total if total else width
        pct = 100 * done // total if total else 100
        line = f"indexing [{'#' * filled}{'.' * (width - filled)}] {pct:3d}% {done}/{total}"
        if self.tty:
            self.stream.write("\r" + line)
            if done >= total:
                self.stream.write("\n")
        elif done >= total:
            self.stream.write(line + "\n")
        self.stream.flush()


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run(args: argparse.Namespace) -> int:
    """Index ``args.path`` and print the summary; return the exit code."""
    root: Path = args.path
    if not root.is_dir():
        print(f"lsp-assist index: not a folder: {root}", file=sys.stderr)
        return 2
    settings, warnings = parse_settings(env_overrides())
    for warning in warnings:
        logger.warning("%s", warning)
    cache_dir = None if args.no_cache else workspace_cache_dir(settings, root)
    try:
        index = WorkspaceIndex([root], settings.index, cache_dir=cache_dir)
        stats = index.scan(progress=_Bar(sys.stderr))
        index.stop()
    except LspAssistError as exc:
        print(f"lsp-assist index: {exc}", file=sys.stderr)
        return 1
    seconds = max(stats.seconds, 1e-9)
    summary = {
        "files": stats.files,
        "symbols": stats.symbols,
        "bytes": stats.bytes,
        "seconds": round(stats.seconds, 3),
        "files_per_second": round(stats.files / seconds, 1),
        "peak_rss_mb": round(_peak_rss_mb(), 1),
        "languages": dict(sorted(stats.languages.items())),
        "parsed": stats.parsed,
        "skipped_unchanged": stats.skipped_unchanged,
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"{root}: {stats.files} files, {stats.symbols} symbols, {stats.bytes / 1e6:.1f} MB")
    print(
        f"  {stats.seconds:.2f} s ({summary['files_per_second']} files/s), "
        f"{stats.parsed} parsed, {stats.skipped_unchanged} unchanged, "
        f"peak RSS {summary['peak_rss_mb']} MB"
    )
    for lang, count in sorted(stats.languages.items()):
        print(f"  {lang:<12} {count}")
    return 0
