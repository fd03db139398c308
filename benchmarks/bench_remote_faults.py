"""How long the remote backend is held by a faulty server, with the documented settings.

For each fault of ``tests/backends/test_remote.py``'s FaultServer (silent, 200 then
junk, a drip of one byte a second from the start or after the first text), with the
default caps (promptTimeoutMs 5000, generationTimeoutMs 5000), read timeout (30 s) and
retries (2): how ``generate`` ends and after how long, the same for one server
tokenizer call, and the worst of five cancels (50-330 ms into the hold) to return.
A case still running after ``--limit`` seconds is reported as such (the thread is left
behind). Run:

    .venv/bin/python benchmarks/bench_remote_faults.py [--limit 40]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_assist.backends.base import GenerationRequest  # noqa: E402
from lsp_assist.backends.remote import RemoteBackend  # noqa: E402
from lsp_assist.config import ModelSettings  # noqa: E402
from tests.support.bounded import bounded  # noqa: E402
from tests.support.remote_servers import FaultServer, cancel_delays  # noqa: E402


def _outcome(value: Any) -> str:
    if isinstance(value, Exception):
        return f"{type(value).__name__}: {str(value)[:60]}"
    stop = getattr(value, "stop_reason", None)
    if stop is not None:
        return f"{stop} {value.text!r}"
    return f"{len(value)} tokens"


def _held(work: Any, limit: float) -> str:
    try:
        value, took = bounded(work, limit)
    except AssertionError:
        return f"still running after {limit:.0f} s"
    return f"{_outcome(value)}, {took:.2f} s"


def _row(fault: str, limit: float) -> str:
    """One fault: generate, a tokenizer call, the worst cancel of each."""
    server = FaultServer([fault], hold_s=limit + 5)
    settings = ModelSettings(backend="remote", remote_url=server.url, remote_api_key_env="")
    gen = RemoteBackend(settings, tokenizer="estimate")
    tok = RemoteBackend(dataclasses.replace(settings), tokenizer="server")
    prompt = gen.tokenize("def f(x):\n")
    row = [
        fault,
        _held(lambda: gen.generate(GenerationRequest(prompt_tokens=prompt)), limit),
        _held(lambda: tok.tokenize("import os\n"), limit),
    ]
    for backend, work in (
        (gen, lambda t: gen.generate(GenerationRequest(prompt_tokens=prompt, cancel=t))),
        (tok, lambda t: t.call(tok.tokenize, "x = 1")),
    ):
        backend.breaker.success()
        try:
            delays, _ = cancel_delays(server, work)
            row.append(f"{max(delays) * 1000:.1f} ms")
        except AssertionError:
            row.append("still running after 10 s")
    for backend in (gen, tok):
        backend.close()
    server.close()
    return " | ".join(row)


def main() -> None:
    """Print one row per fault."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--limit", type=float, default=40.0)
    args = parser.parse_args()
    print("fault | generate | server tokenizer call | cancel, generate | cancel, tokenizer")
    for fault in ("silent", "junk", "drip", "drip-after-text"):
        print(_row(fault, args.limit), flush=True)


if __name__ == "__main__":
    main()
