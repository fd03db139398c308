"""What the benchmark scripts share: the percentile they report, ``--setting`` values, and
the server's metrics log read back by request id.

Starting and driving the real server is lsp_assist.evaluation.client (one implementation
for the scripts, ``lsp-assist demo``, ``bench`` and ``eval``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lsp_assist.telemetry.metrics import METRICS_FILE, MetricsRecord, read_records


def parse_setting_args(items: Iterable[str]) -> dict[str, Any]:
    """Return initializationOptions from ``KEY=VALUE`` items (values parsed as JSON if they can)."""
    options: dict[str, Any] = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return options


def metrics_by_id(cache: Path) -> dict[str, MetricsRecord]:
    """Return the metrics records a server wrote under ``cache`` (its cacheDir), by request id."""
    dirs = sorted({p.parent for p in cache.rglob(METRICS_FILE + "*")})
    return {r.request_id: r for r in read_records(dirs)} if dirs else {}


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) of values by nearest rank, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]
