"""``lsp-assist demo``: drive ``lsp-assist serve`` as an editor would, over real JSON-RPC.

Starts the server over stdio, initializes it, opens a file of the demo workspace,
reports the cursor where it rests (the server evaluates the prompt there), asks for an
inline completion at it, then types a character and asks again (the KV
cache should make the second one fast), and prints the suggestion, the latency and the
tokens each context layer used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

# line_edit and inline_request are imported from here by the benchmark scripts
from lsp_assist.evaluation.client import (
    command,
    inline_request,
    line_edit,
    open_document,
    rest_cursor,
    start_server,
    stop_server,
)

__all__ = ["inline_request", "line_edit"]

DEMO_FILE = "shop/checkout.py"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the demo subcommand."""
    parser = sub.add_parser(
        "demo", help="run the server on the demo workspace and show a completion"
    )
    parser.add_argument("--workspace", type=Path, help="workspace folder (default: the demo shop)")
    parser.add_argument("--file", default=DEMO_FILE, help="file to open, relative to the workspace")
    parser.add_argument("--line", type=int, help="1-based line (default: the file's last line)")
    parser.add_argument("--col", type=int, help="1-based column (default: end of that line)")
    parser.add_argument("--model", help="model preset or GGUF path (default: coder-0.5b)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a server setting by its camelCase key (repeatable), e.g. --setting "
        "promptTimeoutMs=60000 on a busy machine",
    )
    parser.set_defaults(func=run)


def _options(items: list[str]) -> dict[str, Any]:
    """Return the demo's initialization options: its budget, then each --setting."""
    options: dict[str, Any] = {"contextBudget": 1024}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"lsp-assist demo: --setting {item!r} is not KEY=VALUE")
        try:
            options[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            options[key.strip()] = value
    return options


def default_workspace() -> Path:
    """Return the demo workspace shipped in the repository's docs/examples/shop."""
    return Path(__file__).resolve().parents[2] / "docs" / "examples" / "shop"


async def drive(args: argparse.Namespace) -> dict[str, Any]:
    """Run one editor session against the server and return what it saw."""
    workspace = (args.workspace or default_workspace()).resolve()
    path = workspace / args.file
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    if args.line is None:
        while len(lines) > 1 and lines[-1] == "":
            lines.pop()
        line = len(lines) - 1
    else:
        line = args.line - 1
    column = len(text.split("\n")[line]) if args.col is None else args.col - 1

    messages: list[str] = []
    started = time.perf_counter()
    client, init = await start_server(
        "lsp-assist-demo",
        workspace,
        _options(args.setting),
        args=("--model", args.model) if args.model else (),
        on_message=messages.append,
    )
    uri = path.as_uri()
    open_document(client, uri, text, "python")
    status: dict[str, Any] = {}
    while time.perf_counter() - started < 300:
        status = await command(client, "lspAssist.status")
        # Wait as a user reads the file they opened: the server evaluates its prompt prefix.
        if status.get("ready") or status["model"]["error"]:
            break
        await asyncio.sleep(0.25)
    # The editor puts the cursor where the user will type and says so when it rests:
    # the server evaluates the prompt there while the user reads.
    prefill = await rest_cursor(client, uri, line, column)
    load_s = time.perf_counter() - started

    async def ask(line: int, column: int) -> tuple[str, float, dict[str, Any]]:
        # automatic, as an editor asks while the user types (an explicit ask wants
        # alternatives, which the type-through cache does not hold)
        text, elapsed, details = await inline_request(client, uri, line, column, automatic=True)
        if not details.get("pending"):
            return text, elapsed, details
        # Answered early (docs/serving.md): the start now, the rest still being written.
        # An editor asks again when the server says the rest is ready; so does the demo,
        # once the whole suggestion's record is there (its figures are known only then).
        answer_id = details["request_id"]
        waited = time.perf_counter()
        while time.perf_counter() - waited < 60:
            last = (await command(client, "lspAssist.status")).get("last", {})
            if last.get("request_id") == answer_id:
                whole, _, _ = await inline_request(client, uri, line, column, automatic=True)
                return whole or text, elapsed, {**last, "early": text}
            await asyncio.sleep(0.1)
        return text, elapsed, details

    first, first_ms, first_details = await ask(line, column)
    # What the related layer put in that prompt: definitions found through the index
    explained = await command(client, "lspAssist.explainContext", uri, line, column)
    related = [
        f"{item['symbol']} ({item['source']})"
        for layer in explained.get("layers", [])
        if layer["name"] == "related"
        for item in layer["items"]
    ]
    # The user types the suggestion's first character: served from the type-through cache.
    typed = first[0] if first else "r"
    client.text_document_did_change(line_edit(uri, 2, line, column, column, typed))
    second, second_ms, second_details = await ask(line, column + 1)
    # Then changes their mind and types something else: a model call that reuses the
    # KV cache for everything before the cursor's line.
    other = "print(" if not first.startswith("print(") else "log("
    client.text_document_did_change(line_edit(uri, 3, line, column, column + 1, other))
    third, third_ms, third_details = await ask(line, column + len(other))
    await stop_server(client)
    return {
        "workspace": str(workspace),
        "file": args.file,
        "position": {"line": line + 1, "col": column + 1},
        "server": init.server_info.name if init.server_info else "",
        "inline_completion_provider": init.capabilities.inline_completion_provider is not None,
        "completion_provider": init.capabilities.completion_provider is not None,
        "model_load_s": round(load_s, 2),
        "prefill": prefill,
        "messages": messages,
        "model": status.get("model", {}).get("path", ""),
        "related": related,
        "first": {"suggestion": first, "round_trip_ms": round(first_ms, 1), **first_details},
        "after_typing": {
            "typed": typed,
            "suggestion": second,
            "round_trip_ms": round(second_ms, 1),
            **second_details,
        },
        "after_diverging": {
            "typed": other,
            "suggestion": third,
            "round_trip_ms": round(third_ms, 1),
            **third_details,
        },
    }


def run(args: argparse.Namespace) -> int:
    """Run the demo and print what the editor would show."""
    report = asyncio.run(drive(args))
    if args.json:
        print(json.dumps(report, indent=2))
        return 0 if report["first"]["suggestion"] else 1
    where = report["position"]
    print(
        f"lsp-assist demo: {report['workspace']}/{report['file']} "
        f"at line {where['line']}, col {where['col']}"
    )
    print(
        f"server advertises inlineCompletion: {report['inline_completion_provider']}, "
        f"completion: {report['completion_provider']}; model loaded and the prompt at the "
        f"cursor prefilled after {report['model_load_s']} s"
        + (
            f" ({prefill['prompt_tokens']} tokens, {prefill['evaluated']} evaluated "
            f"in {prefill['ms']} ms)"
            if (prefill := report["prefill"])
            else ""
        )
    )
    print(f"model: {report['model']}")
    for message in report["messages"]:
        print(f"server says: {message}")
    steps = (
        ("first request", "first"),
        ("the user types the suggestion's first character", "after_typing"),
        ("the user types something else", "after_diverging"),
    )
    for title, key in steps:
        part = report[key]
        print(f"\n== {title} ==")
        if "typed" in part:
            print(f"typed so far: {part['typed']!r}")
        print("suggestion:")
        print("    " + (part["suggestion"] or "(empty)").replace("\n", "\n    "))
        if part.get("early"):
            print(
                f"answered early with {part['early']!r} after {part['round_trip_ms']} ms; "
                f"the whole suggestion was written after {part.get('whole_ms', 0)} ms"
            )
        print(
            f"latency: round trip {part['round_trip_ms']} ms; time to first token "
            f"{part.get('ttft_ms', 0)} ms; engine {part.get('engine_ms', 0)} ms"
            + ("  (type-through cache hit)" if part.get("cache_hit") else "")
        )
        print(
            f"prompt: {part.get('prompt_tokens', 0)} tokens, "
            f"{part.get('reused_tokens', 0)} reused from the KV cache"
        )
        layers = part.get("layers") or {}
        if layers:
            print("tokens per layer: " + ", ".join(f"{k} {v}" for k, v in layers.items()))
        if key == "first" and report["related"]:
            print("related layer: " + ", ".join(report["related"]))
    return 0 if report["first"]["suggestion"] else 1
