"""``lsp-assist eval``: how well your model and settings complete holes punched in your code.

Thin: the work is lsp_assist.evaluation; the settings are yours (environment,
--setting and the model flags), the server the real one. docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

from lsp_assist.cli.common import add_model_flags, find_workspace, setting_values

DEFAULT_TASKS = 30


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the eval subcommand."""
    parser = sub.add_parser(
        "eval", help="complete holes punched in your repository and score the suggestions"
    )
    parser.add_argument(
        "workspace", nargs="?", type=Path, help="folder (default: the current repository)"
    )
    parser.add_argument(
        "--tasks",
        type=int,
        default=DEFAULT_TASKS,
        metavar="N",
        help=f"hole tasks, two thirds cross-file (default {DEFAULT_TASKS})",
    )
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="globs to leave out"
    )
    parser.add_argument("--out", type=Path, help="also write eval.json and eval.md here")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the eval and print the table (overall and per language)."""
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation import report
    from lsp_assist.evaluation.runner import run_eval, split_tasks

    if args.tasks < 1:
        print("error: --tasks must be >= 1", file=sys.stderr)
        return 2
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    if not workspace.is_dir():
        print(f"error: not a folder: {workspace}", file=sys.stderr)
        return 2
    cross, in_file = split_tasks(args.tasks)
    command = "lsp-assist " + shlex.join(getattr(args, "argv", ["eval"]))
    try:
        result = run_eval(
            workspace,
            setting_values(args),
            cross_file=cross,
            in_file=in_file,
            seed=args.seed,
            exclude=args.exclude,
            command=command.strip(),
        )
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text = report.eval_markdown(result)
    if args.out is not None:
        report.write_json(args.out / "eval.json", result)
        (args.out / "eval.md").write_text(text, encoding="utf-8")
    if args.json:
        print(json.dumps({"meta": result["meta"], "summary": result["summary"]}, indent=2))
    else:
        print(text)
    return 0 if result["summary"]["overall"]["tasks"] else 1
