"""The remote backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import logging
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest
from lsp_assist.backends.factory import create_backend
from lsp_assist.backends.remote import (
    CircuitBreaker,
    RemoteBackend,
    _Interrupter,
    pseudo_detokenize,
    pseudo_tokenize,
)
from lsp_assist.config import ModelSettings
from lsp_assist.errors import CircuitOpenError, RemoteBackendError

from .conftest import code_text

KEY = "test-secret-key-123"
KEY_ENV = "LSP_ASSIST_TEST_REMOTE_KEY"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """A llama-cpp-python server subprocess serving SmolLM2."""

    def __init__(self, model: Path, port: int) -> None:
        self.model = model
        self.port = port
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
            "1024",
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


@pytest.fixture(scope="module")
def server(smol_path: Path) -> Iterator[Server]:
    srv = Server(smol_path, _free_port())
    srv.start()
    yield srv
    srv.kill()


def _settings(url: str, **kw: Any) -> ModelSettings:
    return ModelSettings(
        backend="remote",
        remote_url=url,
        remote_api_key_env=KEY_ENV,
        remote_connect_timeout_ms=1000,
        remote_read_timeout_ms=20_000,
        prompt_timeout_ms=20_000,
        generation_timeout_ms=20_000,
        **kw,
    )


class ScriptedServer:
    """An HTTP/1.1 server on 127.0.0.1 that plays a script, one step per request.

    ``"answer"``: a complete streamed completion ("42"), with a Content-Length so the
    connection stays open for the next request. ``"silent"``: read the request, then send
    nothing (no headers, no body), as a server still evaluating a long prompt does,
    until the client closes the connection (``closed`` is set) or ``hold_s`` passes.
    Connections are served one at a time; ``ports`` lists the client port of each
    request, so a reused keep-alive connection shows as a repeated port.
    """

    BODY = b'data: {"choices":[{"text":"42","finish_reason":"length"}]}\n\n'

    def __init__(self, script: Sequence[str], hold_s: float = 5.0) -> None:
        self.script = list(script)
        self.hold_s = hold_s
        self.ports: list[int] = []
        self.silent = threading.Event()
        self.closed = threading.Event()
        self.closed_at = 0.0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(10)
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _serve(self) -> None:
        try:
            while self.script:
                conn, addr = self._sock.accept()
                with conn:
                    self._handle(conn, int(addr[1]))
        except OSError:  # accept timed out or the test closed the socket
            pass

    def _handle(self, conn: socket.socket, port: int) -> None:
        buf = b""
        while self.script:
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
            self.ports.append(port)
            if self.script.pop(0) == "answer":
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                    b"Content-Length: %d\r\n\r\n%s" % (len(self.BODY), self.BODY)
                )
                continue
            self.silent.set()
            conn.settimeout(self.hold_s)
            try:
                if conn.recv(1) == b"":
                    self.closed_at = time.perf_counter()
                    self.closed.set()
            except TimeoutError:
                pass  # the client never gave up: close from this side
            return

    def close(self) -> None:
        self._sock.close()
        self._thread.join(timeout=10)


def _cancel_when_silent(server: ScriptedServer, token: CancelToken, after_s: float) -> None:
    """From another thread: once the server holds a request, wait ``after_s`` and cancel."""

    def run() -> None:
        if server.silent.wait(10):
            time.sleep(after_s)
            token.cancel()

    threading.Thread(target=run, daemon=True).start()


# --- model-free ----------------------------------------------------------------------------


def test_cancel_token_callbacks() -> None:
    token = CancelToken()
    calls: list[str] = []
    token.add_callback(lambda: calls.append("a"))
    remove_b = token.add_callback(lambda: calls.append("b"))

    def broken() -> None:
        raise RuntimeError("boom")

    token.add_callback(broken)
    token.add_callback(lambda: calls.append("c"))
    remove_b()
    assert calls == []
    token.cancel("first")  # a failing callback neither stops the others nor raises
    token.cancel("second")
    assert calls == ["a", "c"] and token.reason == "first"
    token.add_callback(lambda: calls.append("late"))  # already cancelled: runs at once
    assert calls == ["a", "c", "late"]


class _SocketStream(httpcore.NetworkStream):
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, info: str) -> Any:
        return self.sock if info == "socket" else None


def test_interrupter_cancel_during_connect_and_after_disarm() -> None:
    a, b = socket.socketpair()
    c, d = socket.socketpair()
    with a, b, c, d:
        b.settimeout(1.0)  # fail, not hang, if nothing shuts the connection down
        d.settimeout(1.0)
        early = _Interrupter()
        early.fire()  # cancelled while the connection was still being made
        early.bind(_SocketStream(a))  # its first read or write shuts it down at once
        assert b.recv(1) == b""
        late = _Interrupter()
        late.bind(_SocketStream(c))
        late.disarm()  # the request is over; the connection may serve another one
        late.fire()
        c.sendall(b"x")
        assert d.recv(1) == b"x" and not late.fired


def test_cancel_while_the_server_evaluates_the_prompt() -> None:
    server = ScriptedServer(["silent"])
    backend = RemoteBackend(_settings(server.url), tokenizer="estimate", backoff_s=0.01)
    try:
        token = CancelToken()
        _cancel_when_silent(server, token, 0.1)
        result = backend.generate(
            GenerationRequest(prompt_tokens=backend.tokenize("def f(x):\n"), cancel=token)
        )
        returned_at = time.perf_counter()
        assert token.cancelled and result.stop_reason == "cancelled" and result.text == ""
        assert returned_at - token.cancelled_at < 0.25  # not when the server speaks (5 s)
        assert server.closed.wait(1.0), "the server never saw the connection close"
        assert server.closed_at - token.cancelled_at < 0.25
        assert len(server.ports) == 1  # no retry
        stats = backend.stats()
        assert stats["cancelled"] == 1 and stats["failures"] == 0 and stats["retries"] == 0
        assert stats["circuit"] == "closed" and backend.breaker.failures == 0
    finally:
        backend.close()
        server.close()


def test_cancel_on_a_reused_connection_and_a_late_cancel_spares_the_pool() -> None:
    server = ScriptedServer(["answer", "silent"])
    backend = RemoteBackend(_settings(server.url), tokenizer="estimate")
    try:
        prompt = backend.tokenize("x = ")
        done = CancelToken()
        first = backend.generate(GenerationRequest(prompt_tokens=prompt, cancel=done))
        assert first.text == "42" and first.stop_reason == "length"
        done.cancel()  # after the request: must not shut down the now idle connection
        token = CancelToken()
        _cancel_when_silent(server, token, 0.1)
        second = backend.generate(GenerationRequest(prompt_tokens=prompt, cancel=token))
        returned_at = time.perf_counter()
        assert second.stop_reason == "cancelled" and second.text == ""
        assert returned_at - token.cancelled_at < 0.25
        assert len(server.ports) == 2 and server.ports[0] == server.ports[1]  # kept alive
        assert server.closed.wait(1.0), "the server never saw the connection close"
        assert backend.stats()["failures"] == 0
    finally:
        backend.close()
        server.close()


def test_a_caller_transport_still_works_without_the_socket_hook() -> None:
    body = ScriptedServer.BODY.decode()

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"Content-Type": "text/event-stream"})

    backend = RemoteBackend(
        _settings("http://remote.invalid"),
        tokenizer="estimate",
        transport=httpx.MockTransport(handler),
    )
    try:
        result = backend.generate(GenerationRequest(prompt_tokens=backend.tokenize("x = ")))
        assert result.text == "42" and result.stop_reason == "length"
    finally:
        backend.close()


def test_pseudo_tokens_round_trip() -> None:
    text = "def f(x):\n    return 'héllo ✓' + x  # 🎉"
    tokens = pseudo_tokenize(text)
    assert pseudo_detokenize(tokens) == text
    assert len(tokens) == -(-len(text) // 4)


def test_circuit_breaker_states() -> None:
    breaker = CircuitBreaker(threshold=2, cooldown_s=0.05)
    breaker.failure()
    breaker.check()
    breaker.failure()
    assert breaker.state == "open"
    with pytest.raises(CircuitOpenError):
        breaker.check()
    time.sleep(0.06)
    assert breaker.state == "half-open"
    breaker.check()
    breaker.failure()  # a failed probe re-opens at once
    assert breaker.state == "open"
    time.sleep(0.06)
    breaker.success()
    assert breaker.state == "closed"


def test_unreachable_server_maps_errors_and_opens_circuit() -> None:
    settings = _settings(f"http://127.0.0.1:{_free_port()}", remote_retries=1)
    backend = RemoteBackend(
        settings, tokenizer="estimate", circuit_threshold=2, circuit_cooldown_s=30, backoff_s=0.01
    )
    try:
        request = GenerationRequest(prompt_tokens=backend.tokenize("x = "), max_tokens=4)
        for _ in range(2):
            with pytest.raises(RemoteBackendError, match="after 2 attempt"):
                backend.generate(request)
        started = time.perf_counter()
        with pytest.raises(CircuitOpenError):
            backend.generate(request)
        assert time.perf_counter() - started < 0.05
        assert backend.stats()["circuit"] == "open"
    finally:
        backend.close()


# --- against the real server ---------------------------------------------------------------


@pytest.mark.slow
def test_streaming_with_server_tokenizer(
    server: Server, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    caplog.set_level(logging.DEBUG)
    backend = RemoteBackend(_settings(server.url))
    try:
        tokens = backend.tokenize("def greet(name):\n    return")
        assert backend.token_mode == "server"
        assert backend.detokenize(tokens) == "def greet(name):\n    return"
        pieces: list[str] = []
        result = backend.generate(
            GenerationRequest(prompt_tokens=tokens, max_tokens=12, on_text=pieces.append)
        )
        assert result.text and "".join(pieces) == result.text
        assert 0 < result.ttft_ms <= result.latency_ms
        assert result.stop_reason in ("length", "eos", "stop")
        stop = backend.generate(GenerationRequest(prompt_tokens=tokens, max_tokens=30, stop=["\n"]))
        assert "\n" not in stop.text
        stats = backend.stats()
        assert stats["api_key_set"] is True and stats["failures"] == 0
        assert KEY not in repr(backend) and KEY not in str(stats) and KEY not in caplog.text
    finally:
        backend.close()


@pytest.mark.slow
def test_local_vocabulary_tokenizer(
    server: Server, smol_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = create_backend(_settings(server.url, model_path=str(smol_path)))
    assert isinstance(backend, RemoteBackend)
    try:
        assert backend.token_mode == "local"
        assert backend.info.special_tokens["<file_sep>"] == 5
        tokens = backend.tokenize("import os\n")
        result = backend.generate(GenerationRequest(prompt_tokens=tokens, max_tokens=8))
        assert result.tokens and backend.detokenize(result.tokens) == result.text
    finally:
        backend.close()


@pytest.mark.slow
def test_wrong_key_is_an_error_without_the_key(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, "wrong-key-456")
    backend = RemoteBackend(_settings(server.url, remote_retries=0), tokenizer="estimate")
    try:
        with pytest.raises(RemoteBackendError) as err:
            backend.generate(GenerationRequest(prompt_tokens=backend.tokenize("x"), max_tokens=2))
        assert "401" in str(err.value) and "wrong-key-456" not in str(err.value)
    finally:
        backend.close()


@pytest.mark.slow
def test_cancel_stops_the_stream(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = RemoteBackend(_settings(server.url))
    try:
        token = CancelToken()
        result = backend.generate(
            GenerationRequest(
                prompt_tokens=backend.tokenize("for i in range(10):\n"),
                max_tokens=100,
                cancel=token,
                on_text=lambda _t: token.cancel(),
            )
        )
        assert result.stop_reason == "cancelled"
        assert len(result.text) < 40
    finally:
        backend.close()


@pytest.mark.slow
def test_cancel_before_the_first_token_on_a_real_server(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    backend = RemoteBackend(_settings(server.url), tokenizer="estimate")
    try:
        # ~560 tokens, new to the server's KV cache: seconds of prompt evaluation here
        prompt = backend.tokenize(f"# {uuid.uuid4()}\n{code_text(2000)}")
        token = CancelToken()
        timer = threading.Timer(0.2, token.cancel)
        timer.start()
        result = backend.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=8, cancel=token)
        )
        returned_at = time.perf_counter()
        timer.join()
        assert result.stop_reason == "cancelled" and result.text == "" and result.ttft_ms == 0
        assert returned_at - token.cancelled_at < 0.25
        stats = backend.stats()
        assert stats["failures"] == 0 and stats["circuit"] == "closed"
    finally:
        backend.close()


@pytest.mark.slow
def test_server_killed_mid_request_then_recovers(
    smol_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    srv = Server(smol_path, _free_port())
    srv.start()
    backend = RemoteBackend(
        _settings(srv.url, remote_retries=1),
        tokenizer="estimate",
        circuit_threshold=2,
        circuit_cooldown_s=1.0,
        backoff_s=0.05,
    )
    try:
        prompt = backend.tokenize("# a long list of numbers\nnumbers = [1, 2, 3,")
        with pytest.raises(RemoteBackendError, match="broke mid-stream"):
            backend.generate(
                GenerationRequest(
                    prompt_tokens=prompt, max_tokens=200, on_text=lambda _t: srv.kill()
                )
            )
        with pytest.raises(RemoteBackendError):
            backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        assert backend.stats()["circuit"] == "open"
        started = time.perf_counter()
        with pytest.raises(CircuitOpenError):
            backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        assert time.perf_counter() - started < 0.05  # refused without touching the network
        srv.start()
        time.sleep(1.0)
        result = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        assert result.text
        assert backend.stats()["circuit"] == "closed"
    finally:
        backend.close()
        srv.kill()
