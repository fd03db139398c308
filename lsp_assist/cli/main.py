"""Entry point of the ``lsp-assist`` command: collects the subcommand modules."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Each module lsp_assist.cli.<name>_cmd defines register(subparsers) which adds its
# parser and sets ``func`` (args -> exit code) as the parser default.
COMMANDS = (
    "serve",
    "complete",
    "context",
    "index",
    "doctor",
    "stats",
    "demo",
    "bench",
    "eval",
    "quantize",
)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser with every available subcommand."""
    parser = argparse.ArgumentParser(
        prog="lsp-assist",
        description="AI code completions from a local GGUF model, served over LSP.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"lsp_assist.cli.{name}_cmd").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI and return its exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    # the command line as given, for reports that say how they were made
    args.argv = list(sys.argv[1:] if argv is None else argv)
    func = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return 2
    code: int = func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
