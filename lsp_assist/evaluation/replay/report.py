"""The acceptance replay's figures, table and plot, from its per-key records alone.

A row's records are one per key pressed (typed, Tab or Ctrl+Right), each with what was
on screen at that key's moment and whether it had been there for the reaction time, one
per distinct suggestion shown, and for a server row one per request its metrics log
holds (tokens evaluated and generated, time on the model thread). Every figure of the
tables is recomputed here from those records and the regions (their lines marked
cross-file): docs/evaluation.md, "Acceptance replay", has the definitions.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_assist.evaluation.replay.tasks import (
    Region,
    key_sequence,
    keys_per_line,
    line_of,
    rest_of_line,
)
from lsp_assist.telemetry import percentile

HEADER = (
    "row",
    "pace",
    "react ms",
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


DETAIL_HEADER = (
    "row",
    "pace",
    "react ms",
    "debounce ms",
    "budget (tokens, mode)",
    "line starts",
    "shown",
    "ready",
    "right in full",
    "too new / 100 keys",
    "saved: cross-file lines",
    "saved: other lines",
    "model requests / 100 keys",
    "tokens evaluated / 100 keys",
    "tokens generated / 100 keys",
    "model ms / 100 keys",
)


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def line_starts(keys: Sequence[dict[str, Any]], regions: Sequence[Region]) -> list[dict[str, Any]]:
    """Return the first key moment of each new line (not a region's first line): the first
    key record with the cursor at that line's start, nothing typed on it yet. A line that
    an accepted suggestion wrote before the cursor got there has none."""
    targets = {r.id: r.target for r in regions}
    seen: set[tuple[str, int]] = set()
    starts: list[dict[str, Any]] = []
    for k in keys:
        target = targets.get(str(k.get("region")))
        pos = k.get("pos")
        if target is None or pos is None or k["within_line"]:
            continue
        line = line_of(target, pos)
        if line == 0 or (k["region"], line) in seen:
            continue
        seen.add((k["region"], line))
        starts.append(k)
    return starts


def _line_start_figures(
    keys: Sequence[dict[str, Any]], regions: Sequence[Region]
) -> dict[str, Any]:
    targets = {r.id: r.target for r in regions}
    starts = line_starts(keys, regions)
    shown = [k for k in starts if k["shown"] is not None]
    ready = [k for k in shown if k.get("ready", True)]

    def right(k: dict[str, Any]) -> bool:
        # what the user could take: the part read of a suggestion that grew just now
        rest = rest_of_line(targets[k["region"]], k["pos"])
        return bool(rest.strip()) and str(k.get("ready_text") or k["shown"]).startswith(rest)

    return {
        "lines": sum(r.target.count("\n") for r in regions),
        "line_starts": len(starts),
        "line_start_shown": _share(len(shown), len(starts)),
        "line_start_ready": _share(len(ready), len(starts)),
        "line_start_right": _share(sum(1 for k in ready if right(k)), len(starts)),
        "line_start_right_too_new": sum(1 for k in shown if right(k) and not k.get("ready", True)),
        "line_start_carried": sum(1 for k in shown if _carried(k, keys)),
    }


def _carried(start: dict[str, Any], keys: Sequence[dict[str, Any]]) -> bool:
    """True when the suggestion on screen at a line start was on screen at the key before
    (the line break): shown before Enter and typed through it."""
    i = start.get("i")
    if not isinstance(i, int) or i == 0 or start["shown_id"] is None:
        return False
    before = next((k for k in keys if k["region"] == start["region"] and k.get("i") == i - 1), None)
    return before is not None and before["shown_id"] == start["shown_id"]


def _cross_file_figures(
    keys: Sequence[dict[str, Any]], regions: Sequence[Region]
) -> dict[str, Any]:
    """Keys needed and pressed on the regions' cross-file lines and on the others (a key
    counts on the line the cursor is on when it is pressed)."""
    needed = {"cross": 0, "other": 0}
    pressed = {"cross": 0, "other": 0}
    marked = {r.id: set(r.cross_lines) for r in regions}
    targets = {r.id: r.target for r in regions}
    for region in regions:
        for line, count in enumerate(keys_per_line(region.target)):
            needed["cross" if line in marked[region.id] else "other"] += count
    for k in keys:
        target = targets.get(str(k.get("region")))
        if target is None or k.get("pos") is None:
            continue
        line = line_of(target, k["pos"])
        pressed["cross" if line in marked[k["region"]] else "other"] += 1
    return {
        "cross_keys_needed": needed["cross"],
        "cross_keys_pressed": pressed["cross"],
        "cross_saved": 1 - pressed["cross"] / needed["cross"] if needed["cross"] else None,
        "other_keys_needed": needed["other"],
        "other_keys_pressed": pressed["other"],
        "other_saved": 1 - pressed["other"] / needed["other"] if needed["other"] else None,
    }


def _model_figures(requests: Sequence[dict[str, Any]] | None, pressed: int) -> dict[str, Any]:
    """Model work of a server row from its logged requests, per 100 keys pressed."""
    if requests is None:
        return {"model": None}
    work = [r for r in requests if r.get("prompt_tokens") or r.get("output_tokens")]
    evaluated = sum(max(0, r["prompt_tokens"] - r["reused_tokens"]) for r in requests)
    generated = sum(r["output_tokens"] for r in requests)
    engine_ms = sum(float(r["engine_ms"]) for r in requests)
    per = 100 / pressed if pressed else 0.0
    return {
        "model": {
            "requests": len(requests),
            "model_requests": len(work),
            "tokens_evaluated": evaluated,
            "tokens_generated": generated,
            "engine_ms": round(engine_ms, 1),
            "requests_per_100_keys": len(work) * per if pressed else None,
            "evaluated_per_100_keys": evaluated * per if pressed else None,
            "generated_per_100_keys": generated * per if pressed else None,
            "engine_ms_per_100_keys": engine_ms * per if pressed else None,
        }
    }


def summarize(
    keys: Sequence[dict[str, Any]],
    shown: Sequence[dict[str, Any]],
    regions: Sequence[Region],
    requests: Sequence[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Return one row's figures from its key records, its distinct suggestions, the regions
    and (a server row) the requests its metrics log holds."""
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
        "not_ready": sum(1 for k in keys if k["shown"] is not None and not k.get("ready", True)),
        "too_new": sum(1 for k in keys if k.get("too_new")),
        "too_new_per_100_keys": (
            100 * sum(1 for k in keys if k.get("too_new")) / pressed if pressed else None
        ),
        **_line_start_figures(keys, regions),
        **_cross_file_figures(keys, regions),
        **_model_figures(requests, pressed),
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def row_cells(row: dict[str, Any]) -> list[str]:
    """Return one table row from a row of results.json."""
    s = row["summary"]
    if row.get("error"):
        return [
            row["name"],
            row["pace"],
            _num(row.get("react_ms", 0.0)),
            f"failed: {row['error']}",
        ] + [""] * (len(HEADER) - 4)
    lat = s["latency_ms"]
    noise = s["noise"]
    return [
        row["label"],
        row["pace"],
        _num(row.get("react_ms", 0.0)),
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


def _budget(row: dict[str, Any]) -> str:
    """The budget a server row ended with (its start's when they differ: start -> end)."""
    budget = row.get("budget") or {}
    start, end = budget.get("start") or {}, budget.get("end") or {}
    if not start and not end:
        return "-"
    last = end or start
    text = f"{last.get('tokens', '?')} {last.get('mode', '')}".strip()
    if start and end and start.get("tokens") != end.get("tokens"):
        text = f"{start.get('tokens', '?')} -> {text}"
    return text


def detail_cells(row: dict[str, Any]) -> list[str]:
    """Return one line of the second table (line starts, cross-file lines, model time)."""
    head = [row.get("label", row["name"]), row["pace"], _num(row.get("react_ms", 0.0))]
    if row.get("error"):
        return head + ["failed"] + [""] * (len(DETAIL_HEADER) - 4)
    s = row["summary"]
    model = s.get("model") or {}
    debounce = row.get("debounce_ms")
    return [
        *head,
        "-" if debounce is None else _num(debounce),
        _budget(row),
        f"{s.get('line_starts', 0)} of {s.get('lines', 0)}",
        _pct(s.get("line_start_shown")),
        _pct(s.get("line_start_ready")),
        _pct(s.get("line_start_right")),
        _num(s.get("too_new_per_100_keys"), 1),
        _pct(s.get("cross_saved")) + f" ({s.get('cross_keys_needed', 0)} keys)",
        _pct(s.get("other_saved")) + f" ({s.get('other_keys_needed', 0)} keys)",
        _num(model.get("requests_per_100_keys"), 1),
        _num(model.get("evaluated_per_100_keys")),
        _num(model.get("generated_per_100_keys")),
        _num(model.get("engine_ms_per_100_keys")),
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
        f"pace {meta['pace_ms']} ms a key, rest {meta['rest_ms']} ms; reaction "
        f"{', '.join(_num(r) for r in meta.get('react_ms', [0]))} ms; lsp-assist client "
        f"debounce {_num(meta.get('debounce_ms', 0))} ms; load average {meta['load']}.",
        "",
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    for row in result["rows"]:
        lines.append("| " + " | ".join(row_cells(row)) + " |")
    lines += [
        "",
        "| " + " | ".join(DETAIL_HEADER) + " |",
        "|" + "---|" * len(DETAIL_HEADER),
    ]
    for row in result["rows"]:
        lines.append("| " + " | ".join(detail_cells(row)) + " |")
    lines += [
        "",
        "Keystrokes saved: 1 - keys pressed / keys needed without suggestions. Acceptance: "
        "distinct suggestions accepted (in full or word by word) / shown. Noise: shown and "
        "rejected (neither accepted nor right and typed to its end) per accepted. Visible "
        "latency: from the key that made the version to the answer's arrival, per distinct "
        "suggestion. Quiet: key moments with nothing "
        "on screen. Shown within a line: key moments after code on the line (not a region's "
        "first key) with a suggestion on screen. React ms: the user takes a suggestion only "
        "once it has been on screen this long (0: the replay before it had a reaction time). "
        "Line starts: the first key moment of each line after a region's first, with a "
        "suggestion shown, ready to take (on screen for the reaction time), and ready and "
        "right in full (it writes the rest of the line). Too new: key moments where a user "
        "without the wait would have taken what showed. Saved on cross-file lines: lines that "
        "use a name only another file of the workspace defines. Model: the server's metrics "
        "log, requests that evaluated or generated tokens, per 100 keys pressed. "
        'docs/evaluation.md, "Acceptance replay".',
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
