"""Speculative drafting with a real draft model (issue 20, part 4), side by side.

In one run, on this machine's CPU, for a main model (Qwen2.5-Coder-1.5B by default)
and its draft model (Qwen2.5-Coder-0.5B, the same tokenizer):

1. the draft vocabulary check at load (``check_draft_vocab``), timed;
2. what a decode step costs: the main model's steps of 1 to 7 rows (1 = plain
   single-token decoding, 2 with one logit = a batch-invariant plain step, n with n
   logits = the pending token plus n - 1 drafts being verified) and the draft model's
   single-token step, interleaved, at the configured thread count;
3. fill-in-the-middle positions in CPython's standard library and large installed
   packages (``--positions``, half single-line: cursor inside a line, up to 32 tokens;
   half multi-line: cursor at a line's code, the suffix a dozen lines further, up to 64
   tokens), each decoded greedily by every arm in turn, the arm order rotating from one
   position to the next so that the machine's noise falls on every arm alike:

   - ``plain-single``: no drafting, single-token steps (the fastest plain decoding);
   - ``plain``: no drafting, batch-invariant steps (what the drafted arms must equal);
   - ``prompt-lookup``: prompt-lookup drafting (``draft: prompt-lookup``);
   - ``model-only``: the draft model alone;
   - ``model``: prompt lookup first, the draft model where it has no match
     (``draft: model``);
   - ``prompt-lookup-before``, ``model-only-before``: the same drafters with the span
     restarting at ``draftTokens`` after a rejection and no guess in padding rows (the
     drafting of commit ed6a94a), to measure what the restart span and the guesses do;

   and ``--copy-cases`` continuations that copy their context (a standard-library
   method written again after its own text), where drafting is expected to pay most;

   per arm decode tokens/s (P50, P90 over positions), the speed-up against both plain
   arms (median of the per-position ratios), acceptance, and how many outputs differ
   token for token from ``plain``;
4. the acceptance tracker on text where drafts fail (a table of random records):
   requests of one task type until drafting switches itself off below
   ``draftMinAcceptance``, for ``draft: model`` and prompt lookup;
5. memory: RSS of a process with the main model alone and with the pair (each in a
   fresh subprocess, after one generation), and KV bytes per token from each GGUF
   (layers x KV heads x head size x 2 x 2 bytes, f16) and measured from a saved state.

Run: .venv/bin/python benchmarks/bench_draft.py [--positions 32] [--threads 0]
     [--model GGUF] [--draft-model GGUF] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import pct  # noqa: E402

from lsp_assist.backends.base import GenerationRequest, GenerationResult  # noqa: E402
from lsp_assist.backends.drafting import check_draft_vocab  # noqa: E402
from lsp_assist.backends.llama import LocalBackend  # noqa: E402
from lsp_assist.config import ModelSettings  # noqa: E402

MODELS = Path.home() / ".cache" / "lsp-assist" / "models"
MAIN_GGUF = MODELS / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
DRAFT_GGUF = MODELS / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"

STDLIB_FILES = [
    "argparse.py",
    "asyncio/base_events.py",
    "typing.py",
    "pathlib.py",
    "subprocess.py",
    "logging/__init__.py",
    "email/message.py",
    "http/client.py",
    "inspect.py",
    "dataclasses.py",
    "tarfile.py",
    "configparser.py",
]
PACKAGE_FILES = [
    "numpy/_core/fromnumeric.py",
    "numpy/core/fromnumeric.py",
    "matplotlib/axes/_axes.py",
    "httpx/_client.py",
    "pygls/protocol/json_rpc.py",
    "lsprotocol/types.py",
    "fastapi/routing.py",
    "torch/nn/modules/module.py",
]

ARMS = [
    "plain-single",
    "plain",
    "prompt-lookup-before",
    "prompt-lookup",
    "model-only-before",
    "model-only",
    "model",
]
BEFORE = "-before"
"""An arm ending so runs its drafter as commit ed6a94a did: spans restarting at
``draftTokens`` and padding rows left as padding (``short_restart``, ``pad_guess`` off)."""
CAP_S = 1800.0
"""Time caps: a cap hit would stop a generation early, which is not what is measured."""


@dataclass
class Position:
    """One fill-in-the-middle task: where, what kind, and the prompt."""

    path: str
    line: int
    kind: str  # "line" or "block"
    tokens: list[int]
    max_tokens: int


def source_files() -> list[Path]:
    """The standard-library and installed-package files positions are taken from."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    purelib = Path(sysconfig.get_paths()["purelib"])
    found = [stdlib / f for f in STDLIB_FILES]
    found += [purelib / f for f in PACKAGE_FILES]
    return [p for p in found if p.is_file() and p.stat().st_size > 20_000]


def _fim(
    backend: LocalBackend, prefix: str, suffix: str, n_prefix: int, n_suffix: int
) -> list[int]:
    info = backend.info
    assert info.fim_prefix_id is not None and info.fim_suffix_id is not None
    assert info.fim_middle_id is not None
    pre = backend.tokenize(prefix[-6 * n_prefix :])[-n_prefix:]
    suf = backend.tokenize(suffix[: 6 * n_suffix])[:n_suffix]
    return [info.fim_prefix_id, *pre, info.fim_suffix_id, *suf, info.fim_middle_id]


def pick_positions(
    backend: LocalBackend, count: int, seed: int, n_prefix: int, n_suffix: int
) -> list[Position]:
    """Seeded FIM positions on code lines, alternating single-line and multi-line."""
    rng = random.Random(seed)
    files = source_files()
    rng.shuffle(files)
    out: list[Position] = []
    i = 0
    while len(out) < count and files:
        path = files[i % len(files)]
        i += 1
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        good = [
            n
            for n, text in enumerate(lines[60:-20], start=60)
            if 12 <= len(text.strip()) <= 90
            and not text.strip().startswith(("#", '"', "'", "@"))
            and lines[n - 1].strip()
        ]
        if not good:
            continue
        n = rng.choice(good)
        text = lines[n]
        indent = len(text) - len(text.lstrip())
        kind = "line" if len(out) % 2 == 0 else "block"
        if kind == "line":
            col = rng.randint(indent + 1, max(indent + 1, len(text) - 4))
            prefix = "\n".join(lines[:n]) + "\n" + text[:col]
            suffix = "\n".join(lines[n + 2 :])
            max_tokens = 32
        else:
            prefix = "\n".join(lines[:n]) + "\n" + text[:indent]
            suffix = "\n".join(lines[n + 12 :])
            max_tokens = 64
        tokens = _fim(backend, prefix, suffix, n_prefix, n_suffix)
        out.append(Position(str(path), n + 1, kind, tokens, max_tokens))
    return out


# --- step costs --------------------------------------------------------------------------


def step_costs(backend: LocalBackend, reps: int) -> dict[str, float]:
    """Median ms of main-model steps of 1-7 rows and of the draft model's 1-row step.

    Wall-clock, and process CPU time (``*_cpu``): with one thread the CPU time is what
    the step costs on an idle machine, whatever else the shared machine runs.
    """
    main = backend._engine
    draft = backend._draft_engine
    assert draft is not None
    text = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()[:4000]
    ctx = backend.tokenize(text)[:400]
    follow = ctx[200:210]
    kinds: list[tuple[str, Any, int, int, int]] = [
        ("main_1row", main, 1, 1, 1),
        ("main_plain_padded", main, 1, 1, main.min_rows),
    ]
    kinds += [(f"main_verify_{n}rows", main, n, n, main.min_rows) for n in range(2, 8)]
    # 8 rows and more take llama.cpp's tiled K-quant matmul: not batch-invariant
    kinds += [
        (f"main_verify_{n}rows", main, n, n, main.min_rows)
        for n in range(8, min(10, main.max_outputs) + 1)
    ]
    kinds += [("draft_1row", draft, 1, 1, 1), ("draft_2rows", draft, 2, 1, 1)]
    times: dict[str, list[float]] = {k[0]: [] for k in kinds}
    cpu: dict[str, list[float]] = {k[0]: [] for k in kinds}
    saved = main.min_rows
    try:
        for eng in (main, draft):
            eng.clear()
            eng.eval(ctx, n_logits=1)
        for rep in range(reps):
            order = kinds[rep % len(kinds) :] + kinds[: rep % len(kinds)]
            for name, eng, rows, logits, min_rows in order:
                eng.min_rows = min_rows
                eng.truncate(len(ctx))
                t0, c0 = time.perf_counter(), time.process_time()
                eng.eval(follow[:rows], n_logits=logits)
                times[name].append((time.perf_counter() - t0) * 1000.0)
                cpu[name].append((time.process_time() - c0) * 1000.0)
    finally:
        main.min_rows = saved
        main.clear()
        draft.clear()
    out = {k: statistics.median(v) for k, v in times.items()}
    out.update({f"{k}_cpu": statistics.median(v) for k, v in cpu.items()})
    return out


def floor_table(
    costs: dict[str, float], alpha: float, span_cap: int, suffix: str = ""
) -> list[dict[str, float]]:
    """Expected speed-up of k model drafts per step at acceptance ``alpha`` and at 1.0.

    Tokens per step: (1 - a^(k+1)) / (1 - a); cost: k draft steps plus a (k+1)-row
    verification, against one plain step (single-row and batch-invariant).
    """
    single = costs["main_1row" + suffix]
    padded = costs["main_plain_padded" + suffix]
    d = costs["draft_1row" + suffix]
    rows = []
    for k in range(1, span_cap + 1):
        verify = costs[f"main_verify_{k + 1}rows" + suffix]
        cost = k * d + verify
        per = [(1 - a ** (k + 1)) / (1 - a) if a < 1 else k + 1.0 for a in (alpha, 1.0)]
        rows.append(
            {
                "k": k,
                "step_ms": cost,
                "speedup_at_alpha_vs_single": per[0] * single / cost,
                "speedup_at_alpha_vs_padded": per[0] * padded / cost,
                "speedup_all_accepted_vs_single": per[1] * single / cost,
            }
        )
    return rows


# --- the arms ----------------------------------------------------------------------------


def decode_rate(result: GenerationResult) -> float | None:
    """Tokens/s after the first token (the prompt and the draft model's prompt excluded)."""
    decode_s = max(1e-6, (result.latency_ms - result.ttft_ms) / 1000.0)
    return (len(result.tokens) - 1) / decode_s if len(result.tokens) > 1 else None


def run_arm(backend: LocalBackend, arm: str, pos: Position) -> tuple[GenerationResult, float]:
    """One greedy generation of ``pos`` with the arm's drafting, and its CPU seconds."""
    eng = backend._engine
    saved = eng.min_rows
    mode = "off" if arm.startswith("plain") else arm.removesuffix(BEFORE)
    backend.set_draft_mode(mode)
    backend.pad_guess = backend.short_restart = not arm.endswith(BEFORE)
    if arm == "plain-single":
        eng.min_rows = 1
    try:
        c0 = time.process_time()
        result = backend.generate(
            GenerationRequest(
                prompt_tokens=pos.tokens,
                max_tokens=pos.max_tokens,
                draft=mode != "off",
                task_type="bench-draft",
                prompt_timeout_s=CAP_S,
                generation_timeout_s=CAP_S,
            )
        )
        return result, time.process_time() - c0
    finally:
        eng.min_rows = saved
        backend.pad_guess = backend.short_restart = True


def run_positions(
    backend: LocalBackend, positions: list[Position], arms: list[str], verbose: bool
) -> dict[str, Any]:
    """Every arm on every position, the arm order rotating per position."""
    rows: list[dict[str, Any]] = []
    for i, pos in enumerate(positions):
        # warm the KV cache with the prompt (both models) so no arm pays for it
        backend.set_draft_mode("model")
        backend.prefill(pos.tokens)
        order = arms[i % len(arms) :] + arms[: i % len(arms)]
        results: dict[str, GenerationResult] = {}
        cpu_s: dict[str, float] = {}
        for arm in order:
            results[arm], cpu_s[arm] = run_arm(backend, arm, pos)
        row: dict[str, Any] = {
            "path": pos.path,
            "line": pos.line,
            "kind": pos.kind,
            "prompt_tokens": len(pos.tokens),
        }
        for arm, res in results.items():
            row[arm] = {
                "tokens": len(res.tokens),
                "tok_s": decode_rate(res),
                # the prompt is cached: the call is one prompt token, then the decoding
                "cpu_tok_s": len(res.tokens) / cpu_s[arm] if res.tokens and cpu_s[arm] else None,
                "proposed": res.draft_proposed,
                "accepted": res.draft_accepted,
                "stop": res.stop_reason,
                "same_as_plain": res.tokens == results["plain"].tokens,
                "ttft_ms": res.ttft_ms,
            }
        rows.append(row)
        if verbose:
            cells = " ".join(
                f"{a}={row[a]['tok_s'] or 0:.1f}" + ("" if row[a]["same_as_plain"] else "!")
                for a in arms
            )
            print(
                f"  [{i + 1}/{len(positions)}] {Path(pos.path).name}:{pos.line} {pos.kind} "
                f"{row['plain']['tokens']} tok: {cells}",
                flush=True,
            )
    return summarise(rows, arms)


def summarise(rows: list[dict[str, Any]], arms: list[str]) -> dict[str, Any]:
    """Per arm: tok/s P50/P90, paired speed-ups, acceptance, mismatches."""
    usable = [r for r in rows if r["plain"]["tokens"] >= 8]
    out: dict[str, Any] = {"positions": len(rows), "timed_positions": len(usable), "arms": {}}
    for arm in arms:
        rates = [r[arm]["tok_s"] for r in usable if r[arm]["tok_s"]]
        cpu_rates = [r[arm]["cpu_tok_s"] for r in usable if r[arm]["cpu_tok_s"]]
        ratios: dict[str, list[float]] = {"plain-single": [], "plain": []}
        cpu_ratios: dict[str, list[float]] = {"plain-single": [], "plain": []}
        for r in usable:
            for base in ratios:
                if r[arm]["tok_s"] and r[base]["tok_s"]:
                    ratios[base].append(r[arm]["tok_s"] / r[base]["tok_s"])
                if r[arm]["cpu_tok_s"] and r[base]["cpu_tok_s"]:
                    cpu_ratios[base].append(r[arm]["cpu_tok_s"] / r[base]["cpu_tok_s"])
        proposed = sum(r[arm]["proposed"] for r in rows)
        accepted = sum(r[arm]["accepted"] for r in rows)
        out["arms"][arm] = {
            "tok_s_p50": pct(rates, 50),
            "tok_s_p90": pct(rates, 90),
            "tok_s_mean": statistics.fmean(rates) if rates else 0.0,
            "speedup_vs_single": statistics.median(ratios["plain-single"])
            if ratios["plain-single"]
            else 0.0,
            "speedup_vs_padded": statistics.median(ratios["plain"]) if ratios["plain"] else 0.0,
            "cpu_tok_s_p50": pct(cpu_rates, 50),
            "cpu_tok_s_p90": pct(cpu_rates, 90),
            "cpu_speedup_vs_single": _median(cpu_ratios["plain-single"]),
            "cpu_speedup_vs_padded": _median(cpu_ratios["plain"]),
            "acceptance": accepted / proposed if proposed else None,
            "proposed": proposed,
            "accepted": accepted,
            "mismatches": sum(not r[arm]["same_as_plain"] for r in rows),
            "by_kind": {kind: _kind(usable, arm, kind) for kind in ("line", "block", "copy")},
        }
    out["rows"] = rows
    return out


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def _kind(rows: list[dict[str, Any]], arm: str, kind: str) -> dict[str, float]:
    """CPU-time tok/s P50 and speed-ups of ``arm`` on the positions of one kind."""
    mine = [r for r in rows if r["kind"] == kind and r[arm]["cpu_tok_s"]]
    out = {"n": float(len(mine)), "cpu_tok_s_p50": pct([r[arm]["cpu_tok_s"] for r in mine], 50)}
    for base, key in (("plain-single", "vs_single"), ("plain", "vs_padded")):
        pairs = [r[arm]["cpu_tok_s"] / r[base]["cpu_tok_s"] for r in mine if r[base]["cpu_tok_s"]]
        out[key] = _median(pairs)
    return out


def copy_positions(backend: LocalBackend, count: int) -> list[Position]:
    """Continuations that copy their context: a standard-library method written again."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    out: list[Position] = []
    for name in ("argparse.py", "pathlib.py", "configparser.py"):
        text = (stdlib / name).read_text()
        matches = list(re.finditer(r"\n    def \w+\(self[^\n]*\n", text))
        for match in matches[len(matches) // 3 :][:2]:
            start = match.start() + 1
            body = text[start : start + 900]
            context = text[max(0, start - 600) : start + 900]
            head = body.split("\n", 1)[0]
            prompt = context + "\n\n    # the same method again, unchanged\n" + head + "\n"
            line = text[:start].count("\n") + 1
            out.append(Position(str(stdlib / name), line, "copy", backend.tokenize(prompt), 64))
    return out[:count]


# --- the acceptance tracker --------------------------------------------------------------


def switch_off(backend: LocalBackend, requests: int, mode: str) -> dict[str, Any]:
    """Requests on text where drafts fail, until the tracker switches drafting off.

    The text is a table of records drawn at random from a few names and roles: every
    short n-gram recurs with another continuation each time, so prompt lookup proposes
    often and is mostly wrong (about 0.47 accepted here with Qwen2.5-Coder-1.5B).
    """
    rng = random.Random(5)
    names = ["alice", "bob", "carol", "dave"]
    roles = ["admin", "guest", "owner", "staff", "viewer"]
    backend.set_draft_mode(mode)
    task = f"bench-records-{mode}"
    trail: list[dict[str, Any]] = []
    for i in range(requests):
        rows = [
            f'    ("{rng.choice(names)}", "{rng.choice(roles)}", {rng.randint(18, 90)}, '
            f'"{rng.choice(roles)}"),'
            for _ in range(40)
        ]
        tokens = backend.tokenize("USERS = [\n" + "\n".join(rows) + "\n")
        res = backend.generate(
            GenerationRequest(
                prompt_tokens=tokens,
                max_tokens=24,
                task_type=task,
                prompt_timeout_s=CAP_S,
                generation_timeout_s=CAP_S,
            )
        )
        trail.append(
            {
                "request": i + 1,
                "drafting": res.drafting,
                "proposed": res.draft_proposed,
                "accepted": res.draft_accepted,
                "rolling_rate": backend.acceptance.rate(task),
                "enabled_after": backend.acceptance.enabled(task),
            }
        )
    stats = backend.acceptance.stats()[task]
    first_off = next((t["request"] for t in trail if not t["enabled_after"]), None)
    return {"mode": mode, "trail": trail, "switched_off_after_request": first_off, **stats}


# --- memory ------------------------------------------------------------------------------


def _status_kb() -> dict[str, int]:
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0])
    return out


def memory_child(which: str, main: Path, draft: Path, ctx: int, threads: int) -> None:
    """Load the main model (``main``) or the pair (``pair``), generate once, print RSS."""
    settings = ModelSettings(
        context_length=ctx,
        threads=threads,
        draft="model" if which == "pair" else "off",
        draft_model_path=str(draft) if which == "pair" else "",
        prompt_timeout_ms=600_000,
        generation_timeout_ms=600_000,
    )
    backend = LocalBackend(settings, model_path=main)
    tokens = backend.tokenize(
        (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text()[:2000]
    )
    backend.generate(GenerationRequest(prompt_tokens=tokens, max_tokens=8))
    kv: dict[str, float] = {}
    engines = [("main", backend._engine)]
    if backend._draft_engine is not None:
        engines.append(("draft", backend._draft_engine))
    for name, eng in engines:
        eng.clear()
        eng.eval(tokens[:64], n_logits=0)
        small = len(eng.state_save().data)
        eng.eval(tokens[64:192], n_logits=0)
        big = len(eng.state_save().data)
        kv[name] = (big - small) / 128
    print(json.dumps({"which": which, **_status_kb(), "kv_state_bytes_per_token": kv}))
    backend.close()


def kv_bytes_from_gguf(path: Path) -> dict[str, int]:
    """KV bytes per token of an f16 cache, from the GGUF's attention metadata."""
    from lsp_assist.backends.gguf_meta import read_gguf_header

    header = read_gguf_header(path)
    arch = header.architecture
    layers = header.get_int(f"{arch}.block_count") or 0
    heads = header.get_int(f"{arch}.attention.head_count") or 1
    kv_heads = header.get_int(f"{arch}.attention.head_count_kv") or heads
    embd = header.get_int(f"{arch}.embedding_length") or 0
    head_dim = header.get_int(f"{arch}.attention.key_length") or embd // heads
    return {
        "layers": layers,
        "kv_heads": kv_heads,
        "head_dim": head_dim,
        "bytes_per_token_f16": layers * kv_heads * head_dim * 2 * 2,
    }


def memory(main: Path, draft: Path, ctx: int, threads: int) -> dict[str, Any]:
    """RSS with the main model alone and with the pair, each in a fresh process."""
    out: dict[str, Any] = {}
    for which in ("main", "pair"):
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--memory-child",
                which,
                "--model",
                str(main),
                "--draft-model",
                str(draft),
                "--context-length",
                str(ctx),
                "--threads",
                str(threads),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        out[which] = json.loads(proc.stdout.strip().splitlines()[-1])
    out["gguf_main"] = kv_bytes_from_gguf(main)
    out["gguf_draft"] = kv_bytes_from_gguf(draft)
    return out


# --- report ------------------------------------------------------------------------------


def report(figures: dict[str, Any]) -> None:
    """Print the figures as the tables of docs/performance.md."""
    print()
    print(f"models: {figures['main']} + draft {figures['draft']}; threads {figures['threads']}")
    v = figures["vocab_check"]
    print(f"draft vocabulary check: {v['result']} ({v['tokens']} tokens, {v['seconds']:.2f} s)")
    c = figures.get("costs_ms", {})
    print("step costs (ms, median): " + ", ".join(f"{k} {val:.1f}" for k, val in c.items()))
    pos = figures.get("positions", {"positions": 0, "timed_positions": 0, "arms": {}})
    print(
        f"\n{pos['positions']} positions ({pos['timed_positions']} timed: plain output >= 8 tokens)"
    )
    print("wall-clock (the shared machine's load in it):")
    print(
        "| arm | tok/s P50 | tok/s P90 | vs plain single-row "
        "| vs plain batch-invariant | acceptance | output differs from plain |"
    )
    print("|---|---|---|---|---|---|---|")
    for arm, a in pos["arms"].items():
        acc = (
            f"{a['acceptance']:.2f} ({a['accepted']}/{a['proposed']})"
            if a["acceptance"] is not None
            else "-"
        )
        print(
            f"| {arm} | {a['tok_s_p50']:.2f} | {a['tok_s_p90']:.2f} | "
            f"{a['speedup_vs_single']:.2f}x | {a['speedup_vs_padded']:.2f}x | {acc} | "
            f"{a['mismatches']} of {pos['positions']} |"
        )
    print("\nby CPU time (tokens per CPU second of each call; the shared machine's noise out):")
    kinds = [
        k
        for k in ("line", "block", "copy")
        if any(a["by_kind"][k]["n"] for a in pos["arms"].values())
    ]
    print(
        "| arm | tok/s P50 | tok/s P90 | vs plain single-row | vs plain batch-invariant | "
        + " | ".join(f"{k}: P50, vs single / padded" for k in kinds)
        + " |"
    )
    print("|---|---|---|---|---|" + "---|" * len(kinds))
    for arm, a in pos["arms"].items():
        cells = " | ".join(
            f"{a['by_kind'][k]['cpu_tok_s_p50']:.2f}, {a['by_kind'][k]['vs_single']:.2f}x / "
            f"{a['by_kind'][k]['vs_padded']:.2f}x"
            for k in kinds
        )
        print(
            f"| {arm} | {a['cpu_tok_s_p50']:.2f} | {a['cpu_tok_s_p90']:.2f} | "
            f"{a['cpu_speedup_vs_single']:.2f}x | {a['cpu_speedup_vs_padded']:.2f}x | {cells} |"
        )
    for key, label in (("floor", "wall-clock"), ("floor_cpu", "CPU time")):
        if key not in figures:
            continue
        print(
            f"\nmodel drafting, k drafts per step, from the step costs ({label}; "
            "alpha = measured acceptance of model-only):"
        )
        for row in figures[key]:
            print(
                f"  k={row['k']}: step {row['step_ms']:.0f} ms, expected "
                f"{row['speedup_at_alpha_vs_single']:.2f}x vs single-row "
                f"({row['speedup_at_alpha_vs_padded']:.2f}x vs padded), "
                f"{row['speedup_all_accepted_vs_single']:.2f}x if every draft were accepted"
            )
    for sw in figures.get("switch_off", []):
        trail = " ".join(
            f"{t['request']}:{'on' if t['drafting'] else 'off'}({t['accepted']}/{t['proposed']})"
            for t in sw["trail"]
        )
        print(
            f"\nacceptance tracker, {sw['mode']} drafting on random records: "
            f"switched off after "
            f"request {sw['switched_off_after_request']} (rate {sw['acceptance_rate']}); {trail}"
        )
    if "memory" in figures:
        m = figures["memory"]
        for which in ("main", "pair"):
            r = m[which]
            print(
                f"RSS {which}: {r['VmRSS'] / 1024:.0f} MiB (peak {r['VmHWM'] / 1024:.0f}; "
                f"anonymous {r['RssAnon'] / 1024:.0f}, file {r['RssFile'] / 1024:.0f}); "
                f"KV state bytes/token {r['kv_state_bytes_per_token']}"
            )
        for name in ("gguf_main", "gguf_draft"):
            g = m[name]
            print(
                f"{name}: {g['layers']} layers x {g['kv_heads']} KV heads x {g['head_dim']} "
                "x 2 x 2 B "
                f"= {g['bytes_per_token_f16']} B/token"
            )


def main() -> int:
    """Run the benchmark (or, with --memory-child, one memory measurement)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=MAIN_GGUF)
    parser.add_argument("--draft-model", type=Path, default=DRAFT_GGUF)
    parser.add_argument("--positions", type=int, default=32)
    parser.add_argument("--seed", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--context-length", type=int, default=2048)
    parser.add_argument("--prefix-tokens", type=int, default=512)
    parser.add_argument("--suffix-tokens", type=int, default=96)
    parser.add_argument("--draft-tokens", type=int, default=4)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--cost-reps", type=int, default=8)
    parser.add_argument("--switch-requests", type=int, default=10)
    parser.add_argument("--copy-cases", type=int, default=6)
    parser.add_argument(
        "--phases", default="memory,costs,positions,switch", help="which parts to run"
    )
    parser.add_argument("--memory-child", choices=["main", "pair"])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    if args.memory_child:
        memory_child(
            args.memory_child, args.model, args.draft_model, args.context_length, args.threads
        )
        return 0
    figures: dict[str, Any] = {
        "main": args.model.name,
        "draft": args.draft_model.name,
        "threads": args.threads or "all cores",
    }
    phases = set(args.phases.split(","))
    if "memory" in phases:
        figures["memory"] = memory(args.model, args.draft_model, args.context_length, args.threads)
    settings = ModelSettings(
        context_length=args.context_length,
        threads=args.threads,
        draft="model",
        draft_model_path=str(args.draft_model),
        draft_tokens=args.draft_tokens,
        batch_invariant=True,  # the arms' identity rests on it (off by default since 2026-12-07)
        prompt_timeout_ms=int(CAP_S * 1000),
        generation_timeout_ms=int(CAP_S * 1000),
        kv_cache_mb=64,
    )
    t0 = time.perf_counter()
    backend = LocalBackend(settings, model_path=args.model)
    figures["load_s"] = time.perf_counter() - t0
    try:
        assert backend._draft_engine is not None
        t0 = time.perf_counter()
        check_draft_vocab(backend._engine, backend._draft_engine)
        figures["vocab_check"] = {
            "result": "passed",
            "tokens": backend._engine.n_vocab,
            "seconds": time.perf_counter() - t0,
        }
        if "costs" in phases:
            figures["costs_ms"] = step_costs(backend, args.cost_reps)
        if "positions" in phases:
            positions = pick_positions(
                backend, args.positions, args.seed, args.prefix_tokens, args.suffix_tokens
            )
            positions += copy_positions(backend, args.copy_cases)
            arms = [a for a in args.arms.split(",") if a]
            if "plain" not in arms:
                arms.insert(0, "plain")
            figures["positions"] = run_positions(backend, positions, arms, not args.quiet)
        model_arm = figures.get("positions", {}).get("arms", {}).get("model-only")
        if model_arm and model_arm["acceptance"] and "costs_ms" in figures:
            span_cap = min(6, 2 * args.draft_tokens)
            alpha = model_arm["acceptance"]
            figures["floor"] = floor_table(figures["costs_ms"], alpha, span_cap)
            figures["floor_cpu"] = floor_table(figures["costs_ms"], alpha, span_cap, "_cpu")
        if "switch" in phases:
            figures["switch_off"] = [
                switch_off(backend, args.switch_requests, mode)
                for mode in ("model", "prompt-lookup")
            ]
        figures["backend_stats"] = {
            k: v for k, v in backend.stats().items() if k.startswith(("draft", "pad_"))
        }
    finally:
        backend.close()
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1, default=str))
    report(figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
