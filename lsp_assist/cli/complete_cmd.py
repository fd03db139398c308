"""``lsp-assist complete FILE:LINE:COL``: one completion through the engine, no editor."""

from __future__ import annotations

import argparse
import json
import sys

from lsp_assist.cli.common import add_model_flags, location_setup, parse_location
from lsp_assist.serving import CompletionEngine, CompletionQuery, Session


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the complete subcommand."""
    parser = sub.add_parser("complete", help="complete at FILE:LINE:COL (1-based) with timings")
    parser.add_argument("location", type=parse_location, metavar="FILE:LINE:COL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workspace", help="workspace folder (default: enclosing git repo)")
    parser.add_argument("--strategy", choices=["layered", "baseline"], help="context strategy")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Complete once and print the suggestion with its costs."""
    found = location_setup(args)
    if found is None:
        return 2
    settings, path, line, column, workspace = found
    session = Session(settings, workspace=workspace)
    try:
        if session.index is not None:
            session.index.scan()
        if session.load_backend() is None:
            print(f"error: {session.model_error}", file=sys.stderr)
            return 1
        text = path.read_text(encoding="utf-8", errors="replace")
        doc = session.buffers.open(path.as_uri(), text)
        query = CompletionQuery(
            snapshot=doc.snapshot(), line=line, column=column, trigger="cli", strategy=args.strategy
        )
        outcome = CompletionEngine(session).complete(query)
    finally:
        session.close()
    if args.json:
        print(json.dumps(outcome.to_json(), indent=2))
    else:
        why = outcome.error or outcome.skipped
        print(outcome.text or f"(no suggestion{': ' + why if why else ''})")
        print(
            f"--- ttft {outcome.ttft_ms:.0f} ms, total {outcome.latency_ms:.0f} ms, "
            f"prompt {outcome.prompt_tokens} tokens ({outcome.reused_tokens} reused), "
            f"output {outcome.output_tokens} tokens",
            file=sys.stderr,
        )
        layers = ", ".join(f"{k} {v}" for k, v in outcome.layer_tokens.items())
        print(f"--- layers: {layers}", file=sys.stderr)
    return 1 if outcome.error else 0
