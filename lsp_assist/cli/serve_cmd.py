"""``lsp-assist serve``: run the language server over stdio or TCP."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import tracemalloc

from lsp_assist.cli.common import add_model_flags, settings_from_args, setup_logging
from lsp_assist.lsp import transport
from lsp_assist.serving import TRACEMALLOC_ENV

logger = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the serve subcommand."""
    parser = sub.add_parser("serve", help="run the language server (stdio by default)")
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (default)")
    parser.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on TCP (host defaults to 127.0.0.1)"
    )
    parser.add_argument(
        "--max-sessions",
        type=int,
        default=None,
        metavar="N",
        help="TCP: sessions served at once, each with its own model "
        f"(default {transport.MAX_TCP_SESSIONS})",
    )
    parser.add_argument("--log-file", help="write logs here instead of stderr")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING or ERROR")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def parse_tcp(value: str) -> tuple[str, int]:
    """Return (host, port) from HOST:PORT, [IPV6]:PORT, :PORT or PORT."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    elif ":" in host:
        raise ValueError(f"write an IPv6 address in brackets: [{host}]:{port}")
    number = int(port)
    if not 0 <= number <= 65535:
        raise ValueError(f"port {number} is out of range")
    return host or "127.0.0.1", number


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def start_tracing(value: str) -> str:
    """Start tracemalloc with ``value`` frames (``LSP_ASSIST_TRACEMALLOC``); return a
    warning when the value is not a positive integer ('' otherwise, and when it is empty)."""
    if not value:
        return ""
    try:
        frames = int(value)
    except ValueError:
        frames = 0
    if frames < 1:
        return f"{TRACEMALLOC_ENV}={value!r} is not a positive number of frames: not tracing"
    if not tracemalloc.is_tracing():
        tracemalloc.start(frames)
    return ""


def run(args: argparse.Namespace) -> int:
    """Run the server until the client exits; return the process exit code.

    stdio: 0 after shutdown and exit, 1 for exit without shutdown or when the client
    goes away first. TCP: serve connection after connection until stopped. SIGTERM or
    SIGHUP closes the sessions as shutdown and exit do (metrics flushed, the model
    freed), then 0.
    """
    traced = start_tracing(os.environ.get(TRACEMALLOC_ENV, ""))  # first: all is traced
    settings, warnings = settings_from_args(args)
    setup_logging(
        args.log_level or settings.telemetry.log_level, args.log_file or settings.telemetry.log_file
    )
    for warning in [*warnings, traced] if traced else warnings:
        logger.warning(warning)
    # local: pygls and the server load only for serve, not at every command's start
    from lsp_assist.lsp.server import create_server

    if not args.tcp:
        return transport.serve_stdio(create_server(settings))
    try:
        host, port = parse_tcp(args.tcp)
    except ValueError as exc:
        logger.error("--tcp %s: %s", args.tcp, exc)
        return 2
    if not is_loopback(host):
        logger.warning(
            "listening on non-loopback address %s: anyone who can reach it can read "
            "your code through completions",
            host,
        )

    def listening(addresses: list[object]) -> None:
        logger.info("lsp-assist listening on %s", ", ".join(map(str, addresses)))

    sessions = transport.MAX_TCP_SESSIONS if args.max_sessions is None else args.max_sessions
    if sessions < 1:
        logger.error("--max-sessions must be at least 1")
        return 2
    return transport.serve_tcp(lambda: create_server(settings), host, port, listening, sessions)
