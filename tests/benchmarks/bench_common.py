"""What the benchmark scripts share: the percentile they report.

Starting and driving the real server is lsp_assist.evaluation.client (one implementation
for the scripts, ``lsp-assist demo``, ``bench`` and ``eval``).
"""

from __future__ import annotations


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) of values by nearest rank, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]
