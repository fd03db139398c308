"""``lsp-assist serve``: run the language server over stdio or TCP."""

from __future__ import annotations

import argparse
import ipaddress
import logging

from lsp_assist.cli.common import add_model_flags, settings_from_args, setup_logging

logger = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the serve subcommand."""
    parser = sub.add_parser("serve", help="run the language server (stdio by default)")
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (default)")
    parser.add_argument(
        "--tcp", metavar="HOST:PORT", help="listen on TCP (host defaults to 127.0.0.1)"
    )
    parser.add_argument("--log-file", help="write logs here instead of stderr")
    parser.add_argument("--log-level", default=None, help="DEBUG, INFO, WARNING or ERROR")
    add_model_flags(parser)
    parser.set_defaults(func=run)


def parse_tcp(value: str) -> tuple[str, int]:
    """Return (host, port) from HOST:PORT or :PORT or PORT."""
    host, sep, port = value.rpartition(":")
    if not sep:
        host, port = "", value
    return host or "127.0.0.1", int(port)


def run(args: argparse.Namespace) -> int:
    """Run the server until the client exits."""
    settings, warnings = settings_from_args(args)
    setup_logging(
        args.log_level or settings.telemetry.log_level, args.log_file or settings.telemetry.log_file
    )
    for warning in warnings:
        logger.warning(warning)
    from lsp_assist.lsp.server import create_server

    server = create_server(settings)
    if args.tcp:
        host, port = parse_tcp(args.tcp)
        try:
            loopback = ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = host == "localhost"
        if not loopback:
            logger.warning(
                "listening on non-loopback address %s: anyone who can reach it can read "
                "your code through completions",
                host,
            )
        logger.info("lsp-assist listening on %s:%d", host, port)
        server.start_tcp(host, port)
    else:
        server.start_io()
    return 0
