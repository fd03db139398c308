"""Time to first token as the user feels it: from the request's arrival, with its parts.

ttft_ms counts the debounce, the wait for the model thread, building the prompt and
the prefill (docs/telemetry.md); each part is its own field in the outcome and in the
metrics record. The fake backend stands in for timing only (tests/serving/fakes.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from lsp_assist.documents import Position
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, MarkerBackend, make_engine, snapshot

PARTS = ("debounce_ms", "queue_ms", "context_ms", "prefill_ms", "decode_ms")
SLACK_MS = 15.0
"""Room for the event loop and the thread hand-over between the measured marks."""


def _query(engine: CompletionEngine, uri: str, trigger: str = "invoked") -> CompletionQuery:
    return CompletionQuery(
        snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN, trigger=trigger
    )


async def test_ttft_counts_the_debounce(tmp_path: Path) -> None:
    backend = MarkerBackend(step_s=0.01, prefill_s=0.03)
    engine, uri = make_engine(tmp_path, backend, debounceMs=100)
    scheduler = Scheduler(engine)
    query = _query(engine, uri, "automatic")
    outcome = await scheduler.complete(query)
    scheduler.shutdown()
    assert outcome.text == "x0"
    assert outcome.ttft_ms >= 100 + 30
    assert outcome.debounce_ms >= 100
    assert outcome.prefill_ms >= 30 and outcome.decode_ms >= 2 * 10
    # the parts add up to the time to first token, and with the decode to the latency
    before_first = outcome.debounce_ms + outcome.queue_ms + outcome.context_ms
    assert abs(outcome.ttft_ms - (before_first + outcome.prefill_ms)) <= SLACK_MS
    assert outcome.latency_ms >= outcome.ttft_ms + outcome.decode_ms
    assert (
        abs(outcome.latency_ms - (outcome.debounce_ms + outcome.queue_ms + outcome.engine_ms))
        <= SLACK_MS
    )
    assert outcome.engine_ms >= outcome.context_ms + outcome.prefill_ms + outcome.decode_ms


async def test_ttft_counts_the_wait_behind_older_work(tmp_path: Path) -> None:
    backend = MarkerBackend(step_s=0.0)
    engine, uri = make_engine(tmp_path, backend)
    scheduler = Scheduler(engine)
    busy = asyncio.ensure_future(scheduler.run(time.sleep, 0.15))
    await asyncio.sleep(0.01)
    query = _query(engine, uri)
    outcome = await scheduler.complete(query)
    await busy
    scheduler.shutdown()
    assert outcome.text == "x0"
    assert outcome.queue_ms >= 100
    assert outcome.ttft_ms >= outcome.queue_ms
    assert outcome.debounce_ms < 50  # an invoked request is not debounced


async def test_parts_reach_the_metrics_record(tmp_path: Path) -> None:
    backend = MarkerBackend(step_s=0.005, prefill_s=0.02)
    engine, uri = make_engine(
        tmp_path, backend, metrics=True, debounceMs=40, cacheDir=str(tmp_path / "cache")
    )
    scheduler = Scheduler(engine)
    model = _query(engine, uri, "automatic")
    first = await scheduler.complete(model)
    assert first.text == "x0"
    # typing the suggestion's first character is answered from the type-through cache
    engine.session.buffers.change(
        uri, 2, [(Position(CURSOR_LINE, 8), Position(CURSOR_LINE, 8), "x")]
    )
    typed = CompletionQuery(
        snapshot=snapshot(engine, uri),
        line=CURSOR_LINE,
        column=CURSOR_COLUMN + 1,
        trigger="automatic",
    )
    hit = await scheduler.complete(typed)
    scheduler.shutdown()
    assert hit.cache_hit and hit.text == "0"
    assert engine.session.metrics is not None
    engine.session.metrics.flush()  # written on the log's own thread
    model_rec, hit_rec = (
        json.loads(x) for x in engine.session.metrics.path.read_text().splitlines()
    )
    for name in (*PARTS, "ttft_ms", "latency_ms", "engine_ms"):
        assert model_rec[name] == round(getattr(first, name), 3), name
    assert model_rec["ttft_ms"] >= 40 + 20
    assert model_rec["prompt_tokens"] == first.prompt_tokens > 0
    assert model_rec["output_tokens"] == 2
    # a hit: arrival to answer, no model parts
    assert hit_rec["cache_hit"] and hit_rec["trigger"] == "typethrough"
    assert hit_rec["ttft_ms"] == hit_rec["latency_ms"] > 0
    assert all(hit_rec[name] == 0 for name in ("queue_ms", "context_ms", "prefill_ms", "decode_ms"))
