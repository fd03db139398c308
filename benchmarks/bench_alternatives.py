"""What alternatives cost: one-item vs N-item generations on the same prompts (local backend).

For a few prompts cut from this repository's sources, each request runs once with
``alternatives=1`` and once with N (the KV cache holds the prompt both times, as it
does when an editor cycles right after an automatic suggestion), and the script prints
the median latency of each, the extra time per extra item, and how many distinct items
came back. Run:

    .venv/bin/python benchmarks/bench_alternatives.py [--n 3] [--max-tokens 24]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from lsp_assist.backends.base import GenerationRequest
from lsp_assist.backends.llama import LocalBackend
from lsp_assist.backends.models import small_model_path
from lsp_assist.config import ModelSettings

REPO = Path(__file__).resolve().parents[1]
SOURCES = [
    "lsp_assist/backends/kv_states.py",
    "lsp_assist/serving/typethrough.py",
    "lsp_assist/documents/document.py",
    "lsp_assist/index/files.py",
]


def main() -> None:
    """Time one-item and N-item requests side by side."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    settings = ModelSettings(
        context_length=2048,
        threads=args.threads,
        prompt_timeout_ms=60_000,
        generation_timeout_ms=60_000,
    )
    backend = LocalBackend(settings, model_path=small_model_path())
    one: list[float] = []
    many: list[float] = []
    distinct: list[int] = []
    try:
        for i in range(args.prompts):
            text = (REPO / SOURCES[i % len(SOURCES)]).read_text()
            cut = 600 + 150 * (i // len(SOURCES))
            prompt = backend.tokenize(text[:cut])
            backend.prefill(prompt)  # both runs start from the cached prompt
            for n, out in ((1, one), (args.n, many)):
                began = time.perf_counter()
                result = backend.generate(
                    GenerationRequest(
                        prompt_tokens=prompt, max_tokens=args.max_tokens, alternatives=n
                    )
                )
                out.append((time.perf_counter() - began) * 1000)
            items = {result.text, *(b.text for b in result.alternatives)}
            distinct.append(len({t.strip() for t in items if t.strip()}))
    finally:
        backend.close()
    m1, mn = statistics.median(one), statistics.median(many)
    print(f"SmolLM2, {args.prompts} prompts, maxTokens {args.max_tokens}, threads {args.threads}")
    print(f"{'items':>6} {'median ms':>10}")
    print(f"{1:>6} {m1:>10.1f}")
    print(f"{args.n:>6} {mn:>10.1f}")
    print(f"extra per extra item: {(mn - m1) / max(1, args.n - 1):.1f} ms")
    print(f"distinct non-empty items (of {args.n}): {distinct}")


if __name__ == "__main__":
    main()
