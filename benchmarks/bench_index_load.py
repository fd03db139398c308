"""Completions while the workspace indexes, and the index's memory (issue 11; a script).

Usage:
  .venv/bin/python benchmarks/bench_index_load.py --tree stdlib
  .venv/bin/python benchmarks/bench_index_load.py --tree synthetic --files 50000
  .venv/bin/python benchmarks/bench_index_load.py --tree synthetic --index-only

Server mode starts the real ``lsp-assist serve`` over stdio (embedded Gemma model unless
``--model``; a fresh, empty index cache), opens a file ``--open-after`` seconds after
``initialized`` and then types into it like an editor: one character, one automatic
inline completion (``--trigger invoked``: an explicit ask, which decodes up to
``alternatives`` suggestions), wait for the answer, ``--interval`` seconds, again, while
the scan runs and for ``--after`` requests once it has ended (``--during N``: only N
requests while it runs, then none until it ends, for a scan that yields to every
request). The first request waits for the model to load and is reported on its own; of
the others it prints P50/P90/max of the round trips during the scan and after it, how
many took longer than 1.5 s, the index time (the server's log line and the client's view
of the progress end) and the server's RSS. Early answers' figures (``whole_ms`` among
them) come from the server's metrics log, joined by request id.

``--control`` runs the same replay on a workspace holding only the opened file (the
floor this machine gives with nothing to index; all its requests count as "after").

``--index-only`` indexes the tree in a fresh subprocess with nothing else loaded
(``WorkspaceIndex.scan``, empty cache) and prints its time and peak RSS.

The synthetic tree comes from ``gen_tree.py`` (deterministic, 5 KB a file, under /tmp).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_common import metrics_by_id, parse_setting_args, pct  # noqa: E402
from gen_tree import write_tree  # noqa: E402

from tests.support.lsp_load import LoadClient, suggestion_of  # noqa: E402

SLOW_MS = 1500.0
TYPED = "value = len("
DEFAULT_FILES = {"stdlib": "http/client.py", "synthetic": "pkg00/sub0001/mod00150.py"}


def tree_root(args: argparse.Namespace) -> Path:
    """Return the workspace to index (writing the synthetic tree when needed)."""
    if args.tree == "stdlib":
        return Path(sysconfig.get_paths()["stdlib"])
    if args.tree == "synthetic":
        return write_tree(Path(f"/tmp/lsp-tree-{args.files}"), args.files)
    return Path(args.tree).resolve()


def index_only(root: Path) -> dict[str, Any]:
    """Index ``root`` in this process (call it in a fresh one) and return time and memory."""
    import resource

    from lsp_assist.index.workspace import WorkspaceIndex

    with tempfile.TemporaryDirectory() as cache:
        started = time.perf_counter()
        cpu = time.process_time()
        index = WorkspaceIndex([root], cache_dir=Path(cache))
        stats = index.scan()
        seconds = time.perf_counter() - started
        cpu_seconds = time.process_time() - cpu
        status = Path("/proc/self/status").read_text()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024  # type: ignore[union-attr]
        index.stop()
    return {
        "files": stats.files,
        "symbols": stats.symbols,
        "seconds": round(seconds, 1),
        "cpu_seconds": round(cpu_seconds, 1),
        "rss_mb": round(rss, 1),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def typing_spot(lines: list[str]) -> tuple[int, str]:
    """Return the line before which the replay types (a ``return`` in the file's middle)."""
    start = len(lines) * 2 // 5
    for number in range(start, len(lines)):
        match = re.match(r"^(\s+)return\b", lines[number])
        if match:
            return number, match.group(1)
    return len(lines), ""


def summary(values: list[float]) -> dict[str, Any]:
    """Return count, P50, P90, max and the count over 1.5 s of round trips (ms)."""
    return {
        "count": len(values),
        "p50_ms": round(pct(values, 50), 1),
        "p90_ms": round(pct(values, 90), 1),
        "max_ms": round(max(values, default=0.0), 1),
        "over_1500ms": sum(1 for v in values if v > SLOW_MS),
    }


def request_id_of(result: Any) -> str:
    """Return the request id the first item's accept command carries ('' when none)."""
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    command = items[0].get("command") if items and isinstance(items[0], dict) else None
    arguments = command.get("arguments") if isinstance(command, dict) else None
    return str(arguments[0]) if arguments else ""


def join_metrics(records: list[dict[str, Any]], cache: Path) -> None:
    """Replace early answers' pending outcomes by their metrics records (by request id).

    An early answer (docs/serving.md) is recorded when the whole suggestion is written,
    after ``lspAssist.status`` was asked; the metrics log has it, with ``whole_ms``.
    """
    logged = metrics_by_id(cache)
    for record in records:
        found = logged.get(str(record["last"].get("request_id", "")))
        if found is not None and record["last"].get("pending"):
            record["last"] = {
                key: getattr(found, key)
                for key in (
                    "request_id",
                    "prompt_tokens",
                    "reused_tokens",
                    "output_tokens",
                    "context_ms",
                    "prefill_ms",
                    "decode_ms",
                    "ttft_ms",
                    "latency_ms",
                    "whole_ms",
                    "answered_early",
                    "cache_hit",
                )
            }


def whole_client_ms(record: dict[str, Any]) -> float:
    """The round trip plus what the rest of an early-answered suggestion took after it."""
    last = record["last"]
    rest = float(last.get("whole_ms", 0.0)) - float(last.get("latency_ms", 0.0))
    return float(record["ms"]) + (max(0.0, rest) if last.get("answered_early") else 0.0)


def serve(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """Run the typing replay against a real server on ``root``; return the figures."""
    cache = Path(tempfile.mkdtemp(prefix="lsp-assist-load-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
    command = [sys.executable, "-m", "lsp_assist.cli.main", "serve", "--log-level", "INFO"]
    client = LoadClient(command, env=env)
    options: dict[str, Any] = {
        "cacheDir": str(cache),
        "logPrompts": True,
        **parse_setting_args(args.setting),
    }
    if args.model:
        options["modelPath"] = args.model
    path = root / (args.file or DEFAULT_FILES.get(args.tree, ""))
    if args.control:
        alone = cache / "control" / path.relative_to(root)
        alone.parent.mkdir(parents=True)
        alone.write_bytes(path.read_bytes())
        root, path = cache / "control", alone
    client.initialize_workspace(root, options)
    time.sleep(args.open_after)
    lines = path.read_text().split("\n")
    spot, indent = typing_spot(lines)
    uri = client.open(path, "\n".join(lines))
    version = 1
    # a fresh line to type on, with the indentation of the line below it
    client.insert(uri, version + 1, spot, 0, indent + "\n")
    version += 1
    line, column = spot, len(indent)
    during: list[float] = []
    after: list[float] = []
    shown = 0
    first_ms: float | None = None
    first_answer_s = 0.0
    costs: list[tuple[float, float]] = []
    records: list[dict[str, Any]] = []
    index_seconds = 0.0
    deadline = time.monotonic() + args.max_seconds
    typed = 0
    while time.monotonic() < deadline:
        finished = client.index_finished()
        if finished and not index_seconds:
            index_seconds = time.monotonic() - client.started
        if finished and len(after) >= args.after:
            break
        if not finished and args.during and len(during) >= args.during:
            time.sleep(0.5)  # enough requests during the scan: let it finish
            continue
        char = TYPED[typed % len(TYPED)]
        if typed and typed % len(TYPED) == 0:  # start the next line
            client.insert(uri, version + 1, line, column, "\n" + indent)
            version += 1
            line, column = line + 1, len(indent)
        client.insert(uri, version + 1, line, column, char)
        version += 1
        column += 1
        typed += 1
        t0 = time.perf_counter()
        automatic = args.trigger == "automatic"
        result = client.result(client.inline(uri, line, column, automatic=automatic), timeout=300)
        elapsed = (time.perf_counter() - t0) * 1000
        shown += bool(suggestion_of(result))
        if first_ms is None:  # waited for the model to load: reported on its own
            first_ms = elapsed
            first_answer_s = time.monotonic() - client.started
        else:
            (after if finished else during).append(elapsed)
        last = client.command("lspAssist.status").get("last", {})
        answer_id = request_id_of(result)
        if answer_id and last.get("request_id") != answer_id:
            last = {"request_id": answer_id, "pending": True}  # answered early: see below
        records.append({"ms": round(elapsed, 1), "during_scan": not finished, "last": last})
        time.sleep(args.interval)
    join_metrics(records, cache)
    for record in records:
        last = record["last"]
        costs.append(
            (
                float(last.get("context_ms", 0.0)),
                float(last.get("prompt_tokens", 0)) - float(last.get("reused_tokens", 0)),
            )
        )
    status = client.command("lspAssist.status")
    rss, peak = client.rss_mb(), client.peak_rss_mb()
    client.close()
    logged = [ln for ln in client.stderr_lines if "indexed " in ln and " files (" in ln]
    match = re.search(r"in ([\d.]+)s", logged[-1]) if logged else None
    return {
        "tree": str(root),
        "files": status.get("index", {}).get("files_total"),
        "first_request_ms": round(first_ms or 0.0, 1),
        "first_answer_s_after_init": round(first_answer_s, 1),
        "during_scan": summary(during),
        "after_scan": summary(after),
        "answered_early": sum(1 for r in records if r["last"].get("answered_early")),
        "during_scan_whole_suggestion": summary(
            [whole_client_ms(r) for r in records[1:] if r["during_scan"]]
        ),
        "suggestions_shown": shown,
        "context_ms_p50_max": [round(pct([c for c, _ in costs], q), 1) for q in (50, 100)],
        "evaluated_tokens_p50_max": [round(pct([e for _, e in costs], q)) for q in (50, 100)],
        "index_seconds_server_log": float(match.group(1)) if match else None,
        "index_seconds_client": round(index_seconds, 1) if index_seconds else None,
        "kv_reuse_ratio": status.get("model", {}).get("stats", {}).get("kv_reuse_ratio"),
        "rss_mb_end": round(rss, 1),
        "peak_rss_mb": round(peak, 1),
        "records": records,
    }


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", default="stdlib", help="stdlib, synthetic or a folder")
    parser.add_argument("--files", type=int, default=50_000, help="synthetic tree size")
    parser.add_argument("--file", default="", help="file to open, relative to the tree")
    parser.add_argument("--model", default="", help="GGUF (default: the embedded Gemma)")
    parser.add_argument("--open-after", type=float, default=2.0)
    parser.add_argument("--interval", type=float, default=0.3)
    parser.add_argument("--after", type=int, default=10, help="requests after the scan")
    parser.add_argument(
        "--during", type=int, default=0, help="stop typing after N requests during the scan"
    )
    parser.add_argument(
        "--trigger",
        choices=("automatic", "invoked"),
        default="automatic",
        help="automatic: what an editor sends while the user types (one suggestion, early "
        "answers); invoked: an explicit ask (up to `alternatives` suggestions, whole)",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an initializationOptions entry (repeatable), e.g. answerAfterMs=0",
    )
    parser.add_argument("--max-seconds", type=float, default=1800)
    parser.add_argument("--index-only", action="store_true")
    parser.add_argument("--control", action="store_true", help="only the opened file")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--records", default="", help="write each request's figures here")
    args = parser.parse_args()
    root = tree_root(args)
    if args.index_only:
        code = (
            f"import sys, json; sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(ROOT)!r}];"
            "from bench_index_load import index_only; from pathlib import Path;"
            f"print(json.dumps(index_only(Path({str(root)!r}))))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(out.stderr)
        figures = json.loads(out.stdout.strip().splitlines()[-1])
    else:
        figures = serve(args, root)
        records = figures.pop("records")
        if args.records:
            Path(args.records).write_text(json.dumps(records, indent=1))
    if args.json:
        print(json.dumps(figures))
        return
    for key, value in figures.items():
        print(f"{key:>26}: {value}")


if __name__ == "__main__":
    main()
