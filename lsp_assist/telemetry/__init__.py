"""Telemetry: the per-request metrics log and the statistics read from it.

A record composes the backend's :class:`~lsp_assist.backends.base.BackendUsage` with the
request's own :class:`RequestTimes` (defined here, below serving, which fills them).
"""

from lsp_assist.telemetry.metrics import (
    METRIC_FIELDS,
    METRICS_FILE,
    REQUEST_TIMES_FIELDS,
    MetricsLog,
    MetricsRecord,
    RequestTimes,
    all_metrics_dirs,
    metrics_dir,
    read_records,
)
from lsp_assist.telemetry.stats import compute_stats, format_stats, percentile, plot_stats

__all__ = [
    "METRICS_FILE",
    "METRIC_FIELDS",
    "REQUEST_TIMES_FIELDS",
    "MetricsLog",
    "MetricsRecord",
    "RequestTimes",
    "all_metrics_dirs",
    "compute_stats",
    "format_stats",
    "metrics_dir",
    "percentile",
    "plot_stats",
    "read_records",
]
