"""Stats over a written log: numbers checked by hand, the CLI, the plot."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lsp_assist.cli.stats_cmd import parse_since
from lsp_assist.telemetry.metrics import METRICS_FILE, MetricsLog, MetricsRecord, read_records
from lsp_assist.telemetry.stats import compute_stats, format_stats, percentile, plot_stats

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / ".venv" / "bin" / "lsp-assist"
T0 = 1_700_000_000.0


def _write_log(path: Path) -> None:
    """Six requests whose statistics are worked out by hand in the tests below."""
    log = MetricsLog(path)
    rows = [
        # id, task, ttft, latency, prompt, reused, proposed, accepted_d, cancelled, hit, error
        ("a", "completion", 10, 100, 100, 80, 8, 6, False, False, ""),
        ("b", "completion", 20, 200, 200, 150, 8, 4, False, False, ""),
        ("c", "completion", 30, 300, 300, 270, 0, 0, False, False, ""),
        ("d", "completion", 40, 400, 400, 0, 4, 2, True, False, ""),
        ("e", "completion", 1, 2, 0, 0, 0, 0, False, True, ""),
        ("f", "explain", 50, 1000, 1000, 500, 0, 0, False, False, ""),
    ]
    for i, (rid, task, ttft, lat, prompt, reused, prop, acc, canc, hit, err) in enumerate(rows):
        log.record(
            MetricsRecord(
                ts=T0 + 60 * i,
                request_id=rid,
                task_type=task,
                ttft_ms=ttft,
                latency_ms=lat,
                prompt_tokens=prompt,
                reused_tokens=reused,
                draft_proposed=prop,
                draft_accepted=acc,
                cancelled=canc,
                cache_hit=hit,
                error=err,
                output_tokens=10,
                engine_ms=lat - 2 * (i + 1) if rid in ("a", "b") else 0.0,
                drafting=rid in ("a", "b"),
            )
        )
    log.mark_accepted("a")
    log.mark_accepted("e")
    log.mark_accepted("f")
    log.close()


def test_percentile_linear_interpolation() -> None:
    assert percentile([], 50) is None
    assert percentile([5.0], 99) == 5.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 20, 30, 40], 90) == pytest.approx(37.0)
    assert percentile([3, 1, 2], 0) == 1 and percentile([3, 1, 2], 100) == 3


def test_stats_match_hand_computed(tmp_path: Path) -> None:
    _write_log(tmp_path / METRICS_FILE)
    stats = compute_stats(read_records(tmp_path))
    assert stats["requests"] == 6
    # completed = a, b, c, e, f (d cancelled); e is a type-through hit, the rest the model's
    assert stats["completed"] == 5
    assert stats["model_requests"] == 5 and stats["typethrough_hits"] == 1
    # model requests completed: a, b, c, f; ttft sorted 10, 20, 30, 50
    assert stats["ttft_ms"]["p50"] == 25.0
    assert stats["ttft_ms"]["p90"] == pytest.approx(30 + 0.7 * 20)  # pos 2.7
    assert stats["ttft_ms"]["p99"] == pytest.approx(30 + 0.97 * 20)  # pos 2.97
    # latency sorted 100, 200, 300, 1000
    assert stats["latency_ms"]["p50"] == 250.0
    assert stats["latency_ms"]["p90"] == pytest.approx(300 + 0.7 * 700)
    assert stats["typethrough_ms"] == {"p50": 2.0, "p90": 2.0, "p99": 2.0}
    # prompt mean over model requests (not the cache hit e): (100+200+300+400+1000)/5
    assert stats["prompt_tokens_mean"] == 400.0
    # reuse: (80+150+270+0+0+500) / (100+200+300+400+0+1000) = 1000/2000
    assert stats["kv_reuse_ratio"] == 0.5
    # drafts: (6+4+2) / (8+8+4)
    assert stats["draft_acceptance_rate"] == 0.6
    assert stats["drafting_rate"] == 0.4  # a, b of the 5 model requests
    assert stats["overhead_ms"]["p50"] == 3.0  # latency - engine of a, b: 2, 4
    # accepted a, e, f of the 5 completed
    assert stats["accept_rate"] == 0.6
    assert stats["cache_hit_rate"] == pytest.approx(1 / 6, abs=1e-4)
    assert stats["cancel_rate"] == pytest.approx(1 / 6, abs=1e-4)

    comp = stats["by_task_type"]["completion"]
    assert comp["requests"] == 5
    assert comp["ttft_ms"]["p50"] == 20.0  # 10, 20, 30 (the hit e apart)
    assert comp["typethrough_hits"] == 1 and comp["typethrough_ms"]["p50"] == 2.0
    assert comp["kv_reuse_ratio"] == 0.5  # 500 / 1000
    assert comp["accept_rate"] == 0.5  # a, e of a, b, c, e
    assert comp["cancel_rate"] == 0.2
    exp = stats["by_task_type"]["explain"]
    assert exp["requests"] == 1 and exp["ttft_ms"] == {"p50": 50.0, "p90": 50.0, "p99": 50.0}
    assert exp["draft_acceptance_rate"] is None


def test_type_through_hits_do_not_drag_the_model_percentiles() -> None:
    """Hits answer in ~1 ms: mixed into the model's TTFT they would make its P50 ~1 ms."""
    records = [
        MetricsRecord(
            ts=T0 + i,
            request_id=f"m{i}",
            ttft_ms=100.0 + i,
            latency_ms=150.0 + i,
            engine_ms=140.0 + i,
            debounce_ms=5.0,
            queue_ms=2.0 + i,
            context_ms=20.0,
            prefill_ms=70.0 + i,
            decode_ms=50.0,
        )
        for i in range(4)
    ] + [
        MetricsRecord(
            ts=T0 + 10 + i,
            request_id=f"h{i}",
            strategy="typethrough",
            trigger="typethrough",
            cache_hit=True,
            ttft_ms=0.5,
            latency_ms=0.5,
            engine_ms=0.1,
        )
        for i in range(6)
    ]
    stats = compute_stats(records)
    assert stats["completed"] == 10
    assert stats["model_requests"] == 4 and stats["typethrough_hits"] == 6
    assert stats["ttft_ms"]["p50"] == 101.5  # 100..103, the six hits apart
    assert stats["latency_ms"]["p50"] == 151.5
    assert stats["typethrough_ms"]["p50"] == 0.5
    assert stats["debounce_ms"]["p50"] == 5.0
    assert stats["queue_ms"]["p50"] == 3.5
    assert stats["context_ms"]["p50"] == 20.0
    assert stats["prefill_ms"]["p50"] == 71.5
    assert stats["decode_ms"]["p50"] == 50.0
    assert stats["overhead_ms"]["p50"] == 10.0  # latency - engine over model requests
    assert stats["cache_hit_rate"] == 0.6
    table = format_stats(stats)
    assert any(
        line.split()[:3] == ["ttft", "p50", "(ms)"] and line.split()[-1] == "102"
        for line in table.splitlines()
    )
    assert any(line.startswith("prefill p50") for line in table.splitlines())


def test_early_answers_report_the_answer_and_the_whole_apart() -> None:
    """An early answer's latency is what the user waited for; whole_ms is the suggestion's end."""
    records = [
        MetricsRecord(
            ts=T0 + i,
            request_id=f"e{i}",
            latency_ms=100.0 + i,
            whole_ms=400.0 + 10 * i,
            answered_early=True,
        )
        for i in range(3)
    ] + [MetricsRecord(ts=T0 + 5, request_id="w", latency_ms=200.0)]  # an older record
    stats = compute_stats(records)
    assert stats["answered_early"] == 3
    assert stats["latency_ms"]["p50"] == 101.5  # 100, 101, 102, 200
    assert stats["whole_ms"]["p50"] == 405.0  # 200 (no whole_ms: its latency), 400, 410, 420
    table = format_stats(stats)
    assert any(line.startswith("answered early") for line in table.splitlines())


def test_empty_stats() -> None:
    stats = compute_stats([])
    assert stats["requests"] == 0
    assert stats["ttft_ms"] == {"p50": None, "p90": None, "p99": None}
    assert stats["accept_rate"] is None and stats["by_task_type"] == {}
    assert "requests" in format_stats(stats)


def test_format_stats_table(tmp_path: Path) -> None:
    _write_log(tmp_path / METRICS_FILE)
    text = format_stats(compute_stats(read_records(tmp_path)))
    lines = text.splitlines()
    assert lines[0].split() == ["all", "completion", "explain"]
    ttft = next(line for line in lines if line.startswith("ttft p50"))
    assert ttft.split()[-3:] == ["25", "20", "50"]
    hits = next(line for line in lines if line.startswith("type-through hits"))
    assert hits.split()[-3:] == ["1", "1", "0"]
    typethrough = next(line for line in lines if line.startswith("type-through p50"))
    assert typethrough.split()[-3:] == ["2", "2", "-"]
    assert any(line.startswith("KV reuse") and "50.0%" in line for line in lines)
    assert any(line.startswith("user acceptance") and "60.0%" in line for line in lines)


def test_parse_since() -> None:
    now = 1_000_000.0
    assert parse_since("30m", now=now) == now - 1800
    assert parse_since("2h", now=now) == now - 7200
    assert parse_since("1.5d", now=now) == now - 1.5 * 86400
    assert parse_since("2023-11-14T22:13:20+00:00") == 1_700_000_000.0
    with pytest.raises(ValueError):
        parse_since("yesterday")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run(
        [str(CLI), "stats", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


@pytest.mark.skipif(not CLI.exists(), reason="lsp-assist is not installed in .venv")
def test_cli_json_matches_log(tmp_path: Path) -> None:
    log_path = tmp_path / METRICS_FILE
    _write_log(log_path)
    proc = _cli("--metrics", str(log_path), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for key in (
        "requests",
        "ttft_ms",
        "latency_ms",
        "prompt_tokens_mean",
        "kv_reuse_ratio",
        "draft_acceptance_rate",
        "accept_rate",
        "cache_hit_rate",
        "cancel_rate",
        "model_requests",
        "typethrough_hits",
        "typethrough_ms",
        "debounce_ms",
        "queue_ms",
        "context_ms",
        "prefill_ms",
        "decode_ms",
    ):
        assert key in data
    assert data["requests"] == 6
    assert set(data["ttft_ms"]) == {"p50", "p90", "p99"}
    assert data["latency_ms"]["p50"] == 250.0  # the model requests a, b, c, f
    assert data["model_requests"] == 5 and data["typethrough_hits"] == 1
    assert data["kv_reuse_ratio"] == 0.5
    assert data["by_task_type"]["explain"]["requests"] == 1


@pytest.mark.skipif(not CLI.exists(), reason="lsp-assist is not installed in .venv")
def test_cli_since_and_table_and_plot(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / METRICS_FILE)
    now = time.time()
    for i, age in enumerate((7200, 3000, 600, 60)):
        log.record(MetricsRecord(ts=now - age, request_id=str(i), ttft_ms=10 * (i + 1)))
    log.close()
    proc = _cli("--metrics", str(tmp_path), "--json", "--since", "1h")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requests"] == 3
    png = tmp_path / "out" / "stats.png"
    proc = _cli("--metrics", str(tmp_path), "--since", "20m", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr
    assert "ttft p50" in proc.stdout
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = _cli("--metrics", str(tmp_path), "--since", "whenever")
    assert bad.returncode == 2 and "--since" in bad.stderr


@pytest.mark.skipif(not CLI.exists(), reason="lsp-assist is not installed in .venv")
def test_cli_workspace_uses_cache_dir(tmp_path: Path) -> None:
    from lsp_assist.config import Settings
    from lsp_assist.telemetry.metrics import metrics_dir

    settings = Settings()
    settings.telemetry.cache_dir = str(tmp_path / "cache")
    ws = tmp_path / "ws"
    ws.mkdir()
    log = MetricsLog(metrics_dir(settings, ws) / METRICS_FILE)
    log.record(MetricsRecord(request_id="x"))
    log.close()
    env = dict(os.environ, LSP_ASSIST_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(
        [str(CLI), "stats", "--workspace", str(ws), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["requests"] == 1
    every = subprocess.run(
        [str(CLI), "stats", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert every.returncode == 0 and json.loads(every.stdout)["requests"] == 1
    env["LSP_ASSIST_CACHE_DIR"] = str(tmp_path / "empty-cache")
    empty = subprocess.run(
        [str(CLI), "stats"], capture_output=True, text=True, timeout=120, env=env, check=False
    )
    assert empty.returncode == 0 and "no requests" in empty.stdout


def synthetic_records(n: int = 300, seed: int = 7) -> list[MetricsRecord]:
    """A plausible session: mostly fast completions, some cache hits, cancels, explains."""
    rng = random.Random(seed)
    out = []
    ts = T0
    for i in range(n):
        ts += rng.expovariate(1 / 8)
        hit = rng.random() < 0.25
        cancelled = not hit and rng.random() < 0.1
        task = "explain" if rng.random() < 0.05 else "completion"
        ttft = 2.0 if hit else rng.lognormvariate(4.6, 0.45)
        decode = 0.0 if hit else rng.lognormvariate(5.0, 0.4)
        latency = ttft + (0.5 if hit else decode)
        # the parts of a model request's ttft: debounce, queue, context, prefill
        debounce = 0.0 if hit else min(25.0, 0.3 * ttft)
        queue = 0.0 if hit else min(rng.expovariate(1 / 3), 0.1 * ttft)
        context = 0.0 if hit else min(rng.uniform(2.0, 12.0), 0.2 * ttft)
        out.append(
            MetricsRecord(
                ts=ts,
                request_id=str(i),
                task_type=task,
                ttft_ms=ttft,
                latency_ms=latency,
                prompt_tokens=0 if hit else 900,
                reused_tokens=0 if hit else rng.randint(600, 900),
                engine_ms=0.0 if hit else latency - debounce - queue,
                debounce_ms=debounce,
                queue_ms=queue,
                context_ms=context,
                prefill_ms=0.0 if hit else ttft - debounce - queue - context,
                decode_ms=decode,
                output_tokens=0 if hit else rng.randint(3, 40),
                drafting=not hit,
                draft_proposed=0 if hit else 8,
                draft_accepted=0 if hit else rng.randint(3, 8),
                cancelled=cancelled,
                cache_hit=hit,
                accepted=rng.random() < 0.4,
            )
        )
    return out


def test_plot_is_a_png(tmp_path: Path) -> None:
    png = plot_stats(synthetic_records(), tmp_path / "plot.png")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width = int.from_bytes(data[16:20], "big")
    height = int.from_bytes(data[20:24], "big")
    assert width >= 800 and height >= 400
    empty = plot_stats([], tmp_path / "empty.png")
    assert empty.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


if __name__ == "__main__":  # write the sample plot for a person to look at
    print(plot_stats(synthetic_records(), Path(sys.argv[1] if len(sys.argv) > 1 else "p.png")))
