"""Benchmark the in-process backend with the embedded model (issue 4).

In one run, on this machine's CPU:

1. replayed typing: keystrokes typing real lines of this repository's files, one
   single-line completion request per keystroke, prompts built by the context engine
   (``--prompt engine``, the default when it is importable) or a fixed ~600-token stable
   prefix plus the growing line (``--prompt fixed``). Reports TTFT P50/P90, whole
   single-line suggestion P50, and the share of prompt tokens reused from the KV cache;
   then the same replay with KV reuse switched off (sampled: every Nth keystroke), side
   by side;
2. switching among three recently used files: TTFT of the first keystroke after a
   switch, against the typing median;
3. drafting: decode tokens/s with prompt-lookup drafting against none, on
   continuations that copy from their context (a function being duplicated), checking
   the outputs are identical, with the acceptance rate. The baseline is the fastest
   plain decoding (single-token steps, ``batch_invariant=False``, a second backend);
   identity is checked against plain batch-invariant decoding, the mode drafting runs in;
4. cancellation: from ``cancel()`` to ``generate`` returning (the model free again), P99.

Run: .venv/bin/python benchmarks/bench_backend.py [--keystrokes 240]
     [--prompt engine|fixed] [--model GGUF] [--threads 0] [--json FILE]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import re
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import pct  # noqa: E402

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult  # noqa: E402
from lsp_assist.backends.llama import LocalBackend  # noqa: E402
from lsp_assist.config import ModelSettings  # noqa: E402

FILES = [
    "lsp_assist/config.py",
    "lsp_assist/backends/kv_states.py",
    "lsp_assist/backends/drafting.py",
]


def typing_lines(text: str, count: int, rng: random.Random) -> list[int]:
    """Pick ``count`` code lines worth typing (20-70 chars, not comments or docstrings)."""
    lines = text.split("\n")
    good = [
        i
        for i, line in enumerate(lines)
        if 20 <= len(line.strip()) <= 70 and not line.strip().startswith(("#", '"', "'")) and i > 30
    ]
    rng.shuffle(good)
    return sorted(good[:count])


PromptFn = Callable[[Path, str, int, int], tuple[list[int], int]]


def fixed_prompts(backend: LocalBackend) -> PromptFn:
    """A ~600-token stable prefix (the file's head) followed by the line being typed."""
    bos = [backend.info.bos_id] if backend.info.bos_id is not None else []
    heads: dict[Path, list[int]] = {}

    def build(path: Path, text: str, line: int, col: int) -> tuple[list[int], int]:
        if path not in heads:
            heads[path] = bos + backend.tokenize(f"# file: {path.name}\n" + text[:2400])[:600]
        typed = text.split("\n")[line][:col]
        head = heads[path]
        return [*head, *backend.tokenize("\n" + typed)], len(head)

    return build


def engine_prompts(backend: LocalBackend) -> PromptFn:
    """Prompts from the project's context engine over an index of this repository."""
    from lsp_assist.config import ContextSettings, IndexSettings
    from lsp_assist.context import PromptMemory
    from lsp_assist.context.engine import ContextEngine
    from lsp_assist.context.model import Cursor
    from lsp_assist.index.workspace import WorkspaceIndex

    index = WorkspaceIndex([ROOT / "lsp_assist"], IndexSettings(watch=False))
    index.scan()
    engine = ContextEngine(index, backend, backend.info, ContextSettings(), relative=index.relative)
    memory = PromptMemory()  # what the session keeps between a file's completions
    opened: set[Path] = set()

    def build(path: Path, text: str, line: int, col: int) -> tuple[list[int], int]:
        if path not in opened:
            index.open_buffer(path, text)
            engine.note_opened(path)
            opened.add(path)
        lines = text.split("\n")
        typed = lines[line][:col]
        current = "\n".join([*lines[:line], typed, *lines[line + 1 :]])
        prompt = engine.build(
            Cursor(path=path, language="python", text=current, line=line, column=col),
            memory=memory,
        )
        memory.remember(prompt.note)
        return prompt.tokens, prompt.stable_prefix_len

    return build


def request(
    tokens: list[int], key: str, stable: int, *, max_tokens: int = 24, **kw: Any
) -> GenerationRequest:
    """A single-line completion request."""
    return GenerationRequest(
        prompt_tokens=tokens,
        max_tokens=max_tokens,
        stop=["\n"],
        cache_key=key,
        stable_prefix_len=stable,
        **kw,
    )


def replay(
    backend: LocalBackend,
    build: PromptFn,
    sessions: list[tuple[Path, str, int]],
    *,
    every: int = 1,
) -> dict[str, Any]:
    """Type the chosen lines keystroke by keystroke; one request per (sampled) keystroke."""
    ttft: list[float] = []
    ttft_in_line: list[float] = []
    evaluated: list[float] = []
    whole: list[float] = []
    prompt_tokens = 0
    reused = 0
    n = 0
    k_global = 0
    for path, text, line in sessions:
        target = text.split("\n")[line]
        indent = len(target) - len(target.lstrip())
        for col in range(indent, len(target) + 1):
            k_global += 1
            if k_global % every:
                continue
            tokens, stable = build(path, text, line, col)
            result = backend.generate(request(tokens, str(path), stable))
            ttft.append(result.ttft_ms)
            if col > indent:  # not the first keystroke of a line (the zone moved there)
                ttft_in_line.append(result.ttft_ms)
            evaluated.append(result.prompt_tokens - result.reused_tokens)
            whole.append(result.latency_ms)
            prompt_tokens += result.prompt_tokens
            reused += result.reused_tokens
            n += 1
    return {
        "requests": n,
        "ttft_p50_ms": pct(ttft, 50),
        "ttft_p90_ms": pct(ttft, 90),
        "ttft_p90_within_line_ms": pct(ttft_in_line, 90),
        "evaluated_tokens_p50": pct(evaluated, 50),
        "evaluated_tokens_p90": pct(evaluated, 90),
        "single_line_p50_ms": pct(whole, 50),
        "reuse_pct": 100.0 * reused / max(1, prompt_tokens),
        "mean_prompt_tokens": prompt_tokens / max(1, n),
    }


def file_switching(
    backend: LocalBackend, build: PromptFn, files: list[tuple[Path, str]], rounds: int
) -> dict[str, Any]:
    """Alternate among three files, typing one more keystroke where the user left off."""
    rng = random.Random(3)
    picks = {path: typing_lines(text, 1, rng) for path, text in files}
    col_of: dict[Path, int] = {}
    switch_ttft: list[float] = []
    reused: list[float] = []
    for r in range(rounds):
        for path, text in files:
            line = picks[path][0]
            target = text.split("\n")[line]
            col = col_of.get(path, len(target) - len(target.lstrip())) + 1
            col = min(col, len(target))
            col_of[path] = col
            tokens, stable = build(path, text, line, col)
            result = backend.generate(request(tokens, str(path), stable))
            if r > 0:  # the first visit of each file is a cold start, not a switch
                switch_ttft.append(result.ttft_ms)
                reused.append(100.0 * result.reused_tokens / max(1, result.prompt_tokens))
    return {
        "switches": len(switch_ttft),
        "switch_ttft_p50_ms": pct(switch_ttft, 50),
        "switch_ttft_p90_ms": pct(switch_ttft, 90),
        "switch_reuse_pct": statistics.mean(reused) if reused else 0.0,
    }


def copy_cases(backend: LocalBackend) -> list[list[int]]:
    """Prompts whose continuation copies their context: a function being duplicated."""
    bos = [backend.info.bos_id] if backend.info.bos_id is not None else []
    cases = []
    for name in ("lsp_assist/backends/kv_states.py", "lsp_assist/backends/drafting.py"):
        text = (ROOT / name).read_text()
        for match in list(re.finditer(r"\n    def \w+\(self[^\n]*\n", text))[2:5]:
            start = match.start() + 1
            body = text[start : start + 900]
            context = text[max(0, start - 600) : start + 900]
            head = body.split("\n", 1)[0]
            prompt = context + "\n\n    # the same method again, unchanged\n" + head + "\n"
            cases.append([*bos, *backend.tokenize(prompt)])
    return cases


def _decode_rate(result: GenerationResult) -> float | None:
    decode_s = max(1e-6, (result.latency_ms - result.ttft_ms) / 1000.0)
    return (len(result.tokens) - 1) / decode_s if len(result.tokens) > 1 else None


def drafting(
    backend: LocalBackend, max_tokens: int, single_row: LocalBackend | None = None
) -> dict[str, Any]:
    """Decode speed with and without prompt-lookup drafting on copying continuations.

    ``backend`` decodes batch-invariantly (plain steps padded to 2 rows); ``single_row``,
    the same model with ``batch_invariant=False``, gives the fastest plain decoding, which
    is the baseline the speed-up is measured against.
    """
    rates: dict[str, list[float]] = {"plain": [], "draft": [], "single": []}
    identical = identical_single = 0
    proposed = accepted = 0
    cases = copy_cases(backend)
    for tokens in cases:
        outputs: dict[str, GenerationResult] = {}
        runs = [("plain", backend, False), ("draft", backend, True)] * 2
        if single_row is not None:
            runs += [("single", single_row, False)] * 2
        for kind, which, draft in runs:
            result = which.generate(
                GenerationRequest(
                    prompt_tokens=tokens,
                    max_tokens=max_tokens,
                    draft=draft,
                    task_type="bench-copy",
                )
            )
            rate = _decode_rate(result)
            if rate is not None:
                rates[kind].append(rate)
            outputs[kind] = result
            if draft:
                proposed += result.draft_proposed
                accepted += result.draft_accepted
        identical += outputs["draft"].tokens == outputs["plain"].tokens
        if "single" in outputs:
            identical_single += outputs["draft"].tokens == outputs["single"].tokens
    median = {k: statistics.median(v) if v else 0.0 for k, v in rates.items()}
    baseline = median["single"] or median["plain"]
    return {
        "cases": len(cases),
        "tok_s_plain_single_row": median["single"],
        "tok_s_plain": median["plain"],
        "tok_s_prompt_lookup": median["draft"],
        "speedup": median["draft"] / baseline if baseline else 0.0,
        "speedup_vs_padded_plain": median["draft"] / median["plain"] if median["plain"] else 0.0,
        "identical_outputs": f"{identical}/{len(cases)}",
        "identical_to_single_row": f"{identical_single}/{len(cases)}" if single_row else "n/a",
        "acceptance_rate": accepted / max(1, proposed),
    }


def cancellation(
    backend: LocalBackend, build: PromptFn, files: list[tuple[Path, str]], n: int
) -> dict[str, Any]:
    """Cancel requests at random moments (prefill or decode); time until the model is free."""
    rng = random.Random(11)
    free_ms: list[float] = []
    phases = {"prefill": 0, "decode": 0}
    for i in range(n):
        path, text = files[i % len(files)]
        lines = typing_lines(text, 40, random.Random(i))
        line = lines[rng.randrange(len(lines))]
        tokens, _stable = build(path, text, line, len(text.split("\n")[line]))
        token = CancelToken()
        delay = rng.uniform(0.005, 0.25)
        timer = threading.Timer(delay, token.cancel)
        on_text: Callable[[str], None] | None = None
        if i % 2 == 0:  # a forced prefill, cancelled at a random moment
            backend._engine.truncate(rng.randrange(0, max(1, len(tokens) // 2)))
            timer.start()
        else:  # cancelled while decoding: 0-50 ms after the first text
            timer = threading.Timer(delay / 5, token.cancel)

            def on_text(_text: str, timer: threading.Timer = timer) -> None:
                if timer.ident is None:  # first text: start the cancel timer once
                    timer.start()

        result = backend.generate(
            GenerationRequest(
                prompt_tokens=tokens,
                max_tokens=64,
                cancel=token,
                cache_key=str(path),
                on_text=on_text,
            )
        )
        done = time.perf_counter()
        if timer.ident is not None:
            timer.join()
        if token.cancelled and result.stop_reason == "cancelled":
            free_ms.append((done - token.cancelled_at) * 1000.0)
            phases["decode" if result.ttft_ms else "prefill"] += 1
    return {
        "cancelled": len(free_ms),
        "in_prefill": phases["prefill"],
        "in_decode": phases["decode"],
        "cancel_to_free_p50_ms": pct(free_ms, 50),
        "cancel_to_free_p99_ms": pct(free_ms, 99),
        "cancel_to_free_max_ms": max(free_ms) if free_ms else 0.0,
    }


def main() -> int:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--model", default="")
    parser.add_argument("--prompt", choices=["engine", "fixed"], default="engine")
    parser.add_argument("--keystrokes", type=int, default=240)
    parser.add_argument("--no-reuse-every", type=int, default=8)
    parser.add_argument("--switch-rounds", type=int, default=8)
    parser.add_argument("--draft-tokens", type=int, default=64)
    parser.add_argument("--cancels", type=int, default=60)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--json", default="")
    args = parser.parse_args()

    from lsp_assist.backends.models import embedded_model_path

    model = Path(args.model) if args.model else embedded_model_path()
    settings = ModelSettings(
        context_length=args.context,
        threads=args.threads,
        prompt_timeout_ms=60_000,
        generation_timeout_ms=60_000,
    )
    t0 = time.perf_counter()
    backend = LocalBackend(settings, model_path=model)
    print(
        f"model {model.name}: loaded in {time.perf_counter() - t0:.1f} s; "
        f"{backend.info.architecture} {backend.info.quantization}, n_ctx {backend.n_ctx}"
    )
    build: PromptFn
    prompt_kind = args.prompt
    if prompt_kind == "engine":
        try:
            build = engine_prompts(backend)
        except Exception as exc:  # the context engine is another stage; fall back
            print(f"context engine unavailable ({type(exc).__name__}: {exc}); fixed prompts")
            prompt_kind = "fixed"
    if prompt_kind == "fixed":
        build = fixed_prompts(backend)
    files = [(ROOT / name, (ROOT / name).read_text()) for name in FILES]
    rng = random.Random(7)
    sessions: list[tuple[Path, str, int]] = []
    keystrokes = 0
    while keystrokes < args.keystrokes:
        for path, text in files:
            for line in typing_lines(text, 3, rng):
                target = text.split("\n")[line]
                sessions.append((path, text, line))
                keystrokes += len(target) - (len(target) - len(target.lstrip())) + 1
                if keystrokes >= args.keystrokes:
                    break
            if keystrokes >= args.keystrokes:
                break
    figures: dict[str, Any] = {"model": model.name, "prompt": prompt_kind, "keystrokes": keystrokes}

    # warm-up: first prompt of each file (the didOpen prefill in the server)
    for path, text in files:
        tokens, stable = build(path, text, 40, 0)
        backend.prefill(tokens[:stable] if stable else tokens, cache_key=str(path))

    t = time.perf_counter()
    figures["typing_reuse_on"] = replay(backend, build, sessions)
    print(f"typing, reuse on: {time.perf_counter() - t:.0f} s")
    backend.kv_reuse = False
    t = time.perf_counter()
    figures["typing_reuse_off"] = replay(backend, build, sessions, every=args.no_reuse_every)
    print(
        f"typing, reuse off (every {args.no_reuse_every}th keystroke): "
        f"{time.perf_counter() - t:.0f} s"
    )
    backend.kv_reuse = True
    figures["file_switch"] = file_switching(backend, build, files, args.switch_rounds)
    single_row = LocalBackend(
        dataclasses.replace(settings, batch_invariant=False), model_path=model
    )
    try:
        figures["drafting"] = drafting(backend, args.draft_tokens, single_row)
    finally:
        single_row.close()
    figures["cancel"] = cancellation(backend, build, files, args.cancels)
    figures["stats"] = {
        k: v for k, v in backend.stats().items() if k.startswith("kv_state") or k == "drafting"
    }
    backend.close()

    on, off = figures["typing_reuse_on"], figures["typing_reuse_off"]
    sw, dr, ca = figures["file_switch"], figures["drafting"], figures["cancel"]
    print()
    print(
        f"| typing replay ({prompt_kind} prompts, {keystrokes} keystrokes) | reuse on | reuse off |"
    )
    print("|---|---|---|")
    print(f"| requests | {on['requests']} | {off['requests']} (sampled) |")
    print(
        f"| mean prompt tokens | {on['mean_prompt_tokens']:.0f} | {off['mean_prompt_tokens']:.0f} |"
    )
    print(
        f"| TTFT P50 (target <= 100 ms) | {on['ttft_p50_ms']:.0f} ms "
        f"| {off['ttft_p50_ms']:.0f} ms |"
    )
    print(
        f"| TTFT P90 (target <= 250 ms) | {on['ttft_p90_ms']:.0f} ms "
        f"| {off['ttft_p90_ms']:.0f} ms |"
    )
    print(
        f"| single-line suggestion P50 (target <= 300 ms) | {on['single_line_p50_ms']:.0f} ms "
        f"| {off['single_line_p50_ms']:.0f} ms |"
    )
    print(
        f"| prompt tokens reused (target >= 90%) | {on['reuse_pct']:.1f}% "
        f"| {off['reuse_pct']:.1f}% |"
    )
    print(
        f"| TTFT P90 except the first keystroke of a line | {on['ttft_p90_within_line_ms']:.0f} ms "
        f"| {off['ttft_p90_within_line_ms']:.0f} ms |"
    )
    print(
        f"| prompt tokens evaluated per request P50 / P90 | {on['evaluated_tokens_p50']:.0f} / "
        f"{on['evaluated_tokens_p90']:.0f} | {off['evaluated_tokens_p50']:.0f} / "
        f"{off['evaluated_tokens_p90']:.0f} |"
    )
    ratio = sw["switch_ttft_p50_ms"] / max(1e-6, on["ttft_p50_ms"])
    print()
    print(
        f"file switch among 3 files: TTFT P50 {sw['switch_ttft_p50_ms']:.0f} ms, P90 "
        f"{sw['switch_ttft_p90_ms']:.0f} ms = {ratio:.2f}x the typing median (target <= 2x); "
        f"{sw['switch_reuse_pct']:.1f}% of the prompt reused after a switch"
    )
    print(
        f"drafting on copying continuations ({dr['cases']} cases): plain single-row "
        f"{dr['tok_s_plain_single_row']:.1f} tok/s, plain batch-invariant "
        f"{dr['tok_s_plain']:.1f}, prompt-lookup {dr['tok_s_prompt_lookup']:.1f} = "
        f"{dr['speedup']:.2f}x single-row plain (target >= 1.2x), "
        f"{dr['speedup_vs_padded_plain']:.2f}x batch-invariant plain; identical to "
        f"batch-invariant plain {dr['identical_outputs']} (target: all), to single-row plain "
        f"{dr['identical_to_single_row']}; acceptance {dr['acceptance_rate']:.2f}"
    )
    print(
        f"cancel to free ({ca['cancelled']} cancels, {ca['in_prefill']} in prefill): P50 "
        f"{ca['cancel_to_free_p50_ms']:.1f} ms, P99 {ca['cancel_to_free_p99_ms']:.1f} ms "
        f"(target <= 50 ms), max {ca['cancel_to_free_max_ms']:.1f} ms"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
