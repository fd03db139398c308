"""Telemetry: the per-request metrics log, the shown suggestions' outcomes, and the
statistics read from them.

A record composes the backend's :class:`~lsp_assist.backends.base.BackendUsage` with the
request's own :class:`RequestTimes` (defined here, below serving, which fills them).
"""

from lsp_assist.telemetry.metrics import (
    METRIC_FIELDS,
    METRICS_FILE,
    REQUEST_TIMES_FIELDS,
    MetricsLog,
    MetricsRecord,
    Outcomes,
    RequestTimes,
    all_metrics_dirs,
    metrics_dir,
    read_outcomes,
    read_records,
    read_shown,
)
from lsp_assist.telemetry.retention import (
    RETAIN_AFTER_S,
    KeysRecord,
    RetainedRecord,
    trim_edit,
)
from lsp_assist.telemetry.shown import (
    OUTCOMES,
    OfferedItem,
    ShownRecord,
    ShownSuggestions,
    TelemetryEvent,
    item_id,
    request_of,
    trigger_kind,
)
from lsp_assist.telemetry.stats import (
    compute_stats,
    format_stats,
    percentile,
    plot_stats,
    shown_stats,
)

__all__ = [
    "METRICS_FILE",
    "METRIC_FIELDS",
    "OUTCOMES",
    "REQUEST_TIMES_FIELDS",
    "RETAIN_AFTER_S",
    "KeysRecord",
    "MetricsLog",
    "MetricsRecord",
    "OfferedItem",
    "Outcomes",
    "RequestTimes",
    "RetainedRecord",
    "ShownRecord",
    "ShownSuggestions",
    "TelemetryEvent",
    "all_metrics_dirs",
    "compute_stats",
    "format_stats",
    "item_id",
    "metrics_dir",
    "percentile",
    "plot_stats",
    "read_outcomes",
    "read_records",
    "read_shown",
    "request_of",
    "shown_stats",
    "trigger_kind",
    "trim_edit",
]
