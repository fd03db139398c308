"""What a decode step of n rows costs in llama.cpp itself, below lsp-assist's engine.

Speculative drafting pays only where verifying k drafted tokens (a step of k + 1 rows)
costs little more than a one-row step. This times ``llama_decode`` directly through
llama-cpp-python's low-level API (no lsp-assist code: no padding, no batch invariance,
no sampling), after a real-code prompt, for n = 1 .. 10 rows with logits on every row
(as verification needs), each the median of ``--reps`` runs with the rows removed from
the KV cache after each. Prints ms per step and the cost of each extra row against the
one-row step. A script, not part of ``make test``:

    .venv/bin/python benchmarks/bench_rows.py --model GGUF [--threads 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sysconfig
import time
from pathlib import Path

import llama_cpp
from llama_cpp import llama_cpp as ll

SOURCE = Path(sysconfig.get_paths()["stdlib"]) / "asyncio" / "queues.py"


def main() -> int:
    """Time n-row decode steps and print them side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--prompt-tokens", type=int, default=400)
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    llm = llama_cpp.Llama(
        args.model,
        n_ctx=2048,
        n_batch=512,
        n_threads=args.threads,
        n_threads_batch=args.threads,
        logits_all=True,
        verbose=False,
    )
    ctx = llm._ctx.ctx  # the raw context: what is timed
    tokens = llm.tokenize(SOURCE.read_text().encode())[: args.prompt_tokens]
    llm.eval(tokens)
    base = len(tokens)
    memory = ll.llama_get_memory(ctx)

    def step(rows: int) -> float:
        batch = ll.llama_batch_init(16, 0, 1)
        for i in range(rows):
            batch.token[i] = tokens[i % len(tokens)]
            batch.pos[i] = base + i
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = 0
            batch.logits[i] = 1
        batch.n_tokens = rows
        began = time.perf_counter()
        rc = ll.llama_decode(ctx, batch)
        elapsed = (time.perf_counter() - began) * 1000
        ll.llama_batch_free(batch)
        ll.llama_memory_seq_rm(memory, 0, base, -1)
        if rc != 0:
            raise SystemExit(f"llama_decode failed with {rc}")
        return elapsed

    print(f"{Path(args.model).name}, {args.threads} threads, after {base} prompt tokens")
    print(f"{'rows':>4} {'ms (median)':>12} {'x one row':>10} {'ms per extra row':>17}")
    one = 0.0
    for rows in range(1, 11):
        ms = statistics.median(step(rows) for _ in range(args.reps))
        one = one or ms
        extra = (ms - one) / (rows - 1) if rows > 1 else 0.0
        print(f"{rows:>4} {ms:>12.1f} {ms / one:>9.2f}x {extra:>17.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
