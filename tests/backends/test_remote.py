"""The remote backend against a real ``python -m llama_cpp.server`` on 127.0.0.1."""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest
from lsp_assist.backends.factory import create_backend
from lsp_assist.backends.remote import (
    CircuitBreaker,
    RemoteBackend,
    pseudo_detokenize,
    pseudo_tokenize,
)
from lsp_assist.config import ModelSettings
from lsp_assist.errors import CircuitOpenError, RemoteBackendError

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


# --- model-free ----------------------------------------------------------------------------


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
