"""The remote backend against faulty servers, a real ``python -m llama_cpp.server``
(127.0.0.1) and, over stdio, ``lsp-assist serve`` pointing to a faulty server."""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.approx_tokens import ApproxTokenizer
from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.backends.circuit import CircuitBreaker
from lsp_assist.backends.factory import create_backend
from lsp_assist.backends.models import small_model_path
from lsp_assist.backends.remote import RemoteBackend
from lsp_assist.backends.transport import Exchange
from lsp_assist.config import ModelSettings
from lsp_assist.errors import CircuitOpenError, GenerationCancelled, RemoteBackendError
from tests.e2e.conftest import (
    SERVER,
    inline_params,
    open_half_typed,
    server_env,
    start_session,
)
from tests.support.bounded import bounded
from tests.support.ports import free_port
from tests.support.remote_servers import (
    KEY,
    KEY_ENV,
    FaultServer,
    LlamaCppPythonServer,
    cancel_delays,
    cancel_when_held,
)

from .conftest import code_text


@pytest.fixture(scope="module")
def server(smol_path: Path) -> Iterator[LlamaCppPythonServer]:
    srv = LlamaCppPythonServer(smol_path, free_port())
    srv.start()
    yield srv
    srv.kill()


READ_TIMEOUT_S = 20.0
"""The read timeout and caps of :func:`_settings`: what ends a request nothing cancels."""


def _settings(url: str, **kw: Any) -> ModelSettings:
    return ModelSettings(
        backend="remote",
        remote_url=url,
        remote_api_key_env=KEY_ENV,
        remote_connect_timeout_ms=1000,
        remote_read_timeout_ms=int(READ_TIMEOUT_S * 1000),
        prompt_timeout_ms=int(READ_TIMEOUT_S * 1000),
        generation_timeout_ms=int(READ_TIMEOUT_S * 1000),
        **kw,
    )


FAULTS = ["silent", "junk", "drip", "drip-after-text"]
PROMPT_CAP = 1.0
GENERATION_CAP = 1.0
SLACK = 0.3
"""What a request may take past its caps: thread wake-ups on a busy 2-core machine."""
DRIP_S = 60.0
"""A drip slower than any wait of a cancel test (``bounded``'s 10 s): while the test runs
the server sends nothing after its first byte, so a request that returns was freed by
its cancel and nothing else (how fast is measured by bench_remote_faults.py)."""


def _count_sends(backend: RemoteBackend, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record the URL of every request ``backend``'s HTTP client sends from now on."""
    client = backend._client
    sent: list[str] = []
    send = client.send

    def counted(request: httpx.Request, **kw: Any) -> httpx.Response:
        sent.append(str(request.url))
        return send(request, **kw)

    monkeypatch.setattr(client, "send", counted)
    return sent


def _capped(url: str, **kw: Any) -> ModelSettings:
    """Settings as a user has them (30 s read timeout, 2 retries) with short caps."""
    values: dict[str, Any] = {
        "backend": "remote",
        "remote_url": url,
        "remote_api_key_env": KEY_ENV,
        "prompt_timeout_ms": int(PROMPT_CAP * 1000),
        "generation_timeout_ms": int(GENERATION_CAP * 1000),
        **kw,
    }
    return ModelSettings(**values)


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
        early = Exchange()
        early.fire()  # cancelled while the connection was still being made
        early.bind(_SocketStream(a))  # its first read or write shuts it down at once
        assert b.recv(1) == b""
        late = Exchange()
        late.bind(_SocketStream(c))
        late.disarm()  # the request is over; the connection may serve another one
        late.fire()
        c.sendall(b"x")
        assert d.recv(1) == b"x" and not late.fired


def test_cancel_while_the_server_evaluates_the_prompt() -> None:
    server = FaultServer(["silent"])
    backend = RemoteBackend(_settings(server.url), tokenizer="estimate", backoff_s=0.01)
    try:
        token = CancelToken()
        cancel_when_held(server, token, 0.1)
        result = backend.generate(
            GenerationRequest(prompt_tokens=backend.tokenize("def f(x):\n"), cancel=token)
        )
        returned_at = time.perf_counter()
        assert token.cancelled and result.stop_reason == "cancelled" and result.text == ""
        # the silent server never speaks: returned, and the connection closed, before the
        # read timeout could end the request
        assert server.closed.wait(READ_TIMEOUT_S), "the server never saw the connection close"
        assert token.cancelled_at <= returned_at < server.held_at + READ_TIMEOUT_S
        assert token.cancelled_at <= server.closed_at < server.held_at + READ_TIMEOUT_S
        assert len(server.ports) == 1  # no retry
        stats = backend.stats()
        assert stats["cancelled"] == 1 and stats["failures"] == 0 and stats["retries"] == 0
        assert stats["circuit"] == "closed" and backend.breaker.failures == 0
    finally:
        backend.close()
        server.close()


def test_cancel_on_a_reused_connection_and_a_late_cancel_spares_the_pool() -> None:
    server = FaultServer(["answer", "silent"])
    backend = RemoteBackend(_settings(server.url), tokenizer="estimate")
    try:
        prompt = backend.tokenize("x = ")
        done = CancelToken()
        first = backend.generate(GenerationRequest(prompt_tokens=prompt, cancel=done))
        assert first.text == "42" and first.stop_reason == "length"
        done.cancel()  # after the request: must not shut down the now idle connection
        token = CancelToken()
        cancel_when_held(server, token, 0.1)
        second = backend.generate(GenerationRequest(prompt_tokens=prompt, cancel=token))
        returned_at = time.perf_counter()
        assert second.stop_reason == "cancelled" and second.text == ""
        assert token.cancelled_at <= returned_at < server.held_at + READ_TIMEOUT_S
        assert len(server.ports) == 2 and server.ports[0] == server.ports[1]  # kept alive
        assert server.closed.wait(1.0), "the server never saw the connection close"
        assert backend.stats()["failures"] == 0
    finally:
        backend.close()
        server.close()


def _generate_capped(backend: RemoteBackend, **kw: Any) -> tuple[GenerationResult, float]:
    """Generate against a fault; fail if it outlives its caps by more than 5 s."""
    request = GenerationRequest(prompt_tokens=backend.tokenize("def f(x):\n"), **kw)
    result, took = bounded(lambda: backend.generate(request), PROMPT_CAP + GENERATION_CAP + 5)
    if isinstance(result, Exception):
        raise result
    assert isinstance(result, GenerationResult)
    return result, took


@pytest.mark.parametrize("read_timeout_ms", [30_000, 400])
def test_a_silent_server_ends_within_the_caps_retries_included(read_timeout_ms: int) -> None:
    # 30 s: the read timeout never fires first; 400 ms: it does, twice, and each
    # retry must still end by the prompt cap
    server = FaultServer(["silent"])
    backend = RemoteBackend(
        _capped(server.url, remote_read_timeout_ms=read_timeout_ms),
        tokenizer="estimate",
        backoff_s=0.05,
    )
    try:
        result, took = _generate_capped(backend)
        assert result.stop_reason == "timeout" and result.text == ""
        assert PROMPT_CAP <= took <= PROMPT_CAP + GENERATION_CAP + SLACK
        stats = backend.stats()
        assert stats["timeouts"] == 1 and stats["failures"] == 1  # counts for the circuit
        assert stats["retries"] == (2 if read_timeout_ms < PROMPT_CAP * 1000 else 0)
    finally:
        backend.close()
        server.close()


def test_the_fault_server_sees_a_close_that_lands_after_its_drip_byte() -> None:
    """The client's close at its cap and the next drip byte are both due about 1 s in.

    When the byte lands first, the client's close (with it unread) is a reset, not a
    FIN: the server used to miss it, so the cap tests failed on a busy machine with
    "the client left the connection open" although the client had closed.
    """
    server = FaultServer(["drip"], drip_s=0.2)
    try:
        with socket.create_connection(("127.0.0.1", int(server.url.rsplit(":", 1)[1]))) as s:
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            assert s.recv(1) == b"H"
            deadline = time.monotonic() + 5
            while not _unread(s):  # the next byte arrived and stays unread
                assert time.monotonic() < deadline, "no second drip byte"
                time.sleep(0.01)
        assert server.closed.wait(2.0), "the server missed the client's close"
    finally:
        server.close()


def _unread(sock: socket.socket) -> bool:
    """True when bytes wait in ``sock``'s receive buffer."""
    try:
        return bool(sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT))
    except BlockingIOError:
        return False


@pytest.mark.parametrize("fault", ["junk", "drip"])
def test_junk_or_a_drip_before_any_text_ends_at_the_prompt_cap(fault: str) -> None:
    server = FaultServer([fault])
    backend = RemoteBackend(_capped(server.url), tokenizer="estimate", backoff_s=0.05)
    try:
        result, took = _generate_capped(backend)
        assert result.stop_reason == "timeout" and result.text == ""
        assert PROMPT_CAP <= took <= PROMPT_CAP + GENERATION_CAP + SLACK
        assert backend.breaker.failures == 1
        assert server.closed.wait(1.0), "the client left the connection open"
    finally:
        backend.close()
        server.close()


def test_a_drip_after_the_first_text_keeps_it_and_ends_at_the_generation_cap() -> None:
    server = FaultServer(["drip-after-text"])
    backend = RemoteBackend(_capped(server.url), tokenizer="estimate")
    try:
        result, took = _generate_capped(backend)
        assert result.stop_reason == "timeout" and result.text == "42"
        assert GENERATION_CAP <= took - result.ttft_ms / 1000 <= GENERATION_CAP + SLACK
        assert took <= PROMPT_CAP + GENERATION_CAP + SLACK
        assert backend.breaker.failures == 0 and backend.stats()["failures"] == 0
    finally:
        backend.close()
        server.close()


@pytest.mark.parametrize("fault", FAULTS)
def test_a_cancel_frees_a_stuck_request_before_the_server_sends_more(fault: str) -> None:
    server = FaultServer([fault], drip_s=DRIP_S)
    backend = RemoteBackend(
        _capped(server.url, prompt_timeout_ms=30_000, generation_timeout_ms=30_000),
        tokenizer="estimate",
    )
    try:
        delays, outcomes = cancel_delays(
            server,
            lambda token: backend.generate(
                GenerationRequest(prompt_tokens=backend.tokenize("x = "), cancel=token)
            ),
        )
        assert all(
            isinstance(r, GenerationResult) and r.stop_reason == "cancelled" for r in outcomes
        ), outcomes
        print(f"{fault}: cancel to return, max of 5: {max(delays) * 1000:.1f} ms")
        assert max(delays) < DRIP_S, delays  # before the server's next byte
        stats = backend.stats()
        assert stats["cancelled"] == 5 and stats["failures"] == 0 and stats["retries"] == 0
    finally:
        backend.close()
        server.close()


@pytest.mark.parametrize("fault", ["silent", "junk", "drip"])
def test_a_server_tokenizer_call_fails_within_the_prompt_cap_then_the_circuit_opens(
    fault: str,
) -> None:
    server = FaultServer([fault])
    backend = RemoteBackend(
        _capped(server.url), tokenizer="server", circuit_threshold=2, circuit_cooldown_s=30
    )
    try:
        for _ in range(2):
            error, took = bounded(lambda: backend.tokenize("import os\n"), PROMPT_CAP + 5)
            assert isinstance(error, RemoteBackendError), error
            assert not isinstance(error, CircuitOpenError)
            assert took <= PROMPT_CAP + SLACK
        asked = len(server.paths)
        error, _ = bounded(lambda: backend.tokenize("import os\n"), 1)
        assert isinstance(error, CircuitOpenError)
        assert len(server.paths) == asked  # refused without touching the network
        with pytest.raises(CircuitOpenError):
            backend.generate(GenerationRequest(prompt_tokens=[1, 2, 3]))
    finally:
        backend.close()
        server.close()


@pytest.mark.parametrize("fault", ["silent", "junk", "drip"])
def test_a_cancel_frees_a_server_tokenizer_call_before_the_server_sends_more(
    fault: str,
) -> None:
    # the context engine tokenizes without a token in hand: the scheduler runs the
    # completion under its token (CancelToken.call), and the tokenizer call finds it
    server = FaultServer([fault], drip_s=DRIP_S)
    backend = RemoteBackend(
        _capped(server.url, prompt_timeout_ms=30_000), tokenizer="server", circuit_threshold=99
    )
    try:
        delays, outcomes = cancel_delays(
            server, lambda token: token.call(backend.tokenize, "x = 1")
        )
        assert all(isinstance(e, GenerationCancelled) for e in outcomes), outcomes
        print(f"{fault}: tokenizer cancel to return, max of 5: {max(delays) * 1000:.1f} ms")
        assert max(delays) < DRIP_S, delays  # before the server's next byte
        assert backend.breaker.failures == 0  # a cancel says nothing of the server
    finally:
        backend.close()
        server.close()


def test_a_200_that_is_not_an_event_stream_is_an_error() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, text="<html>sign in</html>", headers={"Content-Type": "text/html"}
        )

    backend = RemoteBackend(
        _capped("http://remote.invalid"),
        tokenizer="estimate",
        transport=httpx.MockTransport(handler),
    )
    try:
        with pytest.raises(RemoteBackendError, match="text/html"):
            backend.generate(GenerationRequest(prompt_tokens=backend.tokenize("x = ")))
        assert backend.breaker.failures == 1
    finally:
        backend.close()


def test_a_caller_transport_still_works_without_the_socket_hook() -> None:
    body = FaultServer.BODY.decode()

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


def test_estimated_tokens_round_trip() -> None:
    # the estimate is the one model-free tokenizer (ApproxTokenizer): ids encode their
    # piece, so the prompt sent as text is exactly what was assembled
    text = "def f(x):\n    return 'héllo ✓' + x  # 🎉"
    backend = RemoteBackend(_settings("http://127.0.0.1:9"), tokenizer="estimate")
    try:
        tokens = backend.tokenize(text)
        assert tokens == ApproxTokenizer().tokenize(text)
        assert backend.detokenize(tokens) == text
        assert [backend.detokenize([t]) for t in tokens][:10] == [
            "def",
            " ",
            "f",
            "(",
            "x",
            ")",
            ":",
            "\n   ",
            " ",
            "return",
        ]
        assert backend.stats()["prompt_as_ids"] is False
    finally:
        backend.close()


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


def test_unreachable_server_maps_errors_and_opens_circuit(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _settings(f"http://127.0.0.1:{free_port()}", remote_retries=1)
    backend = RemoteBackend(
        settings, tokenizer="estimate", circuit_threshold=2, circuit_cooldown_s=30, backoff_s=0.01
    )
    try:
        request = GenerationRequest(prompt_tokens=backend.tokenize("x = "), max_tokens=4)
        sent = _count_sends(backend, monkeypatch)
        for _ in range(2):
            with pytest.raises(RemoteBackendError, match="after 2 attempt"):
                backend.generate(request)
        tried = len(sent)
        assert tried >= 4  # two attempts each
        with pytest.raises(CircuitOpenError):
            backend.generate(request)
        assert len(sent) == tried  # refused without touching the network
        assert backend.stats()["circuit"] == "open"
    finally:
        backend.close()


# --- against the real server ---------------------------------------------------------------


@pytest.mark.slow
def test_streaming_with_server_tokenizer(
    server: LlamaCppPythonServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
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
    server: LlamaCppPythonServer, smol_path: Path, monkeypatch: pytest.MonkeyPatch
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
    server: LlamaCppPythonServer, monkeypatch: pytest.MonkeyPatch
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
def test_cancel_stops_the_stream(
    server: LlamaCppPythonServer, monkeypatch: pytest.MonkeyPatch
) -> None:
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
    server: LlamaCppPythonServer, monkeypatch: pytest.MonkeyPatch
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
    srv = LlamaCppPythonServer(smol_path, free_port())
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
        sent = _count_sends(backend, monkeypatch)
        with pytest.raises(CircuitOpenError):
            backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        assert sent == []  # refused without touching the network
        srv.start()
        time.sleep(1.0)
        result = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4))
        assert result.text
        assert backend.stats()["circuit"] == "closed"
    finally:
        backend.close()
        srv.kill()


# --- through the real server over stdio ----------------------------------------------------

E2E_PROMPT_CAP = 5.0
E2E_GENERATION_CAP = 5.0
"""The documented default caps (promptTimeoutMs, generationTimeoutMs)."""
E2E_SLACK = 1.0
"""Past the caps over stdio: the client, JSON-RPC and the server's own work."""


async def _open_half_typed(client: LanguageClient) -> tuple[FaultServer, str, int, int]:
    """Open checkout.py with a half-typed last line once the backend is loaded.

    Returns the fault server (its ``holding`` cleared after the didOpen prefill met
    the drip, which it does with the server tokenizer), the URI and the cursor.
    """
    uri, line, column = await open_half_typed(client)
    await asyncio.sleep(0.5)
    fault: FaultServer = client.fault  # type: ignore[attr-defined]
    fault.holding.clear()
    return fault, uri, line, column


async def _hanging_completion(
    client: LanguageClient,
) -> tuple[asyncio.Future[Any], float, str, int, int]:
    """Open the half-typed file and ask for a completion; return once the drip holds it.

    Returns the pending request, when it was sent, the URI and the cursor.
    """
    fault, uri, line, col = await _open_half_typed(client)
    sent = time.monotonic()
    pending = asyncio.ensure_future(
        client.text_document_inline_completion_async(inline_params(uri, line, col))
    )
    await _until(fault.holding, 10)  # now the completion itself hangs
    return pending, sent, uri, line, col


def _typed(
    uri: str, version: int, line: int, col: int, text: str
) -> types.DidChangeTextDocumentParams:
    """A didChange inserting ``text`` at (line, col), as an editor sends a keystroke."""
    here = types.Position(line=line, character=col)
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[
            types.TextDocumentContentChangePartial(
                range=types.Range(start=here, end=here), text=text
            )
        ],
    )


async def _status(client: LanguageClient) -> tuple[dict[str, Any], float]:
    started = time.monotonic()
    state = await asyncio.wait_for(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="lspAssist.status")
        ),
        30,
    )
    return state, time.monotonic() - started


async def _until(flag: threading.Event, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not flag.is_set():
        assert time.monotonic() < deadline, "the dripping server never got a request"
        await asyncio.sleep(0.01)


@pytest_lsp.fixture(
    config=ClientServerConfig(server_command=SERVER, server_env=server_env()),
    params=["local-vocabulary", "server-tokenizer"],
)
async def dripping(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """lsp-assist serve with backend=remote pointing to a server that drips a byte a second.

    ``local-vocabulary``: modelPath is the server's GGUF, so only the completion call
    meets the drip; ``server-tokenizer``: no modelPath, so the prompt's tokenizer calls
    meet it first.
    """
    fault = FaultServer(["drip"])
    options: dict[str, Any] = {
        "backend": "remote",
        "remoteUrl": fault.url,
        "debounceMs": 0,
        "promptTimeoutMs": int(E2E_PROMPT_CAP * 1000),
        "generationTimeoutMs": int(E2E_GENERATION_CAP * 1000),
    }
    if request.param == "local-vocabulary":
        options["modelPath"] = str(small_model_path())
    await start_session(lsp_client, request, options)
    lsp_client.fault = fault  # type: ignore[attr-defined]
    lsp_client.variant = request.param  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()
    fault.close()


@pytest.mark.slow
async def test_status_answers_while_a_remote_completion_hangs_over_stdio(
    dripping: LanguageClient,
) -> None:
    client = dripping
    pending, started, uri, line, col = await _hanging_completion(client)
    waits = []
    for version in range(2, 5):  # the user types on while the completion hangs
        client.text_document_did_change(_typed(uri, version, line, col, "x"))
        col += 1
        state, took = await _status(client)
        waits.append(took)
        assert state["model"]["loaded"]
        await asyncio.sleep(0.3)
    result = await asyncio.wait_for(pending, 60)
    took = time.monotonic() - started
    print(f"status while a completion hangs: worst {max(waits) * 1000:.0f} ms")
    print(f"the hanging completion ended after {took:.2f} s")
    assert isinstance(result, types.InlineCompletionList) and list(result.items) == []
    # it did hang (no text for ~100 s of dripping) and the prompt cap ended it
    assert E2E_PROMPT_CAP <= took <= E2E_PROMPT_CAP + E2E_GENERATION_CAP + E2E_SLACK
    state, _ = await _status(client)
    stats = state["model"]["stats"]
    assert stats["failures"] >= 1 and stats["circuit"] == "closed"
    assert max(waits) < 1.0, waits


@pytest.mark.slow
async def test_a_newer_request_frees_a_hanging_remote_completion_over_stdio(
    dripping: LanguageClient,
) -> None:
    client = dripping
    first, sent, uri, line, col = await _hanging_completion(client)
    await asyncio.sleep(0.2)
    asked = time.monotonic()
    second = asyncio.ensure_future(
        client.text_document_inline_completion_async(inline_params(uri, line, col))
    )
    answered = await asyncio.wait_for(first, 30)
    freed = time.monotonic()
    print(f"a newer request freed the hanging one in {(freed - asked) * 1000:.1f} ms")
    assert list(answered.items) == []
    # freed by the newer request: before its own prompt cap could end it (the drip sends
    # no text in that time)
    assert asked < freed < sent + E2E_PROMPT_CAP
    started = time.monotonic()
    await asyncio.wait_for(second, 60)
    assert time.monotonic() - started <= E2E_PROMPT_CAP + E2E_GENERATION_CAP + E2E_SLACK
