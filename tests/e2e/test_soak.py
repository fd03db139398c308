"""A short soak through the real server over stdio (issue 11): keystrokes, cancels, file
switches; every request answered, no errors, and memory, threads and descriptors flat.

At the end ``lspAssist.memory`` lists nothing over its bound, the backend's structures
included (the saved KV states against ``kvCacheMb``, the token-healing indexes), which
tests/serving/test_bounds.py cannot reach with its fake model.

The full soak is ``benchmarks/soak.py --requests 3000``; this one runs a few hundred
requests with SmolLM2 and the server under tracemalloc (a ``sitecustomize`` hook, one
frame), so growth is counted in live Python allocations, which neither the allocator's
page reuse nor the KV-state LRU's changing sizes (bounded by bytes) hide or fake the way
they do RSS and traced bytes.
"""

from __future__ import annotations

import pytest

from benchmarks.soak import run
from lsp_assist.backends.models import small_model_path

pytestmark = pytest.mark.slow

REQUESTS = 300
BLOCKS_PER_100 = 1500
"""Live allocations the server may gain per 100 requests once warm: its caches still
filling toward their caps add ~700 here; the old server, keeping a pygls future per
notification, gained ~2,400-2,600."""


@pytest.mark.timeout(1800)
def test_soak_answers_everything_and_holds_its_resources() -> None:
    report, growth, status = run(REQUESTS, str(small_model_path()), trace=True)
    assert report.requests == REQUESTS and report.switches >= REQUESTS // 25
    assert report.cancels >= REQUESTS // 7
    assert report.errors == []
    assert report.unanswered == 0
    assert report.shown + report.empty + report.cancelled == REQUESTS
    assert status["documents"] <= 3
    memory = status["memory"]
    sizes = {s["name"]: s for s in memory["structures"]}
    assert memory["over"] == [], [sizes[name] for name in memory["over"]]
    assert 0 < sizes["kv_states.bytes"]["size"] <= sizes["kv_states.bytes"]["bound"]
    assert sizes["healing.indexes"]["size"] == 1
    warm, last = report.samples[1], report.samples[-1]
    assert last["threads"] <= warm["threads"]
    assert last["fds"] <= warm["fds"], (report.fd_targets[1], report.fd_targets[-1])
    requests = last["requests"] - warm["requests"]
    blocks = last["traced_blocks"] - warm["traced_blocks"]
    assert blocks <= BLOCKS_PER_100 * requests / 100, "\n".join(growth)
