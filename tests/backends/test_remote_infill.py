"""``remoteApi``: llama-server's ``/infill`` (prefix, suffix, typed part, extra files)
beside ``/v1/completions``, and ``auto`` choosing between them; ``lsp-assist doctor``'s
remote check.

The unit tests play the server with httpx's MockTransport (the choice, the fallback on
404/501, the bodies, llama-server's own chunk format). The real-server tests (marked
``slow``, as tests/backends/test_llama_server.py, whose ``LlamaServer`` they reuse) run
llama-server with Qwen2.5-Coder-0.5B (SmolLM2 has no FIM tokens: its llama-server
answers ``/infill`` with 501) and llama-cpp-python's server (no ``/infill`` at all), and
``lsp-assist serve`` over stdio with ``remoteApi: infill`` at that llama-server.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult, InfillParts
from lsp_assist.backends.models import preset_installed, preset_path
from lsp_assist.backends.remote import RemoteBackend
from lsp_assist.backends.remote_api import N_CACHE_REUSE
from lsp_assist.backends.remote_probe import remote_report
from lsp_assist.cli.doctor_cmd import print_remote
from lsp_assist.config import ModelSettings, parse_settings
from lsp_assist.context import AssembledPrompt, Layer, LayerItem
from lsp_assist.documents.document import Document
from lsp_assist.errors import RemoteBackendError
from lsp_assist.serving.infill_parts import infill_parts
from tests.e2e.conftest import (
    SERVER,
    inline_params,
    open_file,
    server_env,
    start_session,
    wait_ready,
)
from tests.support.bounded import bounded
from tests.support.llama_server import BINARY, LlamaServer, remote_settings
from tests.support.ports import free_port
from tests.support.remote_servers import KEY, KEY_ENV, LlamaCppPythonServer

PARTS = InfillParts(prefix="def add(a, b):\n", suffix="\n", typed="    return")

# --- the setting --------------------------------------------------------------------------


def test_remote_api_defaults_to_auto_and_an_invalid_value_is_replaced() -> None:
    settings, warnings = parse_settings({"remoteApi": "infill"})
    assert settings.model.remote_api == "infill" and not warnings
    settings, warnings = parse_settings({"remoteApi": "fim"})
    assert settings.model.remote_api == "auto"
    assert len(warnings) == 1 and "remoteApi" in warnings[0] and "'auto'" in warnings[0]


# --- a played server ----------------------------------------------------------------------


def _sse(chunks: list[dict[str, Any]], done: bool) -> bytes:
    lines = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


class Played:
    """A MockTransport handler: ``/infill`` answers ``infill_status`` (200: a native stream)."""

    def __init__(self, infill_status: int = 200, completions_status: int = 200) -> None:
        self.infill_status = infill_status
        self.completions_status = completions_status
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        self.calls.append((request.url.path, body))
        sse = {"content-type": "text/event-stream"}
        if request.url.path == "/infill":
            if self.infill_status != 200:
                return httpx.Response(self.infill_status, json={"error": "no"})
            chunks = [
                {"content": " a", "stop": False},
                {"content": " + b", "stop": False},
                {
                    "content": "",
                    "stop": True,
                    "stop_type": "limit",
                    "tokens_evaluated": 57,
                    "timings": {"cache_n": 40, "prompt_n": 17},
                },
            ]
            return httpx.Response(200, headers=sse, content=_sse(chunks, done=False))
        if request.url.path == "/v1/completions":
            if self.completions_status != 200:
                return httpx.Response(self.completions_status, json={"error": "down"})
            chunks = [{"choices": [{"text": " a + b", "finish_reason": "stop"}]}]
            return httpx.Response(200, headers=sse, content=_sse(chunks, done=True))
        return httpx.Response(404)

    def paths(self) -> list[str]:
        return [path for path, _ in self.calls]


def _played(handler: Played, api: str = "auto", **kw: Any) -> RemoteBackend:
    settings = ModelSettings(backend="remote", remote_url="http://played", remote_api=api, **kw)  # type: ignore[arg-type]
    return RemoteBackend(
        settings, tokenizer="estimate", transport=httpx.MockTransport(handler), backoff_s=0.01
    )


def _request(backend: RemoteBackend, parts: InfillParts | None = PARTS) -> GenerationRequest:
    return GenerationRequest(
        prompt_tokens=backend.tokenize("def add(a, b):\n    return"), max_tokens=8, infill=parts
    )


def test_infill_sends_the_parts_and_reads_llama_servers_own_chunks() -> None:
    handler = Played()
    backend = _played(handler, "infill")
    parts = InfillParts(
        prefix="def add(a, b):\n",
        suffix="\n\nprint(add(1, 2))\n",
        typed="    return",
        extra=(("shop/tax.py", "def vat(x):\n    return x\n"),),
    )
    result = backend.generate(_request(backend, parts))
    assert handler.paths() == ["/infill"]
    body = handler.calls[0][1]
    assert body["input_prefix"] == parts.prefix and body["input_suffix"] == parts.suffix
    assert body["prompt"] == "    return"
    assert body["input_extra"] == [
        {"filename": "shop/tax.py", "text": "def vat(x):\n    return x\n"}
    ]
    assert body["cache_prompt"] is True and body["stream"] is True and body["n_predict"] == 8
    assert body.get("n_cache_reuse") == N_CACHE_REUSE
    assert result.text == " a + b" and result.stop_reason == "length"
    # the server built the prompt: its counts, not the request's estimate
    assert result.prompt_tokens == 57 and result.reused_tokens == 40
    assert backend.stats()["api"] == "infill" and backend.wants_infill_parts


def test_infill_counts_come_from_the_first_chunk_when_a_stop_ends_the_stream() -> None:
    # llama-server with timings_per_token: every chunk has the counts; the client stops
    # at the newline of the first one and closes the stream before the server's last chunk
    class StopsEarly(Played):
        def __call__(self, request: httpx.Request) -> httpx.Response:
            self.calls.append((request.url.path, json.loads(request.content or b"{}")))
            counts = {"tokens_evaluated": 57, "timings": {"cache_n": 40, "prompt_n": 17}}
            chunks = [
                {"content": " a + b\n", "stop": False, **counts},
                {"content": "print", "stop": False, **counts},
            ]
            sse = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=sse, content=_sse(chunks, done=False))

    handler = StopsEarly()
    backend = _played(handler, "infill")
    request = _request(backend)
    request.stop = ("\n",)
    result = backend.generate(request)
    assert handler.calls[0][1]["timings_per_token"] is True
    assert result.text == " a + b" and result.stop_reason == "stop"
    assert result.prompt_tokens == 57 and result.reused_tokens == 40


@pytest.mark.parametrize("status", [404, 501])
def test_auto_falls_back_to_completions_once_and_remembers(status: int) -> None:
    handler = Played(infill_status=status)
    backend = _played(handler)
    assert backend.stats()["api"] == "auto" and backend.wants_infill_parts
    first = backend.generate(_request(backend))
    assert first.text == " a + b" and first.stop_reason == "eos"
    assert handler.paths() == ["/infill", "/v1/completions"]  # in the same request
    second = backend.generate(_request(backend))
    assert second.text == " a + b"
    assert handler.paths()[2:] == ["/v1/completions"]  # not asked again
    stats = backend.stats()
    assert stats["api"] == "completions" and stats["failures"] == 0 and stats["retries"] == 0
    assert not backend.wants_infill_parts  # serving stops building the parts


def test_infill_chosen_explicitly_on_a_server_without_it_is_an_error() -> None:
    handler = Played(infill_status=404)
    backend = _played(handler, "infill")
    with pytest.raises(RemoteBackendError, match="remoteApi"):
        backend.generate(_request(backend))
    assert handler.paths() == ["/infill"]  # no silent completions


def test_completions_never_asks_infill_and_a_request_without_parts_uses_completions() -> None:
    handler = Played()
    backend = _played(handler, "completions")
    assert not backend.wants_infill_parts
    backend.generate(_request(backend))
    auto = _played(handler)
    auto.generate(_request(auto, parts=None))
    assert handler.paths() == ["/v1/completions", "/v1/completions"]


def test_completions_ask_for_timings_only_once_the_server_sent_llama_servers() -> None:
    # llama-server's /v1/completions sends timings in its last chunk only, unless asked
    # for them in every chunk; other servers may refuse the field, so it is sent only
    # after a chunk showed the server is llama-server.
    class Timed(Played):
        def __call__(self, request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content or b"{}")
            self.calls.append((request.url.path, body))
            chunk: dict[str, Any] = {"choices": [{"text": " a + b", "finish_reason": "stop"}]}
            chunk["timings"] = {"cache_n": 12, "prompt_n": 5}
            sse = {"content-type": "text/event-stream"}
            return httpx.Response(200, headers=sse, content=_sse([chunk], done=True))

    plain = Played()
    backend = _played(plain, "completions")
    backend.generate(_request(backend))
    backend.generate(_request(backend))
    assert ["timings_per_token" in body for _, body in plain.calls] == [False, False]

    timed = Timed()
    backend = _played(timed, "completions")
    first = backend.generate(_request(backend))
    backend.generate(_request(backend))
    assert first.reused_tokens == 12
    assert [body.get("timings_per_token") for _, body in timed.calls] == [None, True]


def test_auto_asks_again_after_the_server_failed() -> None:
    handler = Played(infill_status=404)
    backend = _played(handler, remote_retries=0)
    backend.generate(_request(backend))
    assert backend.stats()["api"] == "completions"
    handler.completions_status = 503  # the server goes away; it may come back as another
    with pytest.raises(RemoteBackendError):
        backend.generate(_request(backend))
    assert backend.stats()["api"] == "auto"
    handler.infill_status, handler.completions_status = 200, 200
    assert backend.generate(_request(backend)).text == " a + b"
    assert handler.paths()[-1] == "/infill" and backend.stats()["api"] == "infill"


# --- the parts of a built prompt ----------------------------------------------------------


def test_infill_parts_take_the_zone_above_the_cursor_line_and_the_related_chunks() -> None:
    text = "import os\n\n\ndef total(items):\n    s = 0\n    for i in items:\n        s += i\n"
    text += "    ret\n\nx = 1\n"
    snapshot = Document("file:///w/a.py", text, language_id="python").snapshot()
    # the zone starts at "def total" (the lines above it are not in the prompt), FIM order
    zone = "def total(items):\n    s = 0\n    for i in items:\n        s += i\n"
    after = "\n\nx = 1\n"
    prompt = AssembledPrompt(
        strategy="layered",
        budget=512,
        format="fim",
        layers=[
            Layer(name="instructions", text="<|fim_prefix|>"),
            Layer(
                name="related",
                items=[
                    LayerItem(source="lib/sums.py", symbol="add", text="def add(a, b): ...\n"),
                    LayerItem(source="lib/sums.py", symbol="neg", text="def neg(a): ...\n"),
                    LayerItem(source="lib/io.py", symbol="show", text="def show(x): ...\n"),
                    LayerItem(source="lib/sums.py", symbol="mul", text="def mul(a, b): ...\n"),
                ],
            ),
            Layer(name="similar", items=[LayerItem(source="b.py", text="s = sum(items)\n")]),
            Layer(name="editing_zone", text=zone + after + "    ret"),
        ],
        tokens=[1, 2, 3],
        prompt="",
        suffix=after,
    )
    parts = infill_parts(prompt, snapshot, 7, 7)
    assert parts.prefix == zone
    assert parts.typed == "    ret" and parts.suffix == after
    # one chunk per run of a file's items, as the local prompt has one header per run
    assert parts.extra == (
        ("lib/sums.py", "def add(a, b): ...\ndef neg(a): ...\n"),
        ("lib/io.py", "def show(x): ...\n"),
        ("lib/sums.py", "def mul(a, b): ...\n"),
        ("b.py", "s = sum(items)\n"),
    )


# --- a real llama-server with a FIM model -------------------------------------------------

QWEN = preset_path("coder-0.5b") if preset_installed("coder-0.5b") else Path("absent")
needs_qwen = pytest.mark.skipif(
    BINARY is None or not QWEN.is_file(),
    reason="llama-server or the coder-0.5b model (Qwen2.5-Coder-0.5B) is not installed",
)

# Extra files need a slot context larger than the batch: llama-server gives them
# n_ctx(slot) - n_batch - 2 x n_predict tokens (none at its default batch of 2,048).
QWEN_ARGS = ["--ctx-size", "4096", "--batch-size", "512", "--ubatch-size", "512"]
QWEN_ARGS += ["--threads", "2", "--threads-batch", "2"]


@pytest.fixture(scope="module")
def qwen_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    log = tmp_path_factory.mktemp("llama-server-qwen") / "server.log"
    server = LlamaServer(QWEN, free_port(), log, QWEN_ARGS)
    server.start()
    yield server
    server.kill()


def _settings(url: str, **kw: Any) -> ModelSettings:
    """Caps for the 1.5B-sized waits of a FIM model on a busy machine."""
    limits = {"prompt_timeout_ms": 120_000, "generation_timeout_ms": 120_000}
    return remote_settings(url, **{**limits, "remote_read_timeout_ms": 120_000, **kw})


def _infill(backend: RemoteBackend, parts: InfillParts, max_tokens: int = 6) -> GenerationResult:
    request = GenerationRequest(
        prompt_tokens=backend.tokenize(parts.prefix + parts.typed),
        max_tokens=max_tokens,
        infill=parts,
    )
    result = backend.generate(request)
    assert result.stop_reason in ("length", "eos", "stop"), result
    return result


@pytest.mark.slow
@needs_qwen
def test_auto_infill_on_llama_server_uses_the_suffix(qwen_server: LlamaServer) -> None:
    backend = RemoteBackend(_settings(qwen_server.url), model_path=QWEN)
    try:
        assert backend.wants_infill_parts
        answers = {}
        # the line to write is `def <name>(...)`: only the suffix (which calls it) names it
        for name, op in (("multiply", "*"), ("subtract", "-")):
            suffix = f"(a, b):\n    return a {op} b\n\n\nprint({name}(2, 3))\n"
            result = _infill(backend, InfillParts(prefix="", suffix=suffix, typed="def "))
            answers[name] = result.text
            assert result.prompt_tokens > 10  # the server's count of the prompt it built
        assert answers["multiply"].startswith("multiply"), answers
        assert answers["subtract"].startswith("subtract"), answers
        stats = backend.stats()
        assert stats["api"] == "infill" and stats["failures"] == 0
    finally:
        backend.close()


@pytest.mark.slow
@needs_qwen
def test_input_extra_reaches_the_server(qwen_server: LlamaServer) -> None:
    backend = RemoteBackend(_settings(qwen_server.url, remote_api="infill"), model_path=QWEN)
    try:
        bare = InfillParts(prefix="", suffix="", typed="result = ")
        extra = (("shop/pricing.py", "def apply_discount_code(cart, code):\n    return cart\n"),)
        without = _infill(backend, bare, max_tokens=8)
        with_extra = _infill(backend, dataclasses.replace(bare, extra=extra), 8)
        # the answer calls what only the extra file defines, and the prompt grew by it
        assert "apply_discount_code" in with_extra.text, with_extra.text
        assert "apply_discount_code" not in without.text
        assert with_extra.prompt_tokens >= without.prompt_tokens + 12
    finally:
        backend.close()


@pytest.mark.slow
@needs_qwen
def test_a_cancelled_infill_stream_frees_the_slot(qwen_server: LlamaServer) -> None:
    assert qwen_server.wait_busy(0), "a slot was still busy before the test"
    backend = RemoteBackend(_settings(qwen_server.url, remote_api="infill"), model_path=QWEN)
    try:
        token = CancelToken()
        pieces: list[str] = []

        def on_text(text: str) -> None:
            pieces.append(text)
            if len(pieces) == 3:
                token.cancel("superseded")

        parts = InfillParts(prefix="", suffix="", typed="numbers = [1, 2, 3, 4, 5, 6, 7, 8,")
        request = GenerationRequest(
            prompt_tokens=[1], max_tokens=900, cancel=token, on_text=on_text, infill=parts
        )
        mark = qwen_server.log_size()
        result, _ = bounded(lambda: backend.generate(request), 120)
        returned_at = time.perf_counter()
        assert isinstance(result, GenerationResult), result
        assert result.stop_reason == "cancelled"
        assert returned_at - token.cancelled_at < 1.0
        assert qwen_server.wait_busy(0, 60), qwen_server.slots()
        assert "stop: cancel task" in qwen_server.log_text(mark)
        assert backend.stats()["cancelled"] == 1 and backend.stats()["api"] == "infill"
        assert _infill(backend, PARTS).text  # served again
    finally:
        backend.close()


@pytest.mark.slow
@needs_qwen
def test_doctor_checks_llama_server(
    qwen_server: LlamaServer, capsys: pytest.CaptureFixture[str]
) -> None:
    report = remote_report(_settings(qwen_server.url))
    assert report["reachable"] and report["infill"]["offered"] and report["fim_tokens"] is True
    assert "qwen2.5-coder-0.5b" in report["model"].lower()
    assert report["api"] == "infill" and report["round_trip_ms"] > 0
    print_remote(report)
    out = capsys.readouterr().out
    assert f"remote        {qwen_server.url} reachable" in out
    assert "FIM tokens  yes (from the server's /infill)" in out
    assert "/infill     offered" in out and "remoteApi auto -> infill" in out


# --- llama-cpp-python's server: no /infill ------------------------------------------------


@pytest.fixture(scope="module")
def plain_server(smol_path: Path) -> Iterator[LlamaCppPythonServer]:
    srv = LlamaCppPythonServer(smol_path, free_port())
    srv.start()
    yield srv
    srv.kill()


@pytest.mark.slow
def test_auto_uses_completions_on_a_server_without_infill(
    plain_server: LlamaCppPythonServer,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    settings = _settings(plain_server.url, remote_api_key_env=KEY_ENV)
    backend = RemoteBackend(settings, tokenizer="estimate")
    try:
        result = _infill(backend, PARTS)
        assert result.text
        stats = backend.stats()
        assert stats["api"] == "completions" and stats["failures"] == 0
    finally:
        backend.close()
    report = remote_report(settings)
    assert report["reachable"] and not report["infill"]["offered"]
    assert report["infill"]["status"] in (404, 405) and report["api"] == "completions"
    print_remote(report)
    out = capsys.readouterr().out
    assert "/infill     not offered (HTTP 40" in out and "remoteApi auto -> completions" in out


def test_doctor_says_an_unreachable_server(capsys: pytest.CaptureFixture[str]) -> None:
    report = remote_report(_settings(f"http://127.0.0.1:{free_port()}"))
    assert report["reachable"] is False and "ConnectError" in report["error"]
    print_remote(report)
    assert "UNREACHABLE" in capsys.readouterr().out


# --- lsp-assist serve over stdio with remoteApi infill ------------------------------------


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def infill_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """lsp-assist serve with backend=remote, remoteApi=infill, at the module's llama-server."""
    server: LlamaServer = request.getfixturevalue("qwen_server")
    options: dict[str, Any] = {
        "backend": "remote",
        "remoteUrl": server.url,
        "remoteApi": "infill",
        "modelPath": str(QWEN),  # the server's GGUF: the local vocabulary
        "debounceMs": 0,
        "contextBudget": 512,
        "maxTokens": 8,
        "answerAfterMs": 0,
        "promptTimeoutMs": 120_000,
        "generationTimeoutMs": 120_000,
        "remoteReadTimeoutMs": 120_000,
    }
    await start_session(lsp_client, request, options)
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
@needs_qwen
async def test_serve_with_remote_api_infill_answers_from_the_suffix(
    infill_client: LanguageClient,
) -> None:
    client = infill_client
    status = await wait_ready(client, 120)
    assert status["model"]["loaded"], status
    answers = {}
    # the cursor is after `def `: only the suffix (the body and the call) names the function
    for name, op in (("multiply", "*"), ("subtract", "-")):
        path = client.workspace_path / "shop" / f"{name}_demo.py"  # type: ignore[attr-defined]
        path.write_text(f"def (a, b):\n    return a {op} b\n\n\nprint({name}(2, 3))\n")
        uri = open_file(client, path)
        result = await client.text_document_inline_completion_async(inline_params(uri, 0, 4))
        assert isinstance(result, types.InlineCompletionList) and result.items, result
        answers[name] = str(result.items[0].insert_text)
    assert answers["multiply"].startswith("multiply"), answers
    assert answers["subtract"].startswith("subtract"), answers
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    stats = state["model"]["stats"]
    assert stats["backend"] == "remote" and stats["api"] == "infill", stats
    assert stats["failures"] == 0, stats
