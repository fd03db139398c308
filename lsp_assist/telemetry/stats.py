"""Aggregates of the metrics log: percentiles, rates, a text table and a PNG plot.

Definitions (docs/telemetry.md):

- ``requests``: every record; ``completed``: records neither cancelled nor failed
  (``error`` empty); ``accept_rate`` and ``output_tokens_mean`` are over these.
- ``model_requests``: records that reached the model (not type-through hits);
  ``typethrough_hits``: records answered from the type-through cache.
- ``ttft_ms`` / ``latency_ms`` and the parts ``debounce_ms``, ``queue_ms``,
  ``context_ms``, ``prefill_ms``, ``decode_ms``: P50/P90/P99 over completed model
  requests, by linear interpolation between closest ranks (numpy's default), ``None``
  when there are none. Hits are apart: they answer in about a millisecond and would
  drag the model's percentiles down. ``typethrough_ms``: the hits' latency percentiles.
- ``prompt_tokens_mean``: over the model requests.
- ``kv_reuse_ratio``: sum of reused prompt tokens / sum of prompt tokens.
- ``overhead_ms``: percentiles of ``latency_ms - engine_ms`` (time off the model
  thread: debounce and queue) over completed model requests that have an engine time.
- ``draft_acceptance_rate``: sum of accepted draft tokens / sum of proposed ones;
  ``drafting_rate``: share of model requests that ran with drafting on.
- ``cache_hit_rate`` and ``cancel_rate``: over all requests.
- ``shown``: per shown suggestion (the editor's ``didShowCompletion``, one
  :class:`~lsp_assist.telemetry.shown.ShownRecord` each): ``acceptance`` (accepted
  whole), ``partial_acceptance`` (part of it accepted), ``accepted_chars_mean``, and each
  outcome's share, overall, ``by_trigger`` (automatic, explicit) and ``by_model``;
  what users keep: ``accepted_chars`` (all characters accepted), ``retained_chars``
  (of the accepts measured at ``RETAIN_AFTER_S``, the characters still there),
  ``retained_share`` (those over the characters those accepts took), and how many
  were measured early (``retention_early``) or not at all (``retention_unmeasured``);
  overall only, ``keys`` and ``quiet_rate``: the share of keys (document changes of
  documents with inline completion) after which nothing was shown.

A rate whose denominator is zero is ``None``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from lsp_assist.telemetry.metrics import MetricsRecord
from lsp_assist.telemetry.retention import RETAIN_AFTER_S, KeysRecord, RetainedRecord
from lsp_assist.telemetry.shown import OUTCOMES, ShownRecord

log = logging.getLogger(__name__)

PERCENTILES = (50, 90, 99)

FELT_MS = 400.0
"""Above this time to first token attention drifts (MISSION.md)."""
ABANDON_MS = 800.0
"""Above this time to first token people stop using completions (MISSION.md)."""


def percentile(values: Sequence[float], q: float) -> float | None:
    """Return the ``q``-th percentile (0-100) by linear interpolation, None if empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    return float(ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo))


def _percentiles(values: Sequence[float]) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for q in PERCENTILES:
        p = percentile(values, q)
        out[f"p{q}"] = None if p is None else round(p, 3)
    return out


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else round(num / den, 4)


def _completed(rec: MetricsRecord) -> bool:
    return not rec.cancelled and not rec.error


PARTS = ("debounce_ms", "queue_ms", "context_ms", "prefill_ms", "decode_ms")
"""The parts of a model request's time, each a metrics field (docs/telemetry.md)."""


def _summary(records: Sequence[MetricsRecord]) -> dict[str, Any]:
    completed = [r for r in records if _completed(r)]
    model_requests = [r for r in records if not r.cache_hit]
    answered = [r for r in completed if not r.cache_hit]
    hits = [r for r in records if r.cache_hit]
    prompt_sum = sum(r.prompt_tokens for r in records)
    reused_sum = sum(r.reused_tokens for r in records)
    proposed = sum(r.draft_proposed for r in records)
    accepted_drafts = sum(r.draft_accepted for r in records)
    n = len(records)
    return {
        "requests": n,
        "completed": len(completed),
        "model_requests": len(model_requests),
        "typethrough_hits": len(hits),
        "ttft_ms": _percentiles([r.ttft_ms for r in answered]),
        "latency_ms": _percentiles([r.latency_ms for r in answered]),
        "whole_ms": _percentiles([r.whole_ms or r.latency_ms for r in answered]),
        "answered_early": sum(r.answered_early for r in answered),
        **{name: _percentiles([getattr(r, name) for r in answered]) for name in PARTS},
        "typethrough_ms": _percentiles([r.latency_ms for r in hits]),
        "overhead_ms": _percentiles(
            [max(0.0, r.latency_ms - r.engine_ms) for r in answered if r.engine_ms > 0]
        ),
        "prompt_tokens_mean": (
            round(sum(r.prompt_tokens for r in model_requests) / len(model_requests), 2)
            if model_requests
            else None
        ),
        "output_tokens_mean": (
            round(sum(r.output_tokens for r in completed) / len(completed), 2)
            if completed
            else None
        ),
        "kv_reuse_ratio": _ratio(reused_sum, prompt_sum),
        "draft_acceptance_rate": _ratio(accepted_drafts, proposed),
        "drafting_rate": _ratio(sum(r.drafting for r in model_requests), len(model_requests)),
        "accept_rate": _ratio(sum(r.accepted for r in completed), len(completed)),
        "cache_hit_rate": _ratio(sum(r.cache_hit for r in records), n),
        "cancel_rate": _ratio(sum(r.cancelled for r in records), n),
        "error_rate": _ratio(sum(bool(r.error) for r in records), n),
    }


def _shown_summary(
    shown: Sequence[ShownRecord], retained: Sequence[RetainedRecord] = ()
) -> dict[str, Any]:
    n = len(shown)
    on_time = [r for r in retained if r.measured == "on_time"]
    kept = sum(r.retained_chars or 0 for r in on_time)
    summary: dict[str, Any] = {
        "shown": n,
        "acceptance": _ratio(sum(s.outcome == "accepted" for s in shown), n),
        "partial_acceptance": _ratio(sum(s.partial for s in shown), n),
        "accepted_chars_mean": round(sum(s.accepted_chars for s in shown) / n, 2) if n else None,
        "shown_chars_mean": round(sum(s.shown_chars for s in shown) / n, 2) if n else None,
        "accepted_chars": sum(s.accepted_chars for s in shown),
        "retained_chars": kept if on_time else None,
        "retained_share": _ratio(kept, sum(r.accepted_chars for r in on_time)),
        "retention_measured": len(on_time),
        "retention_early": sum(r.measured == "early" for r in retained),
        "retention_unmeasured": sum(r.measured == "none" for r in retained),
    }
    for outcome in OUTCOMES:
        summary[outcome] = _ratio(sum(s.outcome == outcome for s in shown), n)
    return summary


def shown_stats(
    shown: Sequence[ShownRecord],
    retained: Sequence[RetainedRecord] = (),
    keys: Sequence[KeysRecord] = (),
) -> dict[str, Any]:
    """Return acceptance and retention per shown suggestion, overall, ``by_trigger`` and
    ``by_model``, and the quiet keys (overall)."""
    stats = _shown_summary(shown, retained)
    n_keys = sum(k.keys for k in keys)
    quiet = min(n_keys, sum(k.quiet for k in keys))
    stats["keys"] = n_keys
    stats["quiet_keys"] = quiet
    stats["quiet_rate"] = _ratio(quiet, n_keys)
    for key, name in (("by_trigger", "trigger"), ("by_model", "model")):
        groups: dict[str, tuple[list[ShownRecord], list[RetainedRecord]]] = {}
        for record in shown:
            groups.setdefault(getattr(record, name) or "unknown", ([], []))[0].append(record)
        for measure in retained:
            groups.setdefault(getattr(measure, name) or "unknown", ([], []))[1].append(measure)
        stats[key] = {
            group: _shown_summary(recs, kept) for group, (recs, kept) in sorted(groups.items())
        }
    return stats


def compute_stats(
    records: Sequence[MetricsRecord],
    shown: Sequence[ShownRecord] = (),
    retained: Sequence[RetainedRecord] = (),
    keys: Sequence[KeysRecord] = (),
) -> dict[str, Any]:
    """Return the aggregate statistics of ``records``, overall and ``by_task_type``, and
    of the ``shown`` suggestions, their ``retained`` characters and the quiet ``keys``
    (under ``shown``)."""
    stats = _summary(records)
    if records:
        stats["first_ts"] = min(r.ts for r in records)
        stats["last_ts"] = max(r.ts for r in records)
    by_task: dict[str, list[MetricsRecord]] = {}
    for rec in records:
        by_task.setdefault(rec.task_type or "unknown", []).append(rec)
    stats["by_task_type"] = {task: _summary(recs) for task, recs in sorted(by_task.items())}
    stats["shown"] = shown_stats(shown, retained, keys)
    return stats


def _fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "ms":
        return f"{value:.0f}"
    if kind == "pct":
        return f"{100 * value:.1f}%"
    if kind == "float":
        return f"{value:.1f}"
    return str(value)


_ROWS: tuple[tuple[str, str, str | None, str], ...] = (
    ("requests", "requests", None, "int"),
    ("completed", "completed", None, "int"),
    ("model requests", "model_requests", None, "int"),
    ("type-through hits", "typethrough_hits", None, "int"),
    ("ttft p50 (ms)", "ttft_ms", "p50", "ms"),
    ("ttft p90 (ms)", "ttft_ms", "p90", "ms"),
    ("ttft p99 (ms)", "ttft_ms", "p99", "ms"),
    ("latency p50 (ms)", "latency_ms", "p50", "ms"),
    ("latency p90 (ms)", "latency_ms", "p90", "ms"),
    ("latency p99 (ms)", "latency_ms", "p99", "ms"),
    ("answered early", "answered_early", None, "int"),
    ("whole suggestion p50 (ms)", "whole_ms", "p50", "ms"),
    ("whole suggestion p90 (ms)", "whole_ms", "p90", "ms"),
    ("whole suggestion p99 (ms)", "whole_ms", "p99", "ms"),
    ("debounce p50 (ms)", "debounce_ms", "p50", "ms"),
    ("queue p50 (ms)", "queue_ms", "p50", "ms"),
    ("context p50 (ms)", "context_ms", "p50", "ms"),
    ("prefill p50 (ms)", "prefill_ms", "p50", "ms"),
    ("decode p50 (ms)", "decode_ms", "p50", "ms"),
    ("overhead p50 (ms)", "overhead_ms", "p50", "float"),
    ("type-through p50 (ms)", "typethrough_ms", "p50", "ms"),
    ("type-through p90 (ms)", "typethrough_ms", "p90", "ms"),
    ("prompt tokens (mean)", "prompt_tokens_mean", None, "float"),
    ("output tokens (mean)", "output_tokens_mean", None, "float"),
    ("KV reuse", "kv_reuse_ratio", None, "pct"),
    ("drafting on", "drafting_rate", None, "pct"),
    ("draft acceptance", "draft_acceptance_rate", None, "pct"),
    ("user acceptance", "accept_rate", None, "pct"),
    ("type-through rate", "cache_hit_rate", None, "pct"),
    ("cancelled", "cancel_rate", None, "pct"),
    ("errors", "error_rate", None, "pct"),
)


_SHOWN_ROWS: tuple[tuple[str, str, str | None, str], ...] = (
    ("shown suggestions", "shown", None, "int"),
    ("accepted", "acceptance", None, "pct"),
    ("partly accepted", "partial_acceptance", None, "pct"),
    ("chars accepted (mean)", "accepted_chars_mean", None, "float"),
    ("chars shown (mean)", "shown_chars_mean", None, "float"),
    ("chars accepted", "accepted_chars", None, "int"),
    (f"chars retained ({RETAIN_AFTER_S:.0f} s)", "retained_chars", None, "int"),
    ("retained share", "retained_share", None, "pct"),
    ("retention measured early", "retention_early", None, "int"),
    ("retention not measured", "retention_unmeasured", None, "int"),
    ("typed over", "typed_over", None, "pct"),
    ("dismissed", "dismissed", None, "pct"),
    ("superseded", "superseded", None, "pct"),
    ("ignored", "ignored", None, "pct"),
    ("keys", "keys", None, "int"),
    ("quiet keys", "quiet_rate", None, "pct"),
)


def format_stats(stats: dict[str, Any]) -> str:
    """Return ``stats`` as text tables: one row per measure, one column per task type; then
    acceptance per shown suggestion, one column per trigger and per model."""
    columns: list[tuple[str, dict[str, Any]]] = [("all", stats)]
    by_task = stats.get("by_task_type") or {}
    if len(by_task) > 1 or (by_task and next(iter(by_task)) != "completion"):
        columns += sorted(by_task.items())
    shown = stats.get("shown") or {}
    quiet = not shown.get("shown") and not shown.get("keys")
    lines = _table(columns, _ROWS) if stats.get("requests") or quiet else []
    if stats.get("first_ts") is not None:
        first = datetime.fromtimestamp(stats["first_ts"]).isoformat(sep=" ", timespec="seconds")
        last = datetime.fromtimestamp(stats["last_ts"]).isoformat(sep=" ", timespec="seconds")
        lines.append(f"period: {first} .. {last}")
    if shown.get("shown") or shown.get("keys"):
        columns = [("all", shown)]
        columns += [(name, col) for name, col in (shown.get("by_trigger") or {}).items()]
        columns += [(name, col) for name, col in (shown.get("by_model") or {}).items()]
        if lines:
            lines.append("")
        lines += _table(columns, _SHOWN_ROWS)
    return "\n".join(lines)


def _table(
    columns: list[tuple[str, dict[str, Any]]], spec: tuple[tuple[str, str, str | None, str], ...]
) -> list[str]:
    header = ["", *(name for name, _ in columns)]
    rows = [header]
    for label, key, sub, kind in spec:
        row = [label]
        for _, col in columns:
            value = col.get(key)
            if sub is not None:
                value = value.get(sub) if isinstance(value, dict) else None
            row.append(_fmt(value, kind))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for i, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells).rstrip())
        if i == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def plot_stats(records: Sequence[MetricsRecord], path: Path) -> Path:
    """Write a PNG: latency histogram (TTFT and total) and a latency timeline; return path."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.figure import Figure

    path = Path(path)
    fig = Figure(figsize=(13, 5.2), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    hist_ax, time_ax = fig.subplots(1, 2, width_ratios=(1, 1.4))
    completed = [r for r in records if _completed(r)]
    stats = compute_stats(records)
    title = f"lsp-assist: {len(records)} requests"
    if stats.get("first_ts") is not None:
        first = datetime.fromtimestamp(stats["first_ts"]).strftime("%Y-%m-%d %H:%M")
        last = datetime.fromtimestamp(stats["last_ts"]).strftime("%Y-%m-%d %H:%M")
        title += f", {first} .. {last}"
    fig.suptitle(title, fontsize=13)

    if not records:
        for ax in (hist_ax, time_ax):
            ax.text(0.5, 0.5, "no requests recorded", ha="center", va="center", fontsize=14)
            ax.set_axis_off()
    else:
        _plot_histogram(hist_ax, completed, stats)  # model answers only; hits counted apart
        _plot_timeline(time_ax, records)
        locator = AutoDateLocator()  # type: ignore[no-untyped-call]
        time_ax.xaxis.set_major_locator(locator)
        time_ax.xaxis.set_major_formatter(
            ConciseDateFormatter(locator)  # type: ignore[no-untyped-call]
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png")
    return path


def _plot_histogram(ax: Any, completed: Sequence[MetricsRecord], stats: dict[str, Any]) -> None:
    model = [r for r in completed if not r.cache_hit]
    ttft = [r.ttft_ms for r in model]
    total = [r.latency_ms for r in model]
    n_hits = len(completed) - len(model)
    ax.set_title(f"Latency of model answers ({n_hits} type-through hits apart)")
    if not model:
        ax.text(0.5, 0.5, "no completed model requests", ha="center", va="center", fontsize=12)
        return
    top = max(max(total), max(ttft), 1.0)
    bins = [top * i / 30 for i in range(31)]
    ax.hist(total, bins=bins, alpha=0.55, color="tab:orange", label="total latency")
    ax.hist(ttft, bins=bins, alpha=0.65, color="tab:blue", label="time to first token")
    styles = {"p50": "-", "p90": "--", "p99": ":"}
    for key, color in (("ttft_ms", "tab:blue"), ("latency_ms", "tab:orange")):
        for name, style in styles.items():
            value = stats[key][name]
            if value is not None:
                ax.axvline(value, color=color, linestyle=style, linewidth=1.2)
    t, lat = stats["ttft_ms"], stats["latency_ms"]
    text = (
        f"TTFT   p50 {t['p50']:.0f}  p90 {t['p90']:.0f}  p99 {t['p99']:.0f} ms\n"
        f"total  p50 {lat['p50']:.0f}  p90 {lat['p90']:.0f}  p99 {lat['p99']:.0f} ms\n"
        "lines: p50 solid, p90 dashed, p99 dotted"
    )
    ax.text(
        0.98,
        0.97,
        text,
        transform=ax.transAxes,
        ha="right",
        va="top",
        fontsize=9,
        family="monospace",
        bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.85},
    )
    ax.set_xlabel("milliseconds")
    ax.set_ylabel("requests")
    ax.legend(loc="center right", fontsize=9)


def _plot_timeline(ax: Any, records: Sequence[MetricsRecord]) -> None:
    ax.set_title("Latency over time")
    groups = (
        (
            "model: total latency",
            [r for r in records if _completed(r) and not r.cache_hit],
            "o",
            "tab:orange",
        ),
        ("type-through cache hit", [r for r in records if r.cache_hit], "s", "tab:green"),
        ("cancelled", [r for r in records if r.cancelled], "x", "tab:red"),
        ("error", [r for r in records if r.error and not r.cancelled], "X", "black"),
    )
    for label, recs, marker, color in groups:
        if not recs:
            continue
        xs = [datetime.fromtimestamp(r.ts) for r in recs]
        ys = [r.latency_ms for r in recs]
        ax.scatter(xs, ys, s=22, marker=marker, color=color, label=f"{label} ({len(recs)})")
    model = [r for r in records if _completed(r) and not r.cache_hit]
    if model:
        xs = [datetime.fromtimestamp(r.ts) for r in model]
        ax.plot(
            xs,
            [r.ttft_ms for r in model],
            linestyle="none",
            marker=".",
            color="tab:blue",
            markersize=5,
            label="model: time to first token",
        )
    ax.axhline(FELT_MS, color="grey", linestyle="--", linewidth=1)
    ax.axhline(ABANDON_MS, color="grey", linestyle=":", linewidth=1)
    ax.text(
        0.005,
        FELT_MS,
        " 400 ms: attention drifts",
        transform=ax.get_yaxis_transform(),
        va="bottom",
        fontsize=8,
        color="dimgrey",
    )
    ax.text(
        0.005,
        ABANDON_MS,
        " 800 ms: users give up",
        transform=ax.get_yaxis_transform(),
        va="bottom",
        fontsize=8,
        color="dimgrey",
    )
    ax.set_ylim(bottom=0)
    ax.set_ylabel("milliseconds")
    ax.legend(loc="upper right", fontsize=9)
    ax.grid(True, alpha=0.3)
