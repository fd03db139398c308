"""Helpers shared by CLI commands: settings from flags and env, logging, positions."""

from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from pathlib import Path

from lsp_assist.config import Settings, env_overrides, parse_settings


def add_model_flags(parser: argparse.ArgumentParser) -> None:
    """Add the flags that choose and tune the model."""
    parser.add_argument(
        "--model",
        metavar="PRESET|GGUF",
        help="a packaged preset (coder-0.5b, coder-1.5b, gemma-270m) or a GGUF path "
        "(env LSP_ASSIST_MODEL; default coder-0.5b)",
    )
    parser.add_argument("--draft-model", metavar="GGUF", help="draft GGUF with the same vocabulary")
    parser.add_argument("--threads", type=int, help="CPU threads (0 = all)")
    parser.add_argument("--gpu-layers", type=int, help="layers to offload to CUDA/Metal")
    parser.add_argument("--budget", type=int, help="prompt token budget")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by its camelCase key (repeatable), e.g. --setting draft=off",
    )


def settings_from_args(args: argparse.Namespace) -> tuple[Settings, list[str]]:
    """Return settings from env vars, then --setting, then the dedicated flags."""
    return parse_settings(setting_values(args))


def setting_values(args: argparse.Namespace) -> dict[str, object]:
    """Return the camelCase values env vars, --setting and the dedicated flags give."""
    values: dict[str, object] = dict(env_overrides())
    for item in getattr(args, "setting", []) or []:
        key, sep, value = item.partition("=")
        if sep:
            values[key.strip()] = value
    if getattr(args, "model", None) is not None:
        # --model names the model outright: an inherited LSP_ASSIST_MODEL_PATH does not win
        values["modelPath"] = ""
    flag_keys = {
        "model": "model",
        "draft_model": "draftModelPath",
        "threads": "threads",
        "gpu_layers": "gpuLayers",
        "budget": "contextBudget",
    }
    for attr, key in flag_keys.items():
        value = getattr(args, attr, None)
        if value is not None:
            values[key] = value
    return values


def setup_logging(level: str, log_file: str = "") -> None:
    """Send logs to stderr or a file, never stdout (stdout may be the protocol)."""
    handler: logging.Handler = (
        logging.FileHandler(log_file, encoding="utf-8")
        if log_file
        else logging.StreamHandler(sys.stderr)
    )
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # pygls logs every message it sends at INFO, suggestions and prompts included:
    # keep it quiet unless the user asked for DEBUG (logPrompts governs code in logs).
    if level.upper() != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)


_POSITION = re.compile(r"^(?P<file>.+?):(?P<line>\d+):(?P<col>\d+)$")


def parse_location(text: str) -> tuple[Path, int, int]:
    """Parse FILE:LINE:COL (1-based, as compilers print) into (path, line0, col0)."""
    match = _POSITION.match(text)
    if not match:
        raise argparse.ArgumentTypeError(f"expected FILE:LINE:COL, got {text!r}")
    line, col = int(match["line"]), int(match["col"])
    if line < 1 or col < 1:
        raise argparse.ArgumentTypeError("LINE and COL are 1-based")
    return Path(match["file"]), line - 1, col - 1


def find_workspace(path: Path) -> Path:
    """Return the enclosing git repository of ``path``, else its directory."""
    start = path if path.is_dir() else path.parent
    try:
        out = subprocess.run(
            ["git", "-C", str(start), "rev-parse", "--show-toplevel"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if out.returncode == 0 and out.stdout.strip():
            return Path(out.stdout.strip())
    except (OSError, subprocess.SubprocessError):
        pass
    return start.resolve()


def location_setup(
    args: argparse.Namespace,
) -> tuple[Settings, Path, int, int, Path] | None:
    """Common start of FILE:LINE:COL commands: settings, logging, the file and workspace.

    Prints warnings and errors to stderr; returns None when the file does not exist.
    """
    settings, warnings = settings_from_args(args)
    setup_logging("WARNING")
    for warning in warnings:
        print(f"warning: {warning}", file=sys.stderr)
    path, line, column = args.location
    path = path.resolve()
    if not path.is_file():
        print(f"error: no such file: {path}", file=sys.stderr)
        return None
    workspace = Path(args.workspace).resolve() if args.workspace else find_workspace(path)
    return settings, path, line, column, workspace
