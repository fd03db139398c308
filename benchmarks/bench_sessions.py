"""What a session costs and whether it is given back (issue 11): RSS, threads, fds from /proc.

1. re-initialize: one stdio connection sends ``initialize`` (+ ``initialized``, then waits
   for the model) ``--count`` times; the second and later must be refused and cost nothing.
2. TCP sessions: ``--count`` connections one after another, each initializing, loading
   the model, shutting down and exiting; after each the server must be back where it was.

Run: .venv/bin/python benchmarks/bench_sessions.py [--model GGUF] [--count N]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_assist.backends.models import small_model_path  # noqa: E402
from tests.support.ports import free_port  # noqa: E402
from tests.support.raw_server import (  # noqa: E402
    INITIALIZE,
    ServerProcess,
    resources,
    wait_model,
)


def reinitialize(model: Path, count: int) -> None:
    """Print the resources after each initialize on one stdio connection."""
    process = ServerProcess(Path(tempfile.mkdtemp(prefix="lsp-assist-bench-")), model=model)
    try:
        client = process.stdio()
        for n in range(1, count + 1):
            client.send(dict(INITIALIZE, id=n))
            answer = client.response(n, timeout=60)
            client.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            time.sleep(0.5)
            wait_model(client)
            time.sleep(1.0)
            outcome = f"error {answer['error']['code']}" if "error" in answer else "result"
            print(f"initialize #{n}: {outcome:12} {resources(process.pid)}")
    finally:
        process.close()


def tcp_sessions(model: Path, count: int) -> None:
    """Print the resources with the model loaded and after each TCP session."""
    port = free_port(socket.AF_INET, "127.0.0.1")
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-bench-"))
    process = ServerProcess(tmp, "--tcp", f"127.0.0.1:{port}", model=model)
    try:
        for n in range(1, count + 1):
            client = process.connect(socket.AF_INET, "127.0.0.1", port)
            if n == 1:
                print(f"listening:           {resources(process.pid)}")
            client.initialize()
            wait_model(client)
            print(f"session {n} loaded:    {resources(process.pid)}")
            client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            client.response(2, timeout=60)
            client.send({"jsonrpc": "2.0", "method": "exit"})
            client.wait_closed()
            client.close()
            time.sleep(1.0)
            print(f"session {n} ended:     {resources(process.pid)}")
    finally:
        process.close()


def main() -> int:
    """Run both measurements."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--count", type=int, default=4)
    args = parser.parse_args()
    model = args.model or small_model_path()
    print(f"model: {model.name}")
    reinitialize(model, args.count)
    tcp_sessions(model, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
