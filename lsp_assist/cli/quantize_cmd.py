"""``lsp-assist quantize``: another quantization of a GGUF, offline, for eval and bench.

Thin: the work is lsp_assist.backends.quantize (llama.cpp's own quantizer). The file
goes where ``lsp-assist bench --model2 TYPE`` looks for it, so the two share it.
docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the quantize subcommand."""
    from lsp_assist.backends.quantize import TYPES

    parser = sub.add_parser(
        "quantize",
        help="write another quantization of a GGUF (default: the embedded model)",
    )
    parser.add_argument("type", metavar="TYPE", help="one of " + ", ".join(TYPES))
    parser.add_argument("--model", metavar="PRESET|GGUF", help="source (default: coder-0.5b)")
    parser.add_argument(
        "--out", type=Path, help="file to write (default: <cache>/lsp-assist/models/...)"
    )
    parser.add_argument("--threads", type=int, default=0, help="CPU threads (0 = all)")
    parser.add_argument("--force", action="store_true", help="write again even if it exists")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Quantize, print the written file's path on stdout."""
    from lsp_assist.backends.models import resolve_model
    from lsp_assist.backends.quantize import TYPES, quant_type, quantize, quantized_path
    from lsp_assist.errors import LspAssistError

    kind = quant_type(args.type)
    if kind is None:
        print(f"error: unknown TYPE {args.type}: one of {', '.join(TYPES)}", file=sys.stderr)
        return 2
    try:
        source = resolve_model(args.model or "")[0].resolve()
        target = args.out or quantized_path(source, kind)
        if args.force or not target.is_file():
            print(f"quantizing {source} to {kind} ...", file=sys.stderr)
            quantize(source, target, kind, args.threads)
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(target)
    return 0
