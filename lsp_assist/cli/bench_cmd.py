"""``lsp-assist bench``: the mission's table on real code, through the real server.

Thin: the work is lsp_assist.evaluation (tasks, runner, metrics, report); this module
reads the flags, runs it and writes the outputs. docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import sysconfig
from pathlib import Path
from typing import Any

DEFAULT_TASKS = 12
"""Hole tasks per row by default (two thirds cross-file): the bench stays within 15
minutes on a 2-core CPU with the embedded model (docs/performance.md)."""
DEFAULT_TYPING = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the bench subcommand."""
    parser = sub.add_parser(
        "bench",
        help="reproduce the mission's table (tokens, TTFT, cost, quality per stage) on real code",
    )
    parser.add_argument(
        "workspace", nargs="?", type=Path, help="folder (default: the installed standard library)"
    )
    parser.add_argument("--model", metavar="GGUF", help="model (default: the embedded model)")
    parser.add_argument("--model2", metavar="GGUF", help="add a row with this model")
    parser.add_argument(
        "--tasks",
        type=int,
        default=DEFAULT_TASKS,
        metavar="N",
        help=f"hole tasks per row, two thirds cross-file (default {DEFAULT_TASKS})",
    )
    parser.add_argument(
        "--typing-lines",
        type=int,
        default=DEFAULT_TYPING,
        metavar="N",
        help=f"lines retyped keystroke by keystroke per row (default {DEFAULT_TYPING})",
    )
    parser.add_argument("--out", type=Path, default=Path("lsp-assist-bench"), help="output folder")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument(
        "--rows",
        help="comma-separated subset of baseline,layered,retrieval,speculative,model2,peer",
    )
    parser.add_argument(
        "--exclude", action="append", default=[], metavar="GLOB", help="more globs to leave out"
    )
    parser.add_argument(
        "--open-files", type=int, default=2, help="other files of the folder open per task"
    )
    parser.add_argument(
        "--peer-window", type=int, default=1024, help="the peer's context window (tokens)"
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting every row gets (repeatable), e.g. --setting threads=1",
    )
    parser.add_argument(
        "--from-json",
        type=Path,
        metavar="RESULTS",
        help="run nothing: recompute the table and plots from a results.json into --out",
    )
    parser.add_argument(
        "--work", type=Path, help="where the workspace copy goes (default: a temporary folder)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the workspace copy and its caches"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the bench and write table.md, results.json and the plots to --out."""
    from lsp_assist.backends.models import embedded_model_path
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation import report
    from lsp_assist.evaluation.runner import STDLIB_EXCLUDE, BenchConfig, run_bench, split_tasks

    if args.from_json is not None:
        return write_outputs(args.out, report.read_results(args.from_json))
    if args.tasks < 1 or args.typing_lines < 0:
        print("error: --tasks must be >= 1 and --typing-lines >= 0", file=sys.stderr)
        return 2
    if args.workspace is None:
        workspace = Path(sysconfig.get_paths()["stdlib"]).resolve()
        exclude = [*STDLIB_EXCLUDE, *args.exclude]
    else:
        workspace = args.workspace.resolve()
        exclude = list(args.exclude)
    if not workspace.is_dir():
        print(f"error: not a folder: {workspace}", file=sys.stderr)
        return 2
    try:
        model = args.model or str(embedded_model_path())
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    cross, in_file = split_tasks(args.tasks)
    config = BenchConfig(
        workspace=workspace,
        model=str(Path(model).resolve()),
        model2=str(Path(args.model2).resolve()) if args.model2 else "",
        cross_file=cross,
        in_file=in_file,
        typing=args.typing_lines,
        seed=args.seed,
        rows=[r.strip() for r in args.rows.split(",")] if args.rows else None,
        exclude=exclude,
        open_files=args.open_files,
        peer_window=args.peer_window,
        settings=dict(item.partition("=")[::2] for item in args.setting),
        scratch=args.work.resolve() if args.work else None,
        keep=args.keep,
    )
    command = "lsp-assist " + shlex.join(getattr(args, "argv", ["bench"]))
    try:
        result = run_bench(config, command.strip())
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return write_outputs(args.out, result)


def write_outputs(out: Path, result: dict[str, Any]) -> int:
    """Write results.json, table.md and the plots; print the table; 1 if a prompt leaked."""
    from lsp_assist.evaluation import report

    report.write_json(out / "results.json", result)
    text = report.bench_markdown(result)
    (out / "table.md").write_text(text, encoding="utf-8")
    plots = report.plot_bench(result, out)
    print(text)
    print(f"wrote {out / 'table.md'}, {out / 'results.json'}, " + ", ".join(map(str, plots)))
    leaks = sum(r["summary"]["leaks"] for r in result["rows"])
    return 1 if leaks else 0
