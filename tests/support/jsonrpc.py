"""A minimal synchronous JSON-RPC client for ``lsp-assist serve`` over stdio.

pytest-lsp is the client for feature tests; this one is for tests that drive
thousands of messages from a synchronous loop (hypothesis) or need the raw stream.
Server-to-client requests (progress tokens, configuration) are answered with null.
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import IO, Any

SERVE = [sys.executable, "-m", "lsp_assist.cli.main", "serve", "--log-level", "WARNING"]


class JsonRpcError(Exception):
    """An error response from the server."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = int(error.get("code", 0))


def frame(message: dict[str, Any]) -> bytes:
    """Return a message with its Content-Length header."""
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)


def read_message(stream: IO[bytes]) -> dict[str, Any] | None:
    """Read one framed message (None at end of stream)."""
    length = None
    while True:
        line = stream.readline()
        if not line:
            return None
        if line in (b"\r\n", b"\n"):
            if length is not None:
                break
            continue
        name, _, value = line.decode("ascii").partition(":")
        if name.strip().lower() == "content-length":
            length = int(value.strip())
    result: dict[str, Any] = json.loads(stream.read(length))
    return result


class StdioClient:
    """Start a server subprocess and exchange messages with it synchronously."""

    def __init__(
        self,
        args: list[str] | None = None,
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            args or SERVE,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self._next_id = 0
        self._responses: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.notifications: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._drain_stderr, daemon=True).start()

    def _drain_stderr(self) -> None:
        assert self.process.stderr is not None
        for raw in self.process.stderr:
            self.stderr_lines.append(raw.decode("utf-8", "replace"))

    def _read(self) -> None:
        assert self.process.stdout is not None
        while (message := read_message(self.process.stdout)) is not None:
            if "method" in message and "id" in message:
                self.send({"jsonrpc": "2.0", "id": message["id"], "result": None})
            elif "method" in message:
                self.notifications.append(message)
            else:
                self._responses.put(message)
        self._responses.put(None)

    def send(self, message: dict[str, Any]) -> None:
        """Write one message."""
        assert self.process.stdin is not None
        with self._lock:
            self.process.stdin.write(frame(message))
            self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        """Send a notification."""
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params: Any, timeout: float = 30) -> Any:
        """Send a request and return its result (raises JsonRpcError on an error)."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        while True:
            message = self._responses.get(timeout=timeout)
            if message is None:
                raise EOFError("the server closed its output")
            if message.get("id") != request_id:
                continue
            if "error" in message:
                raise JsonRpcError(message["error"])
            return message.get("result")

    def command(self, name: str, *args: Any) -> Any:
        """Run a workspace/executeCommand."""
        return self.request("workspace/executeCommand", {"command": name, "arguments": list(args)})

    def initialize(self, root: Path | None, options: dict[str, Any]) -> Any:
        """Send initialize + initialized."""
        params: dict[str, Any] = {
            "processId": None,
            "capabilities": {},
            "initializationOptions": options,
            "rootUri": root.as_uri() if root else None,
        }
        result = self.request("initialize", params, timeout=60)
        self.notify("initialized", {})
        return result

    def close(self) -> int:
        """Shut the server down and return its exit code."""
        try:
            self.request("shutdown", None, timeout=10)
            self.notify("exit", None)
        except (OSError, EOFError, queue.Empty):
            pass
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait()


def replace_range(
    client: StdioClient,
    uri: str,
    version: int,
    start: tuple[int, int],
    end: tuple[int, int],
    text: str,
) -> None:
    """Send one didChange replacing the range ``start``..``end`` (LSP positions) by ``text``."""
    rng = {
        "start": {"line": start[0], "character": start[1]},
        "end": {"line": end[0], "character": end[1]},
    }
    client.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": rng, "text": text}],
        },
    )
