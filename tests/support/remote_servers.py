"""Completion servers the remote backend is tested against, on 127.0.0.1.

:class:`LlamaCppPythonServer` is a real ``python -m llama_cpp.server`` (SmolLM2, behind the
API key ``KEY``, which the tests' settings read from ``KEY_ENV``); :class:`FaultServer`
plays one scripted behaviour per request (an answer, silence, junk, a drip), and
``cancel_when_held`` / ``cancel_delays`` cancel a request once it holds one. Used by
tests/backends/test_remote.py, test_remote_infill.py and the team and fault benchmarks.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from lsp_assist.backends.base import CancelToken
from tests.support.bounded import bounded

KEY = "test-secret-key-123"


KEY_ENV = "LSP_ASSIST_TEST_REMOTE_KEY"


class LlamaCppPythonServer:
    """A llama-cpp-python server subprocess serving SmolLM2."""

    def __init__(self, model: Path, port: int, n_ctx: int = 1024) -> None:
        self.model = model
        self.port = port
        self.n_ctx = n_ctx
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            "2",
            "--api_key",
            KEY,
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                resp = httpx.get(
                    f"{self.url}/v1/models", headers={"Authorization": f"Bearer {KEY}"}, timeout=1
                )
                if resp.status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError("llama_cpp.server exited during start-up")
            time.sleep(0.2)
        raise RuntimeError("llama_cpp.server did not start within 60 s")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class FaultServer:
    """An HTTP/1.1 server on 127.0.0.1 that plays one behaviour per request (a script).

    ``"answer"``: a complete streamed completion ("42"), with a Content-Length so the
    connection stays open for the next request. The faults hold the request until the
    client closes the connection (``closed`` is set, ``closed_at`` noted) or ``hold_s``
    passes:

    - ``"silent"``: read the request, then send nothing (no headers, no body), as a
      server still evaluating a long prompt does;
    - ``"junk"``: a 200 that claims to be an event stream, then random bytes without
      a line end, a burst every 20 ms;
    - ``"drip"``: a valid answer, one byte per ``drip_s`` from the status line on;
    - ``"drip-after-text"``: the headers and a first event with text ("42") at once,
      then the rest of the answer one byte per ``drip_s``;
    - ``"gate"``: hold until the test sets ``release``, then answer as ``"answer"`` does:
      a model slow by construction, however fast the machine (``hold`` switches to it).

    The last step repeats for any further request (retries and tokenizer calls meet
    the same fault). Each connection is served on a thread of its own; ``ports`` lists
    the client port of each request, so a reused keep-alive connection shows as a
    repeated port, and ``paths`` the path asked for.
    """

    BODY = b'data: {"choices":[{"text":"42","finish_reason":"length"}]}\n\n'
    FIRST = b'data: {"choices":[{"text":"42"}]}\n\n'
    REST = b'data: {"choices":[{"text":" + 1","finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    EVENT_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"

    def __init__(self, script: Sequence[str], hold_s: float = 30.0, drip_s: float = 1.0) -> None:
        self.script = list(script)
        self.hold_s = hold_s
        self.drip_s = drip_s
        self.ports: list[int] = []
        self.paths: list[str] = []
        self.holding = threading.Event()
        self.held_at = 0.0
        self.release = threading.Event()
        self.closed = threading.Event()
        self.closed_at = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, addr = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:  # the test closed the socket
                return
            threading.Thread(
                target=self._connection, args=(conn, int(addr[1])), daemon=True
            ).start()

    def hold(self) -> None:
        """From now on, hold every request until ``release`` is set (the ``"gate"`` step)."""
        with self._lock:
            self.release.clear()
            self.holding.clear()
            self.script = ["gate"]

    def _next(self, port: int, path: str) -> str:
        with self._lock:
            self.ports.append(port)
            self.paths.append(path)
            return self.script.pop(0) if len(self.script) > 1 else self.script[0]

    def _connection(self, conn: socket.socket, port: int) -> None:
        with conn:
            buf = b""
            while not self._stop.is_set():
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                match = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
                length = int(match.group(1)) if match else 0
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                buf = buf[length:]
                step = self._next(port, head.split(b" ")[1].decode())
                if step == "gate":
                    self.held_at = time.perf_counter()
                    self.holding.set()
                    if not self._released(conn):
                        return
                    step = "answer"
                if step == "answer":
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (len(self.BODY), self.BODY)
                    )
                    continue
                self.held_at = time.perf_counter()
                self.holding.set()
                try:
                    self._fault(conn, step)
                except (ConnectionResetError, BrokenPipeError):
                    self._note_closed()  # a write after the client closed: it answered RST
                except OSError:
                    pass
                return

    def _released(self, conn: socket.socket) -> bool:
        """Hold a ``"gate"`` request: True once ``release`` is set, False when the client
        closed (noted) or the server stops."""
        try:
            while not self.release.wait(0.02):
                if self._stop.is_set() or self._client_closed(conn, 0.02):
                    return False
        except OSError:
            return False
        conn.settimeout(None)
        return True

    def _note_closed(self) -> None:
        self.closed_at = time.perf_counter()
        self.closed.set()

    def _client_closed(self, conn: socket.socket, wait_s: float) -> bool:
        """Wait up to ``wait_s`` for the client to close; note when it did.

        A close is a FIN (``recv`` returns b"") or, when the client closed with bytes
        of ours unread or after our last write, a reset (the faults write while they
        wait: a drip byte can land just before the client's close at its cap).
        """
        conn.settimeout(wait_s)
        try:
            if conn.recv(1) == b"":
                self._note_closed()
                return True
        except TimeoutError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            self._note_closed()
            return True
        return False

    def _fault(self, conn: socket.socket, step: str) -> None:
        end = time.monotonic() + self.hold_s
        if step == "silent":
            self._client_closed(conn, self.hold_s)
            return
        if step == "junk":
            conn.sendall(self.EVENT_HEAD)
            # no line end (nor what str.splitlines takes for one), no colon: never an event
            junk = bytes(b for b in range(32, 256) if b not in b":\x85")
            while time.monotonic() < end and not self._stop.is_set():
                conn.sendall(junk)
                if self._client_closed(conn, 0.02):
                    return
            return
        if step == "drip-after-text":
            conn.sendall(self.EVENT_HEAD + self.FIRST)
            rest = self.REST
        else:
            body = self.BODY + b"data: [DONE]\n\n"
            rest = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + body
        for byte in rest:
            if time.monotonic() >= end or self._stop.is_set():
                return
            conn.sendall(bytes([byte]))
            if self._client_closed(conn, self.drip_s):
                return

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self._thread.join(timeout=10)


def cancel_when_held(server: FaultServer, token: CancelToken, after_s: float) -> None:
    """From another thread: once the server holds a request, wait ``after_s`` and cancel."""

    def run() -> None:
        if server.holding.wait(10):
            time.sleep(after_s)
            token.cancel()

    threading.Thread(target=run, daemon=True).start()


def cancel_delays(
    server: FaultServer, work: Callable[[CancelToken], Any]
) -> tuple[list[float], list[Any]]:
    """Five runs of ``work(token)``, each cancelled 50-330 ms into the server's hold.

    Returns, per run, the seconds from the cancel to ``work`` returning, and what it
    returned or raised.
    """
    delays, outcomes = [], []
    for run in range(5):
        server.holding.clear()
        token = CancelToken()
        cancel_when_held(server, token, 0.05 + 0.07 * run)
        outcome, _ = bounded(lambda token=token: work(token), 10)
        delays.append(time.perf_counter() - token.cancelled_at)
        outcomes.append(outcome)
    return delays, outcomes
