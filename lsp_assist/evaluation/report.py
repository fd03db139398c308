"""The bench's and the eval's outputs: the markdown table, the JSON of every record, the plots.

Every number of the tables is computed by metrics.py from the per-task records that
the JSON file holds, so anyone can recompute the table from the file
(tests/evaluation/test_report.py does). No pygls here.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lsp_assist.evaluation.metrics import holes

TABLE_COLUMNS = (
    "row",
    "def. in prompt",
    "input tokens mean / P90",
    "TTFT P50 / P90 / P99 ms",
    "whole P50 / P90 / P99 ms",
    "typing: > 32 new tokens",
    "relative cost",
    "exact",
    "edit sim.",
    "ident.",
    "draft accept.",
    "KV reuse",
)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _num(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _triple(values: dict[str, float | None]) -> str:
    return " / ".join(_num(values.get(k)) for k in ("p50", "p90", "p99"))


def table_cells(label: str, s: dict[str, Any]) -> list[str]:
    """Return one row of the bench table from a row summary (metrics.summarize)."""
    return [
        label,
        _pct(s["definition_share"]),
        f"{_num(s['input_tokens_mean'])} / {_num(s['input_tokens_p90'])}",
        _triple(s["ttft_ms"]),
        _triple(s["latency_ms"]),
        _pct(s["reeval_share"]),
        _num(s["relative_cost"], 2),
        _pct(s["exact_match"]),
        _num(s["edit_similarity"], 2),
        _pct(s["identifier_match"]),
        _pct(s["draft_acceptance"]),
        _pct(s["kv_reuse"]),
    ]


TYPING_COLUMNS = (
    "row",
    "keystrokes",
    "type-through hits",
    "> 32 new tokens",
    "new tokens mean",
    "TTFT P50 / P90 / P99 ms",
    "whole P50 / P90 / P99 ms",
)


def typing_cells(label: str, s: dict[str, Any]) -> list[str]:
    """Return one row of the typing-replay table from a row summary."""
    return [
        label,
        str(s["keystrokes"]),
        str(s["typing_hits"]),
        _pct(s["reeval_share"]),
        _num(s["typing_new_tokens_mean"], 1),
        _triple(s["typing_ttft_ms"]),
        _triple(s["typing_latency_ms"]),
    ]


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Return a markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def bench_markdown(result: dict[str, Any]) -> str:
    """Return the bench's report: what ran, the table, what each row is, the definitions."""
    meta = result["meta"]
    rows = result["rows"]
    out = [
        f"# lsp-assist bench: {meta['workspace']}",
        "",
        f"`{meta['command']}`",
        "",
        f"{meta['date']}; {meta['machine']}; load average {meta['load_start']:.1f} at the "
        f"start, {meta['load_end']:.1f} at the end; {meta['wall_min']:.1f} min in all.",
        f"Model {meta['model_name']}; {meta['tasks']['cross_file']} cross-file and "
        f"{meta['tasks']['in_file']} in-file tasks, {meta['tasks']['typing']} typed lines "
        f"({meta['tasks']['keystrokes']} keystrokes) per row; seed {meta['seed']}; "
        f"lsp_assist {meta['commit']}.",
        "",
        markdown(TABLE_COLUMNS, [table_cells(r["label"], r["summary"]) for r in rows]),
        "The typing replay (keystrokes after the first of each line; TTFT over the requests "
        "that reached the model, a type-through hit answers without it):",
        "",
        markdown(TYPING_COLUMNS, [typing_cells(r["label"], r["summary"]) for r in rows]),
        "Rows (each the real server over stdio with these settings, unless said):",
        "",
    ]
    for r in rows:
        session = r.get("session", {})
        budget = session.get("budget", {})
        extra = f" Budget in force: {budget.get('reason', '')}." if budget.get("reason") else ""
        out.append(f"- **{r['label']}**: {r['note']}.{extra} ({session.get('wall_s', 0):.0f} s)")
    if meta.get("settings"):
        given = ", ".join(f"{k}={v}" for k, v in meta["settings"].items())
        out += ["", f"Settings given to every row (--setting): {given}."]
    out += [
        "",
        f"Time caps raised on every server row so each request answers: "
        f"{meta['caps']}. Hole tasks ask once (invoked) at the indentation of the "
        "removed line; TTFT and whole-suggestion times count from the request's arrival "
        "at the server (the peer: from the start of building its prompt) over the hole "
        "tasks that got a first token; tokens and cost over the hole tasks; quality over "
        "the first line of the suggestion; the typing column over the keystrokes after "
        "the first of each line. docs/evaluation.md defines each column.",
        "",
    ]
    leaks = sum(r["summary"]["leaks"] for r in rows)
    out.append(f"Target line found in a prompt: {leaks} times (must be 0).")
    return "\n".join(out) + "\n"


def eval_markdown(result: dict[str, Any]) -> str:
    """Return ``lsp-assist eval``'s report: overall and per language."""
    summary = result["summary"]
    meta = result["meta"]
    header = (
        "",
        "tasks",
        "answered",
        "cut short",
        "exact",
        "edit sim.",
        "ident.",
        "ident. F1",
        "parses",
    )

    def cells(name: str, s: dict[str, Any]) -> list[str]:
        return [
            name,
            str(s["tasks"]),
            str(s["answered"]),
            str(s["cut"]),
            _pct(s["exact_match"]),
            _num(s["edit_similarity"], 2),
            _pct(s["identifier_match"]),
            _num(s["identifier_f1"], 2),
            _pct(s["parses"]),
        ]

    rows = [cells("all", summary["overall"])]
    rows += [cells(lang, s) for lang, s in summary["by_language"].items()]
    note = (
        "\ncut short: requests cancelled or failed, most often by `promptTimeoutMs` or "
        "`generationTimeoutMs` (raise them, lower the budget or the threads on a busy machine)\n"
        if summary["overall"]["cut"]
        else ""
    )
    return (
        f"lsp-assist eval: {meta['workspace']} ({meta['model_name']}, seed {meta['seed']}, "
        f"{meta['tasks']['cross_file']} cross-file + {meta['tasks']['in_file']} in-file "
        f"tasks)\n\n" + markdown(header, rows) + note
    )


def machine() -> str:
    """Return a one-line description of this machine."""
    cpus = os.cpu_count() or 0
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            name = next((x.split(":", 1)[1].strip() for x in fh if x.startswith("model name")), "")
    except OSError:
        name = platform.processor()
    return f"{cpus} CPUs ({name or platform.machine()}), Python {platform.python_version()}"


def commit() -> str:
    """Return the git commit of the lsp_assist checkout ('' outside a checkout)."""
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def now() -> str:
    """Return the local date and time, to the minute."""
    return time.strftime("%Y-%m-%d %H:%M")


def read_results(path: Path) -> dict[str, Any]:
    """Read a bench's results.json and recompute every row's summary from its records."""
    from lsp_assist.evaluation.metrics import summarize_rows

    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    summarize_rows(result["rows"], result["records"])
    return result


def write_json(path: Path, result: dict[str, Any]) -> Path:
    """Write the result (meta, rows, tasks, every record) as JSON."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return path


def plot_bench(result: dict[str, Any], directory: Path) -> list[Path]:
    """Write the three PNGs: latency per row, tokens per layer per row, TTFT vs tokens."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    directory.mkdir(parents=True, exist_ok=True)
    rows = result["rows"]
    by_row = {
        r["name"]: holes([x for x in result["records"] if x["row"] == r["name"]]) for r in rows
    }
    names = [r["name"] for r in rows]
    written: list[Path] = []

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), sharey=True)
    for ax, key, title in (
        (axes[0], "ttft_ms", "time to first token (from arrival)"),
        (axes[1], "latency_ms", "whole suggestion (from arrival)"),
    ):
        data = [[float(x[key]) for x in by_row[n] if x.get("ttft_ms")] or [0.0] for n in names]
        ax.boxplot(data, whis=(0, 100))
        ax.set_xticks(range(1, len(names) + 1), names, rotation=20)
        ax.set_yscale("log")
        ax.set_title(title)
        ax.axhline(400, color="orange", linestyle="--", linewidth=0.8)
        ax.axhline(800, color="red", linestyle="--", linewidth=0.8)
    axes[0].set_ylabel("ms (log); whiskers min-max; 400 / 800 ms lines")
    written.append(_save(plt, fig, directory / "latency.png"))

    layers: list[str] = []
    for n in names:
        for x in by_row[n]:
            for layer in x.get("layer_tokens") or {"window": 0}:
                if layer not in layers:
                    layers.append(layer)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    bottom = [0.0] * len(names)
    for layer in layers:
        means = []
        for n in names:
            recs = by_row[n]
            if not recs:
                means.append(0.0)
                continue
            if layer == "window":
                total = sum(
                    float(x.get("prompt_tokens", 0)) for x in recs if not x.get("layer_tokens")
                )
            else:
                total = sum(float((x.get("layer_tokens") or {}).get(layer, 0)) for x in recs)
            means.append(total / len(recs))
        ax.bar(names, means, bottom=bottom, label=layer)
        bottom = [b + m for b, m in zip(bottom, means, strict=True)]
    ax.set_ylabel("mean prompt tokens per hole task")
    ax.set_title("prompt tokens per layer")
    ax.legend(fontsize=8)
    written.append(_save(plt, fig, directory / "tokens.png"))

    fig, ax = plt.subplots(figsize=(8, 5))
    for n in names:
        pts = [(x["prompt_tokens"], x["ttft_ms"]) for x in by_row[n] if x.get("ttft_ms")]
        if pts:
            ax.scatter([p[0] for p in pts], [p[1] for p in pts], label=n, s=18, alpha=0.75)
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("time to first token, ms (log)")
    ax.set_yscale("log")
    ax.set_title("TTFT against prompt tokens (hole tasks)")
    ax.legend(fontsize=8)
    written.append(_save(plt, fig, directory / "ttft_vs_tokens.png"))
    return written


def _save(plt: Any, fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
