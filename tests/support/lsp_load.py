"""A load client for ``lsp-assist serve``: many requests, cancels, and the server's resources.

Built on :class:`tests.support.jsonrpc.StdioClient` (real JSON-RPC over stdio). Requests
can be left in flight and collected later (so a client cancel can be sent meanwhile), and
the server process's RSS, threads and open file descriptors are read from ``/proc``.
Used by the soak test, ``benchmarks/soak.py`` and ``bench_index_load.py``.
"""

from __future__ import annotations

import os
import queue
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.jsonrpc import JsonRpcError, StdioClient

CAPABILITIES: dict[str, Any] = {
    "textDocument": {"inlineCompletion": {}, "completion": {}},
    "window": {"workDoneProgress": True},
}


class LoadClient(StdioClient):
    """A stdio client whose requests may overlap; responses are kept by id."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._done: dict[int, dict[str, Any]] = {}
        self.started = time.monotonic()

    def initialize_workspace(self, root: Path, options: dict[str, Any]) -> Any:
        """Send initialize (with inline completion and progress support) + initialized."""
        params = {
            "processId": os.getpid(),
            "capabilities": CAPABILITIES,
            "initializationOptions": options,
            "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": root.name}],
        }
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": params})
        result = self.result(request_id, timeout=120)
        self.notify("initialized", {})
        self.started = time.monotonic()
        return result

    def start(self, method: str, params: Any) -> int:
        """Send a request without waiting; return its id."""
        self._next_id += 1
        request_id = self._next_id
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return request_id

    def cancel(self, request_id: int) -> None:
        """Send ``$/cancelRequest`` for a request in flight."""
        self.notify("$/cancelRequest", {"id": request_id})

    def result(self, request_id: int, timeout: float = 60) -> Any:
        """Wait for the response of ``request_id``; raise JsonRpcError on an error."""
        message = self.response(request_id, timeout)
        if "error" in message:
            raise JsonRpcError(message["error"])
        return message.get("result")

    def response(self, request_id: int, timeout: float = 60) -> dict[str, Any]:
        """Wait for the whole response message of ``request_id`` (queue.Empty on timeout)."""
        deadline = time.monotonic() + timeout
        while request_id not in self._done:
            left = deadline - time.monotonic()
            if left <= 0:
                raise queue.Empty(f"no response to request {request_id} in {timeout} s")
            message = self._responses.get(timeout=left)
            if message is None:
                raise EOFError("the server closed its output")
            if isinstance(message.get("id"), int):
                self._done[message["id"]] = message
        return self._done.pop(request_id)

    def command(self, name: str, *args: Any) -> Any:
        """Run a workspace/executeCommand and return its result."""
        request_id = self.start(
            "workspace/executeCommand", {"command": name, "arguments": list(args)}
        )
        return self.result(request_id)

    # -- documents --------------------------------------------------------------------

    def open(self, path: Path, text: str, language: str = "python", version: int = 1) -> str:
        """Send didOpen; return the URI."""
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {
                "textDocument": {
                    "uri": uri,
                    "languageId": language,
                    "version": version,
                    "text": text,
                }
            },
        )
        return uri

    def close_document(self, uri: str) -> None:
        """Send didClose."""
        self.notify("textDocument/didClose", {"textDocument": {"uri": uri}})

    def insert(self, uri: str, version: int, line: int, column: int, text: str) -> None:
        """Send a didChange inserting ``text`` at (line, column)."""
        pos = {"line": line, "character": column}
        self.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": text}],
            },
        )

    def inline(self, uri: str, line: int, column: int, *, automatic: bool = False) -> int:
        """Start an inline completion request; return its id."""
        return self.start(
            "textDocument/inlineCompletion",
            {
                "textDocument": {"uri": uri},
                "position": {"line": line, "character": column},
                "context": {"triggerKind": 2 if automatic else 1},
            },
        )

    # -- the server's resources -------------------------------------------------------

    def index_finished(self) -> bool:
        """True once the server has ended its indexing progress (not the model's)."""
        return any(
            n.get("method") == "$/progress"
            and n.get("params", {}).get("token") == "lsp-assist/index"
            and isinstance(n.get("params", {}).get("value"), dict)
            and n["params"]["value"].get("kind") == "end"
            for n in self.notifications
        )

    def proc_status(self, key: str) -> int:
        """Return one numeric field of /proc/<pid>/status (kB for memory fields)."""
        text = Path(f"/proc/{self.process.pid}/status").read_text()
        for line in text.splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
        raise KeyError(key)

    def rss_mb(self) -> float:
        """Return the server's resident set size in MB."""
        return self.proc_status("VmRSS") / 1024

    def peak_rss_mb(self) -> float:
        """Return the server's peak resident set size in MB."""
        return self.proc_status("VmHWM") / 1024

    def threads(self) -> int:
        """Return the server's thread count."""
        return self.proc_status("Threads")

    def fds(self) -> int:
        """Return the number of file descriptors the server has open."""
        return len(os.listdir(f"/proc/{self.process.pid}/fd"))

    def fd_targets(self) -> list[str]:
        """Return what each of the server's open file descriptors points at, sorted."""
        targets = []
        for fd in os.listdir(f"/proc/{self.process.pid}/fd"):
            try:
                targets.append(os.readlink(f"/proc/{self.process.pid}/fd/{fd}"))
            except OSError:  # closed between the listing and the read
                continue
        return sorted(targets)


def suggestion_of(result: Any) -> str:
    """Return the first inline suggestion's text of a response result ('' when none)."""
    items = result.get("items", []) if isinstance(result, dict) else (result or [])
    if not items:
        return ""
    text = items[0].get("insertText", "")
    return text if isinstance(text, str) else str(text.get("value", ""))


# -- soak ------------------------------------------------------------------------------

TRACE_HOOK = '''\
"""Written by tests/support/lsp_load.py: tracemalloc snapshots of the server on SIGUSR1
(tracing starts at the first)."""
import gc, os, signal, tracemalloc

_out = os.environ.get("SOAK_TRACE_DIR")
if _out:
    _count = [0]

    def _dump(signum, frame):
        if not tracemalloc.is_tracing():  # from the first snapshot on: startup stays fast
            tracemalloc.start(int(os.environ.get("SOAK_TRACE_FRAMES", "1")))
        gc.collect()
        _count[0] += 1
        name = os.path.join(_out, "snap-%03d" % _count[0])
        snapshot = tracemalloc.take_snapshot()
        snapshot.dump(name + ".pickle")
        blocks = sum(stat.count for stat in snapshot.statistics("filename"))
        with open(name + ".tmp", "w") as fh:
            fh.write("%d %d" % (tracemalloc.get_traced_memory()[0], blocks))
        os.replace(name + ".tmp", name + ".done")

    signal.signal(signal.SIGUSR1, _dump)
'''


def trace_env(env: dict[str, str], directory: Path, frames: int = 1) -> dict[str, str]:
    """Return ``env`` for a server that dumps tracemalloc snapshots into ``directory``."""
    hook = directory / "hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(TRACE_HOOK)
    path = env.get("PYTHONPATH", "")
    return {
        **env,
        "PYTHONPATH": f"{hook}{os.pathsep}{path}" if path else str(hook),
        "SOAK_TRACE_DIR": str(directory),
        "SOAK_TRACE_FRAMES": str(frames),
    }


def take_snapshot(
    client: StdioClient, directory: Path, number: int, timeout: float = 120
) -> tuple[int, int]:
    """Ask the server for tracemalloc snapshot ``number``; return its traced bytes and
    live blocks (allocations)."""
    import signal

    done = directory / f"snap-{number:03d}.done"
    client.process.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while not done.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no snapshot {number} from the server")
        time.sleep(0.05)
    size, blocks = done.read_text().split()
    return int(size), int(blocks)


def snapshot_growth(directory: Path, first: int, last: int, top: int = 12) -> list[str]:
    """Return the source lines whose traced memory grew most between two snapshots."""
    import tracemalloc

    old = tracemalloc.Snapshot.load(str(directory / f"snap-{first:03d}.pickle"))
    new = tracemalloc.Snapshot.load(str(directory / f"snap-{last:03d}.pickle"))
    return [str(stat) for stat in new.compare_to(old, "lineno")[:top]]


@dataclass
class _Doc:
    uri: str
    line: int
    indent: str
    version: int
    typed: str = ""


@dataclass(kw_only=True)
class SoakReport:
    """What a soak did and what the server's resources did meanwhile."""

    requests: int = 0
    cancels: int = 0
    switches: int = 0
    keystrokes: int = 0
    shown: int = 0
    empty: int = 0
    cancelled: int = 0
    errors: list[str] = field(default_factory=list)
    unanswered: int = 0
    seconds: float = 0.0
    samples: list[dict[str, float]] = field(default_factory=list)
    """One per ``sample_every`` requests: requests, rss_mb, threads, fds (with a trace:
    traced_mb and traced_blocks)."""
    fd_targets: list[list[str]] = field(default_factory=list)
    """At each sample, what the server's descriptors point at (a leak's name)."""


def _typing_spot(text: str) -> tuple[int, str]:
    """Return a line in the middle of a function body and its indentation."""
    lines = text.split("\n")
    for number in range(len(lines) // 3, len(lines)):
        match = re.match(r"^(\s+)return\b", lines[number])
        if match:
            return number, match.group(1)
    return len(lines) - 1, ""


def soak(
    client: LoadClient,
    files: list[Path],
    requests: int,
    *,
    sample_every: int = 100,
    switch_every: int = 25,
    cancel_every: int = 7,
    timeout: float = 120,
    trace_dir: Path | None = None,
) -> SoakReport:
    """Type into ``files`` in turn, one inline request per keystroke; return the report.

    Each keystroke is a didChange and an inline completion request (every third one
    invoked, the others automatic); every ``cancel_every``-th request is cancelled by the
    client at once and the next one sent without waiting (so they overlap); every
    ``switch_every`` requests the replay moves to the next file (opened if needed, and
    every other switch closes the file it leaves). A typed line is deleted once written,
    and the next line's text differs (``value_<n>``), so caches see new text throughout.
    """
    report = SoakReport()
    docs: dict[Path, _Doc] = {}
    pending: list[int] = []
    started = time.monotonic()
    current: Path | None = None

    def collect(request_id: int) -> None:
        try:
            message = client.response(request_id, timeout)
        except queue.Empty:
            report.unanswered += 1
            return
        error = message.get("error")
        if error is not None:
            if error.get("code") == -32800:  # RequestCancelled
                report.cancelled += 1
            else:
                report.errors.append(f"{error.get('code')}: {error.get('message')}")
        elif suggestion_of(message.get("result")):
            report.shown += 1
        else:
            report.empty += 1

    def sample() -> None:
        row = {
            "requests": float(report.requests),
            "rss_mb": round(client.rss_mb(), 1),
            "threads": float(client.threads()),
        }
        # The fewest of a few readings: a descriptor held for a moment (a file read after
        # the switch just made) is in one of them, a leaked one is in all.
        readings = []
        for _ in range(5):
            readings.append(client.fd_targets())
            time.sleep(0.1)
        targets = min(readings, key=len)
        row["fds"] = float(len(targets))
        report.fd_targets.append(targets)
        if trace_dir is not None:
            size, blocks = take_snapshot(client, trace_dir, len(report.samples) + 1)
            row["traced_mb"] = round(size / 2**20, 2)
            row["traced_blocks"] = float(blocks)
        report.samples.append(row)

    sample()
    for i in range(requests):
        if i % switch_every == 0:
            path = files[(i // switch_every) % len(files)]
            if current is not None and current != path and report.switches % 2 == 1:
                client.close_document(docs.pop(current).uri)
            if path not in docs:
                text = path.read_text()
                line, indent = _typing_spot(text)
                doc = _Doc(client.open(path, text), line, indent, 1)
                # a fresh line to type on
                doc.version += 1
                client.insert(doc.uri, doc.version, line, 0, indent + "\n")
                docs[path] = doc
            current = path
            report.switches += 1
        doc = docs[current]
        word = f"value_{i // 12} = total("
        if len(doc.typed) >= len(word):  # the line is written: delete it
            doc.version += 1
            client.notify(
                "textDocument/didChange",
                {
                    "textDocument": {"uri": doc.uri, "version": doc.version},
                    "contentChanges": [
                        {
                            "range": {
                                "start": {"line": doc.line, "character": len(doc.indent)},
                                "end": {
                                    "line": doc.line,
                                    "character": len(doc.indent) + len(doc.typed),
                                },
                            },
                            "text": "",
                        }
                    ],
                },
            )
            doc.typed = ""
        char = word[len(doc.typed)]
        doc.version += 1
        client.insert(doc.uri, doc.version, doc.line, len(doc.indent) + len(doc.typed), char)
        doc.typed += char
        report.keystrokes += 1
        request_id = client.inline(
            doc.uri, doc.line, len(doc.indent) + len(doc.typed), automatic=i % 3 != 0
        )
        report.requests += 1
        for earlier in pending:
            collect(earlier)
        pending.clear()
        if cancel_every and i % cancel_every == cancel_every - 1:
            client.cancel(request_id)
            report.cancels += 1
            pending.append(request_id)  # answered later, while the next one runs
        else:
            collect(request_id)
        if report.requests % sample_every == 0:
            sample()
    for earlier in pending:
        collect(earlier)
    if report.requests % sample_every:
        sample()
    report.seconds = time.monotonic() - started
    return report
