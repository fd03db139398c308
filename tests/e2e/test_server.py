"""End to end over stdio: the real server, a real LSP client (pytest-lsp), the small model.

Tests of the protocol alone, which need no model, are in test_protocol.py.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import small_model_path
from lsp_assist.cli.demo_cmd import line_edit
from tests.e2e.conftest import (
    CHECKOUT,
    SERVER,
    SMALL_MODEL_OPTIONS,
    cursor_at_end,
    inline_params,
    open_file,
    server_env,
    start_session,
    wait_ready,
)
from tests.support.remote_servers import FaultServer

pytestmark = pytest.mark.slow


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def gated(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server whose model answers only when the test says so: the remote backend on a
    :class:`FaultServer` (SmolLM2's vocabulary tokenizes), slow by construction once the
    test calls ``gate.hold()``, whatever the machine's speed."""
    gate = FaultServer(["answer"])
    options = {
        **SMALL_MODEL_OPTIONS,
        "backend": "remote",
        "remoteUrl": gate.url,
        "modelPath": str(small_model_path()),
    }
    await start_session(lsp_client, request, options)
    lsp_client.gate = gate  # type: ignore[attr-defined]
    yield
    gate.release.set()
    await lsp_client.shutdown_session()
    gate.close()


async def _held_at_the_cursor(client: LanguageClient) -> tuple[FaultServer, str, int, int]:
    """Open the half-typed file on a gated server and hold every model request from now
    on; return the gate, the URI and the cursor."""
    status = await wait_ready(client)
    assert status["model"]["loaded"], status
    path = client.workspace_path / CHECKOUT  # type: ignore[attr-defined]
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    gate: FaultServer = client.gate  # type: ignore[attr-defined]
    gate.hold()
    return gate, uri, line, col


async def _until_held(gate: FaultServer) -> None:
    """Wait until the gate holds a model request (fail after 60 s)."""
    deadline = time.monotonic() + 60
    while not gate.holding.is_set():
        assert time.monotonic() < deadline, "no model request reached the gate"
        await asyncio.sleep(0.01)


async def test_inline_completion_with_real_model(client: LanguageClient) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    status = await wait_ready(client)
    assert status["model"]["loaded"], status
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    result = await client.text_document_inline_completion_async(inline_params(uri, line, col))
    assert isinstance(result, types.InlineCompletionList)
    # explicit: the greedy suggestion and up to two alternatives (test_alternatives.py)
    assert 1 <= len(result.items) <= 3
    for item in result.items:
        assert isinstance(item.insert_text, str) and item.insert_text.strip()
        assert item.range is not None
        assert item.range.start == types.Position(line=line, character=col)
        assert item.command is not None and item.command.command == "lspAssist.accept"
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    last = state["last"]
    assert last["prompt_tokens"] > 0 and last["layers"]
    assert sum(last["layers"].values()) == last["prompt_tokens"]


async def test_completion_fallback_is_one_labelled_item(client: LanguageClient) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    await wait_ready(client)
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    result = await client.text_document_completion_async(
        types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=col),
        )
    )
    assert isinstance(result, types.CompletionList)
    assert len(result.items) == 1
    item = result.items[0]
    assert "lsp-assist" in (item.detail or "")
    assert isinstance(item.text_edit, types.TextEdit) and item.text_edit.new_text.strip()
    assert item.text_edit.range.start == types.Position(line=line, character=col)


async def test_position_past_end_is_clamped_not_an_error(client: LanguageClient) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    await wait_ready(client)
    uri = open_file(client, workspace / CHECKOUT)
    result = await client.text_document_inline_completion_async(inline_params(uri, 500, 80))
    assert isinstance(result, types.InlineCompletionList)
    unopened = await client.text_document_inline_completion_async(
        inline_params((workspace / "nope.py").as_uri(), 0, 0)
    )
    assert isinstance(unopened, types.InlineCompletionList) and unopened.items == ()


async def test_newer_request_supersedes_older(gated: LanguageClient) -> None:
    client = gated
    gate, uri, line, col = await _held_at_the_cursor(client)
    first = asyncio.ensure_future(
        client.text_document_inline_completion_async(inline_params(uri, line, col))
    )
    await _until_held(gate)  # the model is busy: nothing can answer the first request
    second = asyncio.ensure_future(
        client.text_document_inline_completion_async(inline_params(uri, line, col))
    )
    older = await asyncio.wait_for(first, 60)
    # The older one was cancelled before or during generation: it returns nothing. It
    # returned while the gate held every model request: only the newer one freed it.
    assert isinstance(older, types.InlineCompletionList) and older.items == ()
    gate.release.set()
    newer = await asyncio.wait_for(second, 60)
    assert isinstance(newer, types.InlineCompletionList) and newer.items


async def test_cancel_request_is_honoured_and_server_keeps_serving(
    gated: LanguageClient,
) -> None:
    client = gated
    gate, uri, line, col = await _held_at_the_cursor(client)
    future = asyncio.ensure_future(
        client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, line, col), msg_id="to-cancel"
        )
    )
    await _until_held(gate)  # the model is busy: nothing can answer the request
    client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id="to-cancel"))
    try:
        result = await asyncio.wait_for(future, timeout=60)
    except JsonRpcException as exc:
        assert exc.code == -32800  # RequestCancelled
    else:
        # The cancel reached the engine mid-generation: nothing is shown.
        assert isinstance(result, types.InlineCompletionList) and result.items == ()
    gate.release.set()  # it returned while the gate held every model request
    again = await client.text_document_inline_completion_async(inline_params(uri, line, col))
    assert isinstance(again, types.InlineCompletionList) and again.items


async def test_type_through_and_accept_are_recorded(client: LanguageClient) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    cache: Path = client.cache_path  # type: ignore[attr-defined]
    await wait_ready(client)
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    first = await client.text_document_inline_completion_async(inline_params(uri, line, col))
    assert first is not None and first.items
    suggestion = str(first.items[0].insert_text)
    typed = suggestion[:2]
    client.text_document_did_change(line_edit(uri, 2, line, col, col, typed))
    second = await client.text_document_inline_completion_async(
        inline_params(uri, line, col + len(typed), automatic=True)
    )
    assert second is not None and second.items
    assert second.items[0].insert_text == suggestion[len(typed) :]
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["last"]["cache_hit"] is True
    accepted = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="lspAssist.accept",
            arguments=second.items[0].command.arguments,  # type: ignore[union-attr]
        )
    )
    assert accepted["accepted"] is True
    lines: list[dict[str, Any]] = []
    for _ in range(100):  # the log is written by its own thread, soon after the accept
        logs = list(cache.rglob("metrics.jsonl"))
        lines = [json.loads(x) for x in logs[0].read_text().splitlines()] if logs else []
        if any(x.get("event") == "accept" for x in lines):
            break
        await asyncio.sleep(0.1)
    assert logs, "no metrics log written"
    assert any(x.get("event") == "accept" for x in lines)
    assert any(x.get("cache_hit") for x in lines)
    assert not any("prompt" in x and x.get("prompt") for x in lines), "prompt text logged"
    # `lsp-assist stats` reads the same log and agrees with it.
    out = subprocess.run(
        [sys.executable, "-m", "lsp_assist.cli.main", "stats", "--metrics", str(logs[0]), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    stats = json.loads(out.stdout)
    requests = [x for x in lines if "event" not in x]
    assert stats["requests"] == len(requests)
    hits = sum(1 for x in requests if x["cache_hit"])
    assert stats["cache_hit_rate"] == pytest.approx(hits / len(requests))
    assert stats["accept_rate"] > 0


async def test_explain_context_command(client: LanguageClient) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    await wait_ready(client)
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.explainContext", arguments=[uri, line, col])
    )
    assert result["total_tokens"] <= result["budget"]
    names = [layer["name"] for layer in result["layers"]]
    assert "editing_zone" in names
    assert "create_payment" in result["prompt"]


async def model_progress(client: LanguageClient, token: str = "lsp-assist/model") -> list[Any]:
    """The begin ... end reports of a model-load progress token (waits for the end)."""
    for _ in range(300):
        reports = client.progress_reports.get(token, [])
        if reports and isinstance(reports[-1], types.WorkDoneProgressEnd):
            return list(reports)
        await asyncio.sleep(0.1)
    raise AssertionError(f"no end of the model-load progress: {client.progress_reports}")


async def test_model_load_is_reported_as_progress(client: LanguageClient) -> None:
    await wait_ready(client)
    reports = await model_progress(client)
    assert isinstance(reports[0], types.WorkDoneProgressBegin)
    assert reports[0].title == "lsp-assist: loading model"
    assert reports[-1].message == "ready"
    # each phase of the load is reported as it starts, so the percentage moves
    steps = [r for r in reports if isinstance(r, types.WorkDoneProgressReport)]
    messages = [r.message for r in steps]
    assert messages[:3] == ["loading weights", "indexing the vocabulary", "loaded"], messages
    percentages = [r.percentage for r in steps]
    assert percentages == sorted(percentages) and 0 < percentages[0] < 90, percentages


async def test_missing_model_warns_and_keeps_serving(broken_client: LanguageClient) -> None:
    client = broken_client
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    status = await wait_ready(client)
    assert status["model"]["loaded"] is False
    assert "missing.gguf" in status["model"]["error"]
    for _ in range(50):
        if any("missing.gguf" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.1)
    texts = [m.message for m in client.messages]
    assert any("missing.gguf" in t for t in texts), texts
    assert any("contextBudget" in t for t in texts), texts
    assert any("noSuchSetting" in t for t in texts), texts
    # The model load is reported as work-done progress that ends with the reason.
    kinds = await model_progress(client)
    assert kinds[0].title == "lsp-assist: loading model"
    assert "missing.gguf" in (kinds[-1].message or "")
    uri = open_file(client, workspace / CHECKOUT)
    result = await client.text_document_inline_completion_async(inline_params(uri, 9, 4))
    assert isinstance(result, types.InlineCompletionList) and result.items == ()


async def test_utf8_positions_on_non_ascii_line(utf8_client: LanguageClient) -> None:
    client = utf8_client
    result = client.init_result  # type: ignore[attr-defined]
    assert result.capabilities.position_encoding == types.PositionEncodingKind.Utf8
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    await wait_ready(client)
    text = 'GREETING = "héllo wörld 😀"\nprint(GREETING, '
    path = workspace / "greet.py"
    path.write_text(text)
    uri = open_file(client, path, text)
    line1 = text.split("\n")[1]
    response = await client.text_document_inline_completion_async(
        inline_params(uri, 1, len(line1.encode()))
    )
    assert isinstance(response, types.InlineCompletionList)
    if response.items:
        assert response.items[0].range is not None
        assert response.items[0].range.start.character == len(line1.encode())
    # A UTF-8 offset in the middle of the first line maps past the emoji correctly.
    first = text.split("\n")[0]
    end_bytes = len(first.encode())
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="lspAssist.explainContext", arguments=[uri, 0, end_bytes]
        )
    )
    assert "error" not in state


async def test_model_swap_through_configuration(client: LanguageClient) -> None:
    from lsp_assist.backends.models import embedded_model_path

    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    status = await wait_ready(client)
    assert status["model"]["architecture"] == "llama"
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"lspAssist": {"modelPath": str(embedded_model_path())}}
        )
    )
    result = await client.text_document_inline_completion_async(inline_params(uri, line, col))
    assert isinstance(result, types.InlineCompletionList)
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["model"]["architecture"] == "gemma3"
    assert not any("modelPath" in m.message for m in client.messages)
    # The swap is reported as a second model load, so status items show loading again.
    reports = await model_progress(client, "lsp-assist/model-1")
    assert reports[0].title == "lsp-assist: loading model" and reports[-1].message == "ready"


async def _message(client: LanguageClient, text: str) -> types.ShowMessageParams:
    """The first showMessage that contains ``text`` (waits up to 30 s)."""
    for _ in range(300):
        for message in client.messages:
            if text in message.message:
                return message
        await asyncio.sleep(0.1)
    raise AssertionError(f"no message with {text!r}: {[m.message for m in client.messages]}")


async def test_settings_that_would_fill_the_memory_are_refused_or_clamped(
    client: LanguageClient, tmp_path: Path
) -> None:
    from lsp_assist.backends.models import small_model_path
    from tests.support.tiny_gguf import write_tiny_gguf

    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    await wait_ready(client)
    # A GGUF whose header asks 512 KiB of KV per position and was trained on 2**20 of
    # them: 512 GiB of KV cache, which no machine here has.
    huge = write_tiny_gguf(
        tmp_path / "huge.gguf",
        context_length=1 << 20,
        extra={"llama.attention.key_length": 1 << 16, "llama.attention.value_length": 1 << 16},
    )
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"lspAssist": {"modelPath": str(huge), "contextLength": 1 << 20}}
        )
    )
    refused = await _message(client, "needs a KV cache of 512.0 GiB (huge.gguf)")
    assert refused.type == types.MessageType.Error
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["model"]["loaded"] and state["model"]["path"] == str(small_model_path())
    assert "needs a KV cache" in state["model"]["refused"] and not state["model"]["error"]
    # 2**31 is clamped by the settings to 1,048,576, then to SmolLM2's trained 8,192
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(
            settings={"lspAssist": {"modelPath": str(small_model_path()), "contextLength": 2**31}}
        )
    )
    clamped = await _message(client, "using its 8,192 tokens")
    assert clamped.type == types.MessageType.Warning
    await model_progress(client, "lsp-assist/model-1")
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["model"]["loaded"] and not state["model"]["refused"]
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)
    uri = open_file(client, path)
    result = await client.text_document_inline_completion_async(inline_params(uri, line, col))
    assert isinstance(result, types.InlineCompletionList) and result.items
