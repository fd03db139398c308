"""What grows with use, each against its bound: the answer of ``lspAssist.memory``.

Owns :func:`memory_json`: every structure of a connection that fills as it is used (the
caches, the memories, the records kept for the status command and the telemetry, what is
kept per open document, the metrics log's queue in memory and its files on disk), each
with its size, its bound, the unit and what names the bound (a setting or a documented
constant; docs/configuration.md, "What grows with use", lists them all); the names of
those over their bound (none, unless a bound is broken); the work in flight (none at
rest but the memory request itself); and the process: RSS, threads, open descriptors,
the Python heap's live blocks (``sys.getallocatedblocks``, always) and, when the server
runs under tracemalloc (``LSP_ASSIST_TRACEMALLOC``, set before it starts), the traced
Python heap and its top allocators. It only reads: each owner lists its own structures
(``bounds()``).
"""

from __future__ import annotations

import os
import sys
import threading
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lsp_assist.config import Bounded
from lsp_assist.serving.engine import LAST_OUTCOMES, CompletionEngine
from lsp_assist.serving.next_edit import NextEdits
from lsp_assist.serving.scheduler import Scheduler

__all__ = ["TRACEMALLOC_ENV", "bounded_structures", "memory_json", "process_figures"]

TRACEMALLOC_ENV = "LSP_ASSIST_TRACEMALLOC"
"""Environment variable: ``lsp-assist serve`` starts tracemalloc with this many frames
(a positive integer) before anything else, so ``lspAssist.memory`` can list the Python
heap's top allocators. Tracing costs time and memory: for measurements only."""


def bounded_structures(engine: CompletionEngine, next_edits: NextEdits) -> dict[str, Bounded]:
    """Every structure that grows with use, by name, with its size and bound."""
    out = engine.session.bounds()
    out.update(engine.typethrough.bounds())
    out["engine.last_outcomes"] = Bounded(
        len(engine.last_outcomes), LAST_OUTCOMES, "outcomes", "serving/engine.py LAST_OUTCOMES"
    )
    out.update(next_edits.bounds())
    return dict(sorted(out.items()))


def _status_field(key: str) -> int:
    """One numeric field of /proc/self/status (kB for memory), -1 where there is none."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _open_fds() -> int:
    for folder in ("/proc/self/fd", "/dev/fd"):
        try:
            return len(os.listdir(folder))
        except OSError:
            continue
    return -1


def _short(filename: str) -> str:
    """A source file's name from its package on (``lsp_assist/context/tokens.py``)."""
    parts = Path(filename).parts
    for anchor in ("site-packages", "lib-dynload"):
        if anchor in parts:
            return "/".join(parts[parts.index(anchor) + 1 :])
    if "lsp_assist" in parts:
        return "/".join(parts[parts.index("lsp_assist") :])
    return "/".join(parts[-3:])


def process_figures(top: int = 0) -> dict[str, Any]:
    """RSS, threads and descriptors; the traced heap and ``top`` allocators when tracing."""
    rss_kb = _status_field("VmRSS")
    out: dict[str, Any] = {
        "rss_mb": round(rss_kb / 1024, 1) if rss_kb >= 0 else None,
        "peak_rss_mb": round(kb / 1024, 1) if (kb := _status_field("VmHWM")) >= 0 else None,
        "threads": _status_field("Threads"),
        "python_threads": threading.active_count(),
        "fds": _open_fds(),
        "python_blocks": sys.getallocatedblocks(),
        "tracing": tracemalloc.is_tracing(),
    }
    if not out["tracing"]:
        return out
    traced, peak = tracemalloc.get_traced_memory()
    out["traced_mb"] = round(traced / 2**20, 3)
    out["traced_peak_mb"] = round(peak / 2**20, 3)
    if top > 0:
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        stats = snapshot.statistics("lineno")
        out["traced_blocks"] = sum(stat.count for stat in stats)
        out["top"] = [
            {
                "where": f"{_short(stat.traceback[0].filename)}:{stat.traceback[0].lineno}",
                "kb": round(stat.size / 1024, 1),
                "blocks": stat.count,
            }
            for stat in stats[:top]
        ]
    return out


def memory_json(
    engine: CompletionEngine,
    scheduler: Scheduler,
    next_edits: NextEdits,
    *,
    top: int = 0,
    in_flight: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The answer of ``lspAssist.memory``: structures, what is in flight, the process."""
    structures = bounded_structures(engine, next_edits)
    return {
        "documents": len(engine.session.buffers),
        "structures": [
            {"name": name, "size": b.size, "bound": b.bound, "unit": b.unit, "by": b.by}
            for name, b in structures.items()
        ],
        "over": [name for name, b in structures.items() if b.size > b.bound],
        "in_flight": {"scheduler": scheduler.in_flight, **(in_flight or {})},
        "process": process_figures(top),
        "python": sys.version.split()[0],
    }
