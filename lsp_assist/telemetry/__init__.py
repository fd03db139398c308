"""Telemetry: the per-request metrics log and the statistics read from it."""

from lsp_assist.telemetry.metrics import (
    METRICS_FILE,
    MetricsLog,
    MetricsRecord,
    all_metrics_dirs,
    metrics_dir,
    read_records,
)
from lsp_assist.telemetry.stats import compute_stats, format_stats, percentile, plot_stats

__all__ = [
    "METRICS_FILE",
    "MetricsLog",
    "MetricsRecord",
    "all_metrics_dirs",
    "compute_stats",
    "format_stats",
    "metrics_dir",
    "percentile",
    "plot_stats",
    "read_records",
]
