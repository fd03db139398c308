"""A real ``lsp-assist serve`` subprocess spoken to in raw bytes, over stdio or TCP.

:class:`ServerProcess` starts the server (its stderr in a file, a model file that may
not exist: then it starts in a second and answers with empty completions); a
:class:`Channel` writes bytes as they are or well-formed frames, and reads the server's
frames strictly (it must frame correctly), answering its requests with null.
``wait_model`` polls ``lspAssist.status`` until the model is loaded or failed;
``resources`` reads a process's threads, RSS and descriptors from /proc. Used by the
protocol-abuse and signal tests and ``benchmarks/bench_sessions.py``.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest

SERVE = [sys.executable, "-m", "lsp_assist.cli.main", "serve", "--log-level", "INFO"]


ANSWER_S = 15.0
"""How long a request may take to be answered before the server counts as deaf."""


def body(message: dict[str, Any]) -> bytes:
    """Serialize a message (ASCII JSON)."""
    return json.dumps(message).encode("ascii")


def frame(message: dict[str, Any]) -> bytes:
    """A well-formed frame."""
    data = body(message)
    return b"Content-Length: %d\r\n\r\n%s" % (len(data), data)


def status_request(msg_id: int) -> dict[str, Any]:
    """The lspAssist.status command as a request."""
    return {
        "jsonrpc": "2.0",
        "id": msg_id,
        "method": "workspace/executeCommand",
        "params": {"command": "lspAssist.status", "arguments": []},
    }


INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"processId": None, "rootUri": None, "capabilities": {}},
}


def read_frames(stream: IO[bytes], out: queue.Queue[dict[str, Any] | None]) -> None:
    """Parse the server's output strictly (it must frame correctly) into ``out``."""
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                out.put(None)
                return
            if line == b"\r\n":
                break
            name, _, value = line.decode("ascii").partition(":")
            if name == "Content-Length":
                length = int(value)
        assert length is not None, "the server sent a header block without Content-Length"
        out.put(json.loads(stream.read(length)))


class ServerProcess:
    """A server subprocess, its stderr in a file; ``stdio()`` or ``connect()`` talk to it."""

    def __init__(self, tmp_path: Path, *args: str, model: Path | None = None) -> None:
        self.stderr_path = tmp_path / f"stderr-{time.monotonic_ns()}.log"
        self._stderr = self.stderr_path.open("wb")
        env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
        env["LSP_ASSIST_CACHE_DIR"] = str(tmp_path / "cache")
        model = model or tmp_path / "no-model.gguf"
        self.process = subprocess.Popen(
            [*SERVE, "--model", str(model), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            env=env,
        )
        self.pid = self.process.pid

    def stdio(self) -> Channel:
        """The channel over the process's stdin and stdout."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None

        def write(data: bytes) -> None:
            stdin.write(data)
            stdin.flush()

        return Channel(self, write, stdout, stdin.close)

    def connect(self, family: socket.AddressFamily, host: str, port: int) -> Channel:
        """A new TCP connection (retried until the server listens)."""
        deadline = time.monotonic() + 60
        while True:
            try:
                sock = socket.create_connection((host, port), timeout=2)
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"the server does not listen on {host}:{port}:\n{self.log()}")
                time.sleep(0.2)
        sock.settimeout(None)
        assert sock.family == family
        return Channel(self, sock.sendall, sock.makefile("rb"), sock.close)

    def wait(self, timeout: float = 20) -> int:
        """Wait for the process to end; return its exit code."""
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the server did not exit within {timeout} s:\n{self.log()}")

    def log(self) -> str:
        """The server's stderr so far (its end)."""
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        """Kill the process if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._stderr.close()


class Channel:
    """One connection to a server: raw bytes out, the server's parsed frames in."""

    def __init__(
        self,
        server: ServerProcess,
        write: Callable[[bytes], Any],
        stream: IO[bytes],
        close: Callable[[], None],
    ) -> None:
        self.server = server
        self._write = write
        self.close = close
        self.messages: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=read_frames, args=(stream, self.messages), daemon=True).start()

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are."""
        self._write(data)

    def send(self, message: dict[str, Any]) -> None:
        """Write one well-formed frame."""
        self.send_raw(frame(message))

    def response(self, msg_id: int | str, timeout: float = ANSWER_S) -> dict[str, Any]:
        """Wait for the response to ``msg_id``; fail if the server is silent or gone."""
        for message in self.seen:
            if message.get("id") == msg_id and "method" not in message:
                return message
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                message = self.messages.get(timeout=left)
            except queue.Empty:
                break
            if message is None:
                log = self.server.log()
                pytest.fail(f"the server closed the stream before answering {msg_id}:\n{log}")
            if "method" in message and "id" in message:  # a request to the client
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
                continue
            self.seen.append(message)
            if message.get("id") == msg_id and "method" not in message:
                return message
        pytest.fail(f"no answer to {msg_id} within {timeout} s:\n{self.server.log()}")

    def initialize(self) -> dict[str, Any]:
        """Send initialize and initialized; return the initialize result."""
        self.send(INITIALIZE)
        result = self.response(1, timeout=60)
        assert "result" in result, result
        self.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return result

    def wait_closed(self, timeout: float = 20) -> None:
        """Wait until the server closes the stream."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                if self.messages.get(timeout=left) is None:
                    return
            except queue.Empty:
                break
        pytest.fail(f"the server kept the stream open:\n{self.server.log()}")


def wait_model(client: Channel, timeout: float = 120) -> dict[str, Any]:
    """Poll lspAssist.status until the model is loaded or has failed; return its part."""
    deadline = time.monotonic() + timeout
    msg_id = 1000
    while True:
        msg_id += 1
        client.send(status_request(msg_id))
        model: dict[str, Any] = client.response(msg_id)["result"]["model"]
        if model.get("loaded") or model.get("error") or time.monotonic() > deadline:
            return model
        time.sleep(0.2)


def proc_status(pid: int) -> dict[str, int]:
    """Threads, VmRSS and VmHWM (kB) of a process, from /proc."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS", "VmHWM"):
            values[key] = int(value.split()[0])
    return values


def resources(pid: int) -> dict[str, int]:
    """Threads, RSS (kB) and open file descriptors of a process."""
    status = proc_status(pid)
    return {
        "threads": status["Threads"],
        "rss_kb": status["VmRSS"],
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
    }
