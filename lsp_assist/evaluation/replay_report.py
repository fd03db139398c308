"""The acceptance replay's figures, table and plot, from its per-key records alone.

A row's records are one per key pressed (typed, Tab or Ctrl+Right), each with what was
on screen at that key's moment, and one per distinct suggestion shown. Every figure of
the table is recomputed here from those records (docs/evaluation.md, "Acceptance
replay", has the definitions).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_assist.evaluation.replay_tasks import Region, key_sequence
from lsp_assist.telemetry import percentile

HEADER = (
    "row",
    "pace",
    "keys needed",
    "keys pressed",
    "keystrokes saved",
    "chars by suggestions",
    "shown / 100 keys",
    "acceptance",
    "noise (rejected / accepted)",
    "visible latency P50 / P90 / P99 ms",
    "quiet",
    "shown within a line",
)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def summarize(
    keys: Sequence[dict[str, Any]], shown: Sequence[dict[str, Any]], regions: Sequence[Region]
) -> dict[str, Any]:
    """Return one row's figures from its key records, its distinct suggestions and the regions."""
    needed = sum(len(key_sequence(r.target)) for r in regions)
    chars = sum(len(r.target) for r in regions)
    pressed = len(keys)
    on_screen = sum(1 for k in keys if k["shown"] is not None)
    inline = [k for k in keys if k["within_line"] and not k["first"]]
    accepted = sum(1 for s in shown if s["accepted"])
    typed = sum(1 for s in shown if not s["accepted"] and s.get("typed_through"))
    rejected = len(shown) - accepted - typed
    latencies = [float(s["latency_ms"]) for s in shown]
    return {
        "regions": len(regions),
        "keys_needed": needed,
        "keys_pressed": pressed,
        "keystrokes_saved": 1 - pressed / needed if needed else None,
        "chars": chars,
        "chars_accepted": sum(len(k["text"]) for k in keys if k["kind"] != "type"),
        "chars_by_suggestions": _share(
            sum(len(k["text"]) for k in keys if k["kind"] != "type"), chars
        ),
        "tabs": sum(1 for k in keys if k["kind"] == "tab"),
        "word_keys": sum(1 for k in keys if k["kind"] == "word"),
        "shown_per_100_keys": 100 * on_screen / pressed if pressed else None,
        "distinct_shown": len(shown),
        "accepted": accepted,
        "typed_through": typed,
        "rejected": rejected,
        "acceptance": _share(accepted, len(shown)),
        "noise": rejected / accepted if accepted else None,
        "latency_ms": {f"p{q}": percentile(latencies, q) for q in (50, 90, 99)},
        "quiet": _share(pressed - on_screen, pressed),
        "within_line_moments": len(inline),
        "shown_within_line": _share(sum(1 for k in inline if k["shown"] is not None), len(inline)),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def row_cells(row: dict[str, Any]) -> list[str]:
    """Return one table row from a row of results.json."""
    s = row["summary"]
    if row.get("error"):
        return [row["name"], row["pace"], f"failed: {row['error']}"] + [""] * (len(HEADER) - 3)
    lat = s["latency_ms"]
    noise = s["noise"]
    return [
        row["label"],
        row["pace"],
        str(s["keys_needed"]),
        str(s["keys_pressed"]),
        _pct(s["keystrokes_saved"]),
        _pct(s["chars_by_suggestions"]),
        _num(s["shown_per_100_keys"], 1),
        _pct(s["acceptance"]) + f" ({s['accepted']}/{s['distinct_shown']})",
        "-" if noise is None else f"{noise:.1f}",
        " / ".join(_num(lat.get(k)) for k in ("p50", "p90", "p99")),
        _pct(s["quiet"]),
        _pct(s["shown_within_line"]),
    ]


def markdown(result: dict[str, Any]) -> str:
    """Return the replay's table (markdown) with what it ran."""
    meta = result["meta"]
    lines = [
        "# Acceptance replay",
        "",
        f"`{meta['command']}`",
        "",
        f"{meta['date']}, {meta['machine']}, commit {meta['commit'] or '-'}; model "
        f"{meta['model']}; {meta['regions']} regions ({meta['keys_needed']} keys, "
        f"{meta['chars']} characters) of {meta['workspace']}, seed {meta['seed']}; "
        f"pace {meta['pace_ms']} ms a key, rest {meta['rest_ms']} ms; load average "
        f"{meta['load']}.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for row in result["rows"]:
        lines.append("| " + " | ".join(row_cells(row)) + " |")
    lines += [
        "",
        "Keystrokes saved: 1 - keys pressed / keys needed without suggestions. Acceptance: "
        "distinct suggestions accepted (in full or word by word) / shown. Noise: shown and "
        "rejected (neither accepted nor right and typed to its end) per accepted. Visible "
        "latency: from the key that made the version to the answer's arrival, per distinct "
        "suggestion. Quiet: key moments with nothing "
        "on screen. Shown within a line: key moments after code on the line (not a region's "
        'first key) with a suggestion on screen. docs/evaluation.md, "Acceptance replay".',
    ]
    return "\n".join(lines) + "\n"


def plot(result: dict[str, Any], directory: Path) -> list[Path]:
    """Write replay.png: keystrokes saved and noise per row ([] without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    rows = [r for r in result["rows"] if not r.get("error")]
    names = [f"{r['label']}\n{r['pace']}" for r in rows]
    saved = [100 * (r["summary"]["keystrokes_saved"] or 0.0) for r in rows]
    noise = [r["summary"]["noise"] or 0.0 for r in rows]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    axes[0].bar(names, saved, color="tab:green")
    axes[0].set_ylabel("keystrokes saved, %")
    axes[0].set_title("keystrokes saved (higher is better)")
    axes[0].axhline(0, color="black", linewidth=0.6)
    axes[1].bar(names, noise, color="tab:red")
    axes[1].set_ylabel("shown and rejected per accepted")
    axes[1].set_title("noise (lower is better; 0 also when nothing was accepted)")
    fig.tight_layout()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "replay.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]
