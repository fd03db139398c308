"""Typing replay through the real server over stdio (issue 10, part 2).

``lsp-assist serve`` is started with the workspace set to the installed standard
library, and a real LSP client (pygls) types into real files as an editor does: a
real code line is blanked (its indentation kept), then retyped one character at a
time, with one ``didChange`` and one automatic inline completion request per
keystroke, waiting for each answer. Lines are picked in turn from each file
(seeded), until ``--keystrokes`` requests have been sent.

Reported for the keystrokes within a line (the first request at each new line is
excluded): the share of model requests that evaluate <= 32 new tokens
(``prompt_tokens - reused_tokens``; target >= 99%), the number of re-prefills (more
than 32 new tokens), the client-side round trip P50/P90/P99 (targets P90 <= 150 ms,
P99 <= 300 ms) and the server's TTFT P50/P90/P99. The first requests at each line are
reported apart.

With ``--block N`` (N > 1) each pick is N consecutive code lines instead: they are
deleted, then typed one after another as in an editor with auto-indent (Enter puts the
next line's indentation at once, then its characters): the first keystroke of each new
line is the case of issue 20, part 5 (a new line must only append to the prompt). Those
first keystrokes are reported apart ("new line"), and the answer percentiles over all
requests but the first of each block (the cursor's jump to a new place) beside them.

Settings are the defaults but ``promptTimeoutMs`` (60 s here, so that the cold prompt
of a new line completes on a loaded machine) and ``logPrompts`` (the whole text of an
early-answered suggestion is read back from the metrics log); --setting KEY=VALUE adds
others, e.g. ``answerAfterMs=0`` for the whole suggestion in every answer.

With early answers (docs/serving.md) the round trip is the answer with the suggestion's
start; the "whole or superseded" row adds the time the rest took after it (from the
metrics log, joined by request id) until it was written or the next keystroke that
missed the cache cancelled it (this replay types on at once). The whole suggestion's
own time is the round trip of a run with ``answerAfterMs=0``.

Run: .venv/bin/python benchmarks/bench_typing.py [--keystrokes 520] [--model GGUF]
     [--file asyncio/base_events.py]... [--seed 5] [--setting KEY=VALUE]... [--pause-ms MS]
     [--block N] [--json FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_common import metrics_by_id, parse_setting_args, pct  # noqa: E402
from lsprotocol import types  # noqa: E402

from lsp_assist.evaluation.client import (  # noqa: E402
    inline_request,
    line_edit,
    range_edit,
    rest_cursor,
    start_server,
    stop_server,
    wait_loaded,
)

FILES = ["asyncio/base_events.py", "tarfile.py", "argparse.py"]
EXCLUDE = ["test/**", "tests/**", "idlelib/**", "lib2to3/**", "turtledemo/**", "ensurepip/**"]
NEW_TOKENS = 32
PROMPT_TIMEOUT_MS = 60_000
"""The cold prompt of a new line must complete, even on a loaded machine: with the
default 5 s a timed-out prefill is thrown away and every keystroke starts again."""


def ordinary(line: str) -> bool:
    """True for a line of ordinary code inside a function (20-79 characters)."""
    stripped = line.strip()
    return (
        line.startswith("        ")
        and 20 <= len(stripped) <= 79
        and not stripped.startswith(("#", '"', "'", "@"))
        and not stripped.endswith(("\\", ","))
    )


def pick_lines(text: str, rng: random.Random, count: int, block: int = 1) -> list[int]:
    """Return ``count`` random first lines of ``block`` consecutive ordinary code lines."""
    lines = text.split("\n")
    ok = [
        i
        for i in range(len(lines) - block + 1)
        if all(ordinary(lines[i + j]) for j in range(block))
    ]
    if block == 1:
        return rng.sample(ok, min(count, len(ok)))  # the picks of the figures recorded so far
    picked: list[int] = []
    for i in rng.sample(ok, len(ok)):
        if len(picked) == count:
            break
        if all(abs(i - p) >= block for p in picked):  # blocks never overlap
            picked.append(i)
    return picked


async def run(
    model: str,
    keystrokes: int,
    files: list[str],
    seed: int,
    extra: dict[str, Any],
    pause_s: float = 0.0,
    block: int = 1,
    root: Path | None = None,
    rest_s: float = 0.0,
    next_edits: bool = False,
) -> dict[str, Any]:
    """Replay the typing and return one record per request.

    ``root`` is the workspace the files are relative to (default: the standard library).
    ``rest_s``: at each jump the cursor rests this long before the user edits (the editor
    reports it with lspAssist/didMoveCursor; the wait ends early when the server's
    prefill there is done); 0: no rest, no report (the user types at once).
    ``next_edits``: after each answer, ask for next edits at the cursor
    (``textDocument/copilotInlineEdit``, as the Neovim plugin does after a change) and
    wait for them: with ``nextEdit`` ``model`` or ``both`` the model rewrites between
    keystrokes, which must not change what the next completion reuses.
    """
    stdlib = root or Path(sysconfig.get_paths()["stdlib"]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-typing-"))
    options: dict[str, Any] = {
        "cacheDir": str(tmp / "cache"),
        "excludeGlobs": EXCLUDE,
        "watch": False,
        **extra,
    }
    if model:
        options["modelPath"] = model
    # the server imports lsp_assist from the checkout this script sits in
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    client, _ = await start_server("bench-typing", stdlib, options, env=env)

    try:
        await wait_loaded(client)
    except RuntimeError as exc:
        raise SystemExit(str(exc)) from exc

    rng = random.Random(seed)
    texts = {name: (stdlib / name).read_text(encoding="utf-8") for name in files}
    plan: list[tuple[str, int]] = []
    picks = {name: pick_lines(texts[name], rng, 40, block) for name in files}
    budget = 0
    while budget < keystrokes:
        progressed = False
        for name in files:
            if picks[name] and budget < keystrokes:
                line = picks[name].pop(0)
                plan.append((name, line))
                lines_of = texts[name].split("\n")[line : line + block]
                budget += sum(len(text.strip()) + 1 for text in lines_of)
                progressed = True
        if not progressed:
            break
    # as a user works: one file after the other, each file's lines top to bottom
    plan.sort(key=lambda p: (files.index(p[0]), p[1]))

    records: list[dict[str, Any]] = []
    versions: dict[str, int] = {}
    sent = 0
    for name, line in plan:
        if sent >= keystrokes:
            break
        path = stdlib / name
        uri = path.as_uri()
        if name not in versions:
            versions[name] = 1
            client.text_document_did_open(
                types.DidOpenTextDocumentParams(
                    text_document=types.TextDocumentItem(
                        uri=uri, language_id="python", version=1, text=texts[name]
                    )
                )
            )
        originals = texts[name].split("\n")[line : line + block]
        first_indent = len(originals[0]) - len(originals[0].lstrip())
        rested: dict[str, Any] = {}
        if rest_s > 0:
            rested = await rest_cursor(
                client, uri, line, first_indent, version=versions[name], timeout=rest_s
            )
        versions[name] += 1
        # the block's lines deleted, the first one's indentation left
        client.text_document_did_change(
            range_edit(
                uri,
                versions[name],
                (line, 0),
                (line + len(originals) - 1, len(originals[-1])),
                " " * first_indent,
            )
        )
        for j, original in enumerate(originals):
            row = line + j
            indent = len(original) - len(original.lstrip())
            if j > 0:
                # Enter with auto-indent: the next line and its indentation at once
                versions[name] += 1
                above = originals[j - 1]
                client.text_document_did_change(
                    line_edit(
                        uri, versions[name], row - 1, len(above), len(above), "\n" + " " * indent
                    )
                )
            for k in range(indent, len(original) + 1):
                if k > indent:
                    if pause_s:
                        await asyncio.sleep(pause_s)  # the user's time between keystrokes
                    versions[name] += 1
                    client.text_document_did_change(
                        line_edit(uri, versions[name], row, k - 1, k - 1, original[k - 1])
                    )
                suggestion, elapsed, last = await inline_request(
                    client, uri, row, k, automatic=True
                )
                records.append(
                    {
                        "request_id": str(last.get("request_id", "")),
                        "pending": bool(last.get("pending")),
                        "file": name,
                        "line": row + 1,
                        "column": k + 1,
                        "first_at_line": k == indent,
                        "jump": j == 0 and k == indent,
                        # the prefill the rest got done ({}: none, or not within the rest)
                        "rest_prefill": rested if j == 0 and k == indent else {},
                        "client_ms": elapsed,
                        "suggestion": suggestion,
                        "cache_hit": bool(last.get("cache_hit")),
                        "skipped": str(last.get("skipped", "")),
                        "prompt_tokens": int(last.get("prompt_tokens", 0)),
                        "reused_tokens": int(last.get("reused_tokens", 0)),
                        "ttft_ms": float(last.get("ttft_ms", 0.0)),
                        "latency_ms": float(last.get("latency_ms", 0.0)),
                        "whole_ms": float(last.get("whole_ms", last.get("latency_ms", 0.0))),
                        "answered_early": False,
                        "layers": last.get("layers", {}),
                        "error": str(last.get("error", "")),
                    }
                )
                sent += 1
                if next_edits:
                    edits = await client.protocol.send_request_async(
                        "textDocument/copilotInlineEdit",
                        {
                            "textDocument": {"uri": uri, "version": versions[name]},
                            "position": {"line": row, "character": k},
                            "context": {"triggerKind": 2},
                        },
                    )
                    records[-1]["next_edits"] = len(getattr(edits, "edits", None) or [])
    await stop_server(client)
    join_metrics(records, tmp / "cache")
    return {"records": records, "lines": len({(r["file"], r["line"]) for r in records})}


def join_metrics(records: list[dict[str, Any]], cache: Path) -> None:
    """Fill early answers' figures from the metrics log (recorded when the whole was written).

    Every record then has ``whole_client_ms``: the round trip plus the time the rest of an
    early-answered suggestion took after the answer (the round trip itself otherwise).
    """
    logged = metrics_by_id(cache)
    for r in records:
        found = logged.get(r["request_id"])
        if found is not None and r["pending"]:
            r["cache_hit"] = found.cache_hit
            r["prompt_tokens"] = found.prompt_tokens
            r["reused_tokens"] = found.reused_tokens
            r["ttft_ms"] = found.ttft_ms
            r["latency_ms"] = found.latency_ms
            r["layers"] = dict(found.layer_tokens)
            r["error"] = found.error
        if found is not None:
            r["whole_ms"] = found.whole_ms or found.latency_ms
            r["answered_early"] = found.answered_early
            r["cancelled"] = found.cancelled
            r["whole_chars"] = len(found.completion) if found.completion else None
        rest = max(0.0, r["whole_ms"] - r["latency_ms"]) if r["answered_early"] else 0.0
        r["whole_client_ms"] = r["client_ms"] + rest


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the figures over the records."""
    within = [r for r in records if not r["first_at_line"]]
    first = [r for r in records if r["first_at_line"]]
    model = [r for r in within if r["prompt_tokens"] and not r["cache_hit"] and not r["skipped"]]
    new = [r["prompt_tokens"] - r["reused_tokens"] for r in model]
    small = sum(1 for n in new if n <= NEW_TOKENS)
    client = [r["client_ms"] for r in within]
    whole = [r["whole_client_ms"] for r in within]
    early = [r for r in model if r["answered_early"]]
    ttft = [r["ttft_ms"] for r in model]
    first_model = [r for r in first if r["prompt_tokens"] and not r["cache_hit"]]
    new_line = [r for r in first if not r["jump"]]
    new_line_model = [r for r in new_line if r["prompt_tokens"] and not r["cache_hit"]]
    no_jump = [r["client_ms"] for r in records if not r["jump"]]
    jumps = [r for r in records if r["jump"]]
    return {
        "jumps": len(jumps),
        "jump_client_ms": [round(r["client_ms"]) for r in jumps],
        "jump_new_tokens": [r["prompt_tokens"] - r["reused_tokens"] for r in jumps],
        "new_lines": len(new_line),
        "new_line_client_p50": pct([r["client_ms"] for r in new_line], 50),
        "new_line_client_p90": pct([r["client_ms"] for r in new_line], 90),
        "new_line_client_p99": pct([r["client_ms"] for r in new_line], 99),
        "new_line_new_tokens_max": max(
            (r["prompt_tokens"] - r["reused_tokens"] for r in new_line_model), default=0
        ),
        "no_jump_requests": len(no_jump),
        "no_jump_client_p50": pct(no_jump, 50),
        "no_jump_client_p90": pct(no_jump, 90),
        "no_jump_client_p99": pct(no_jump, 99),
        "requests": len(records),
        "within_line": len(within),
        "first_at_line": len(first),
        "model_requests_within": len(model),
        "typethrough_hits_within": sum(1 for r in within if r["cache_hit"]),
        "skipped_within": sum(1 for r in within if r["skipped"]),
        "small_share": small / len(model) if model else 0.0,
        "re_prefills": len(model) - small,
        "new_tokens_p50": statistics.median(new) if new else 0,
        "new_tokens_max": max(new) if new else 0,
        "client_p50": pct(client, 50),
        "client_p90": pct(client, 90),
        "client_p99": pct(client, 99),
        "whole_p50": pct(whole, 50),
        "whole_p90": pct(whole, 90),
        "whole_p99": pct(whole, 99),
        "answered_early_within": len(early),
        "early_shown_chars_mean": statistics.mean(len(r["suggestion"]) for r in early)
        if early
        else 0,
        "early_whole_chars_mean": statistics.mean(r["whole_chars"] or 0 for r in early)
        if early
        else 0,
        "ttft_p50": pct(ttft, 50),
        "ttft_p90": pct(ttft, 90),
        "ttft_p99": pct(ttft, 99),
        "first_client_p50": pct([r["client_ms"] for r in first], 50),
        "first_new_tokens_p50": statistics.median(
            [r["prompt_tokens"] - r["reused_tokens"] for r in first_model]
        )
        if first_model
        else 0,
        "prompt_tokens_mean": statistics.mean(r["prompt_tokens"] for r in model) if model else 0,
        "shown_chars_mean": statistics.mean(len(r["suggestion"]) for r in within) if within else 0,
        "errors": sum(1 for r in records if r["error"]),
    }


def main() -> int:
    """Parse flags, run, print the figures against the targets."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="GGUF (default: the embedded model)")
    parser.add_argument("--keystrokes", type=int, default=520)
    parser.add_argument("--file", action="append", default=[], help="stdlib file (repeatable)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument(
        "--setting",
        action="append",
        default=[f"promptTimeoutMs={PROMPT_TIMEOUT_MS}", "logPrompts=true"],
        metavar="KEY=VALUE",
        help="an initializationOptions entry (repeatable; values parsed as JSON when they can be)",
    )
    parser.add_argument(
        "--pause-ms",
        type=float,
        default=0.0,
        help="wait this long after each answer before the next keystroke (default 0: type on "
        "at once, the worst case for early answers, whose rest the next keystroke cancels)",
    )
    parser.add_argument(
        "--block",
        type=int,
        default=1,
        help="consecutive lines per pick, typed one after another (default 1: single lines)",
    )
    parser.add_argument(
        "--rest-ms",
        type=float,
        default=0.0,
        help="at each jump the cursor rests this long before the user edits, reported with "
        "lspAssist/didMoveCursor as the editors do (default 0: no rest, no report)",
    )
    parser.add_argument(
        "--next-edits",
        action="store_true",
        help="after each answer ask for next edits (textDocument/copilotInlineEdit) and wait "
        "for them, as the Neovim plugin asks after a change; with --setting nextEdit=both "
        "the model rewrites between keystrokes",
    )
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    extra = parse_setting_args(args.setting)
    load = os.getloadavg()[0]
    out = asyncio.run(
        run(
            args.model,
            args.keystrokes,
            args.file or FILES,
            args.seed,
            extra,
            pause_s=args.pause_ms / 1000,
            block=max(1, args.block),
            rest_s=args.rest_ms / 1000,
            next_edits=args.next_edits,
        )
    )
    s = summarize(out["records"])
    print(
        f"lsp_assist from {ROOT}; {s['requests']} requests over {out['lines']} lines; "
        f"load {load:.2f} -> {os.getloadavg()[0]:.2f}"
    )
    rows = [
        ("keystrokes within a line", f"{s['within_line']}", ""),
        (
            "  to the model / type-through / skipped",
            f"{s['model_requests_within']}/{s['typethrough_hits_within']}/{s['skipped_within']}",
            "",
        ),
        (f"model requests <= {NEW_TOKENS} new tokens", f"{s['small_share']:.1%}", ">= 99%"),
        ("re-prefills (> 32 new tokens)", f"{s['re_prefills']}", "0"),
        ("new tokens P50 / max", f"{s['new_tokens_p50']:.0f} / {s['new_tokens_max']}", ""),
        ("client round trip P50 (ms)", f"{s['client_p50']:.0f}", ""),
        ("client round trip P90 (ms)", f"{s['client_p90']:.0f}", "<= 150"),
        ("client round trip P99 (ms)", f"{s['client_p99']:.0f}", "<= 300"),
        ("  of which answered early (answerAfterMs)", f"{s['answered_early_within']}", ""),
        (
            "  early: chars answered / whole, mean",
            f"{s['early_shown_chars_mean']:.1f} / {s['early_whole_chars_mean']:.1f}",
            "",
        ),
        (
            "suggestion whole or superseded P50/P90/P99",
            f"{s['whole_p50']:.0f} / {s['whole_p90']:.0f} / {s['whole_p99']:.0f}",
            "",
        ),
        (
            "TTFT P50 / P90 / P99 (ms)",
            f"{s['ttft_p50']:.0f} / {s['ttft_p90']:.0f} / {s['ttft_p99']:.0f}",
            "",
        ),
        ("first request at a line: client P50 (ms)", f"{s['first_client_p50']:.0f}", ""),
        ("first request at a line: new tokens P50", f"{s['first_new_tokens_p50']:.0f}", ""),
        ("prompt tokens, mean", f"{s['prompt_tokens_mean']:.0f}", ""),
    ]
    if s["new_lines"]:
        rows += [
            ("new line (Enter, auto-indent): requests", f"{s['new_lines']}", ""),
            (
                "  client P50 / P90 / P99 (ms)",
                f"{s['new_line_client_p50']:.0f} / {s['new_line_client_p90']:.0f} / "
                f"{s['new_line_client_p99']:.0f}",
                "",
            ),
            ("  new tokens, max", f"{s['new_line_new_tokens_max']}", ""),
            (
                "all but the jumps: client P90 / P99 (ms)",
                f"{s['no_jump_client_p90']:.0f} / {s['no_jump_client_p99']:.0f}",
                "150 / 300",
            ),
        ]
    rows += [
        ("the jumps: client ms", " ".join(str(x) for x in s["jump_client_ms"]), ""),
        ("the jumps: new tokens", " ".join(str(x) for x in s["jump_new_tokens"]), ""),
        ("chars shown per answer within a line, mean", f"{s['shown_chars_mean']:.1f}", ""),
        ("requests with an error (all)", f"{s['errors']}", "0"),
    ]
    print(f"{'measure':<44}{'value':>16}{'target':>10}")
    for name, value, target in rows:
        print(f"{name:<44}{value:>16}{target:>10}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": s, **out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
