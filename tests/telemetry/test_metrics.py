"""The metrics log: records, rotation, privacy, acceptance join, reading back."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

from lsp_assist.config import Settings, cache_root, parse_settings, workspace_cache_dir
from lsp_assist.telemetry import metrics as metrics_module
from lsp_assist.telemetry.metrics import (
    METRIC_FIELDS,
    METRICS_FILE,
    MetricsLog,
    MetricsRecord,
    all_metrics_dirs,
    log_files,
    metrics_dir,
    metrics_log,
    read_records,
)


def _rec(i: int, **kw: object) -> MetricsRecord:
    base: dict[str, object] = {
        "ts": 1_700_000_000.0 + i,
        "request_id": f"r{i}",
        "language": "python",
        "strategy": "layered",
        "layer_tokens": {"editing_zone": 300, "related": 100},
        "prompt_tokens": 400,
        "reused_tokens": 350,
        "ttft_ms": 50.0 + i,
        "latency_ms": 120.0 + i,
    }
    base.update(kw)
    return MetricsRecord(**base)  # type: ignore[arg-type]


def test_record_is_one_json_line_with_every_field(tmp_path: Path) -> None:
    path = tmp_path / "m" / METRICS_FILE
    log = MetricsLog(path)
    log.record(_rec(1, engine_ms=80.5, draft_proposed=8, draft_accepted=6, drafting=True))
    log.close()
    lines = path.read_text().splitlines()
    assert len(lines) == 1
    obj = json.loads(lines[0])
    for key in (
        "ts",
        "request_id",
        "task_type",
        "language",
        "strategy",
        "trigger",
        "layer_tokens",
        "prompt_tokens",
        "reused_tokens",
        "draft_proposed",
        "draft_accepted",
        "drafting",
        "ttft_ms",
        "latency_ms",
        "engine_ms",
        "output_tokens",
        "cancelled",
        "cache_hit",
        "accepted",
        "error",
    ):
        assert key in obj, key
    assert obj["layer_tokens"] == {"editing_zone": 300, "related": 100}
    assert obj["draft_accepted"] == 6 and obj["drafting"] is True


LINE_KEYS = {
    *("ts", "request_id", "task_type", "language", "strategy", "trigger"),
    *("cancelled", "cache_hit", "accepted", "confidence", "error", "layer_tokens"),
    *("prompt_tokens", "reused_tokens", "output_tokens"),
    *("drafting", "draft_proposed", "draft_accepted"),
    *("debounce_ms", "queue_ms", "context_ms", "prefill_ms", "decode_ms"),
    *("ttft_ms", "engine_ms", "latency_ms", "whole_ms", "answered_early"),
}
"""The keys of a metrics line (docs/telemetry.md), as they were before the record composed
the backend's usage and the request's times: stats, plot and the bench read them."""


def test_a_line_keeps_its_keys_and_reads_back_whole() -> None:
    record = _rec(
        3,
        debounce_ms=25.0,
        queue_ms=1.5,
        context_ms=9.25,
        prefill_ms=30.0,
        decode_ms=60.0,
        engine_ms=99.0,
        whole_ms=300.0,
        answered_early=True,
        output_tokens=7,
    )
    data = record.to_json(log_prompts=True)
    assert set(data) == LINE_KEYS
    texts = MetricsRecord(prompt="p", completion="c").to_json(log_prompts=True)
    assert set(texts) == LINE_KEYS | {"prompt", "completion"}
    back = MetricsRecord.from_json(json.loads(json.dumps(data)))
    assert back == record
    # the backend's usage and the request's times are copied whole onto another record
    other = MetricsRecord()
    record.copy_usage(other)
    record.copy_times(other)
    copied = other.to_json()
    assert {k: copied[k] for k in METRIC_FIELDS} == {k: data[k] for k in METRIC_FIELDS}
    assert other.layer_tokens == record.layer_tokens
    assert other.layer_tokens is not record.layer_tokens


def test_prompt_text_absent_unless_log_prompts(tmp_path: Path) -> None:
    secret = "API_KEY = 'hunter2'"
    off = MetricsLog(tmp_path / "off.jsonl")
    off.record(_rec(1, prompt=secret, completion="print(API_KEY)"))
    off.close()
    raw = (tmp_path / "off.jsonl").read_text()
    assert "hunter2" not in raw and "API_KEY" not in raw
    assert "prompt" not in json.loads(raw) and "completion" not in json.loads(raw)

    on = MetricsLog(tmp_path / "on.jsonl", log_prompts=True)
    on.record(_rec(1, prompt=secret, completion="print(API_KEY)"))
    on.close()
    obj = json.loads((tmp_path / "on.jsonl").read_text())
    assert obj["prompt"] == secret and obj["completion"] == "print(API_KEY)"
    back = read_records(tmp_path / "on.jsonl")
    assert back[0].prompt == secret


def test_settings_log_prompts_reaches_the_log(tmp_path: Path) -> None:
    settings, warnings = parse_settings({"cacheDir": str(tmp_path), "logPrompts": "true"})
    assert not warnings
    log = metrics_log(settings)
    assert log.log_prompts is True
    assert log.path == tmp_path / METRICS_FILE


def test_rotation_keeps_backups_and_reads_all(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    line_len = len(json.dumps(_rec(0).to_json(), separators=(",", ":"))) + 1
    log = MetricsLog(path, max_bytes=line_len * 3 + 10, backups=2)
    for i in range(10):
        log.record(_rec(i))
    log.close()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [METRICS_FILE, f"{METRICS_FILE}.1", f"{METRICS_FILE}.2"]
    for p in tmp_path.iterdir():
        assert p.stat().st_size <= line_len * 3 + 10
    # 3 records per file: .2 = r3-r5, .1 = r6-r8, live = r9; r0-r2 fell off the end.
    assert [p.name for p in log_files(tmp_path)] == [
        f"{METRICS_FILE}.2",
        f"{METRICS_FILE}.1",
        METRICS_FILE,
    ]
    ids = [r.request_id for r in read_records(tmp_path)]
    assert ids == [f"r{i}" for i in range(3, 10)]
    assert [r.request_id for r in read_records(path)] == ids


def test_rotation_without_backups_truncates(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    log = MetricsLog(path, max_bytes=600, backups=0)
    for i in range(20):
        log.record(_rec(i))
    log.close()
    assert [p.name for p in tmp_path.iterdir()] == [METRICS_FILE]
    assert path.stat().st_size <= 600


def test_acceptance_is_joined(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / METRICS_FILE)
    for i in range(4):
        log.record(_rec(i))
    log.mark_accepted("r1")
    log.mark_accepted("r3")
    log.mark_accepted("unknown")
    log.close()
    events = [json.loads(x) for x in (tmp_path / METRICS_FILE).read_text().splitlines()]
    assert events[4]["event"] == "accept" and events[4]["request_id"] == "r1"
    assert "ts" in events[4]
    records = read_records(tmp_path)
    assert len(records) == 4
    assert [r.accepted for r in records] == [False, True, False, True]


def test_acceptance_joined_across_rotated_files(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / METRICS_FILE, max_bytes=800, backups=5)
    for i in range(6):
        log.record(_rec(i))
    log.mark_accepted("r0")
    log.close()
    assert len(log.files()) > 1
    assert read_records(tmp_path)[0].accepted


def test_since_filter(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / METRICS_FILE)
    for i in range(10):
        log.record(_rec(i))
    log.close()
    recs = read_records(tmp_path, since=1_700_000_000.0 + 7)
    assert [r.request_id for r in recs] == ["r7", "r8", "r9"]


def test_malformed_lines_and_missing_files(tmp_path: Path) -> None:
    path = tmp_path / METRICS_FILE
    path.write_text(
        '{"ts": 1, "request_id": "a", "ttft_ms": "oops", "future_field": 3}\n'
        "not json\n"
        "[1, 2]\n"
        "\n"
        '{"ts": 2, "request_id": "b", "latency_ms": 12}\n'
    )
    recs = read_records(path)
    assert [r.request_id for r in recs] == ["a", "b"]
    assert recs[0].ttft_ms == 0.0 and recs[1].latency_ms == 12.0
    assert read_records(tmp_path / "missing") == []


def test_record_never_raises_on_unwritable_path(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = MetricsLog(blocker / "sub" / METRICS_FILE)
    log.record(_rec(1))  # warns, does not raise
    log.mark_accepted("r1")
    assert log.flush(10)  # done with, not written


def test_concurrent_writers_leave_whole_lines(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / METRICS_FILE, max_bytes=20_000, backups=50)

    def write(t: int) -> None:
        for i in range(50):
            log.record(_rec(i, request_id=f"t{t}-{i}"))

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    log.close()
    recs = read_records(tmp_path)
    assert len(recs) == 200
    assert len({r.request_id for r in recs}) == 200


def test_metrics_dir_under_cache_root(tmp_path: Path) -> None:
    settings = Settings()
    settings.telemetry.cache_dir = str(tmp_path / "cache")
    assert metrics_dir(settings, None) == cache_root(settings)
    ws = tmp_path / "project"
    ws.mkdir()
    # docs/configuration.md: <cacheDir>/workspaces/<name>-<hash>/metrics.jsonl
    assert metrics_dir(settings, ws) == workspace_cache_dir(settings, ws)
    assert metrics_dir(settings, ws).parent == tmp_path / "cache" / "workspaces"
    assert all_metrics_dirs(settings) == []
    for i, workspace in ((1, ws), (2, None)):
        log = MetricsLog(metrics_dir(settings, workspace) / METRICS_FILE)
        log.record(_rec(i))
        log.close()
    assert all_metrics_dirs(settings) == [cache_root(settings), metrics_dir(settings, ws)]
    both = read_records(all_metrics_dirs(settings))
    assert [r.request_id for r in both] == ["r1", "r2"]


def test_record_queues_and_one_writer_thread_appends(tmp_path: Path) -> None:
    """A type-through hit records on the event loop: that thread never opens the file."""
    path = tmp_path / "m" / METRICS_FILE
    log = MetricsLog(path)
    touched: list[tuple[str, str]] = []
    watching = [True]

    def audit(event: str, args: tuple[object, ...]) -> None:
        watched = event in ("open", "os.mkdir", "os.rename", "os.remove")
        if watching[0] and watched and args and str(tmp_path) in str(args[0]):
            touched.append((event, threading.current_thread().name))

    sys.addaudithook(audit)  # hooks stay for the process: this one goes quiet below
    try:
        caller = threading.current_thread().name
        log.record(_rec(1))
        log.mark_accepted("r1")
        assert not [t for t in touched if t[1] == caller], touched
        log.close()  # writes what is queued, then the writer ends
        assert touched and {name for _, name in touched} == {"lsp-assist-metrics"}
    finally:
        watching[0] = False
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x.get("request_id") for x in lines] == ["r1", "r1"]
    assert lines[1]["event"] == "accept"
    assert log._writer is None  # ended by close


def test_flush_waits_for_the_lines_and_the_writer_ends_when_idle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics_module, "WRITER_IDLE_S", 0.05)
    log = MetricsLog(tmp_path / METRICS_FILE)
    for i in range(3):
        log.record(_rec(i))
        assert log.flush(10)
        assert len((tmp_path / METRICS_FILE).read_text().splitlines()) == i + 1
    deadline = time.monotonic() + 10
    while log._writer is not None:
        assert time.monotonic() < deadline, "the idle writer thread did not end"
        time.sleep(0.01)
    log.record(_rec(3))  # a later line starts a writer again
    log.close()
    assert [r.request_id for r in read_records(tmp_path)] == ["r0", "r1", "r2", "r3"]
