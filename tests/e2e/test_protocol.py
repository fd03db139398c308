"""The protocol over stdio with a real LSP client (pytest-lsp) and a server with no model.

Capabilities, error responses and settings do not depend on the model: these tests
start ``lsp-assist serve`` with ``protocol_client`` (its model file does not exist, so
no model work is done) and run in ``make test-fast``. Completions through the small
model are in test_server.py; raw bytes and the lifecycle in test_protocol_abuse.py.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient


async def test_initialize_advertises_both_completion_providers(
    protocol_client: LanguageClient,
) -> None:
    client = protocol_client
    result = client.init_result.capabilities  # type: ignore[attr-defined]
    assert client.init_result.server_info.name == "lsp-assist"  # type: ignore[attr-defined]
    assert result.inline_completion_provider is not None
    assert result.completion_provider is not None
    sync = result.text_document_sync
    kind = sync.change if isinstance(sync, types.TextDocumentSyncOptions) else sync
    assert kind == types.TextDocumentSyncKind.Incremental


async def test_invalid_params_get_an_error_response(protocol_client: LanguageClient) -> None:
    client = protocol_client
    # The client library would refuse to send malformed params, so write the raw message.
    future: asyncio.Future[object] = asyncio.get_running_loop().create_future()
    client.protocol._request_futures["bad-params-1"] = future  # type: ignore[attr-defined]
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": "bad-params-1",
            "method": "textDocument/inlineCompletion",
            "params": {"textDocument": 5, "position": "x"},
        }
    ).encode()
    client.protocol.writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)  # type: ignore[union-attr]
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(future, timeout=10)
    assert info.value.code == -32602  # InvalidParams
    # And the server still answers afterwards.
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["initialized"] is True


async def test_unknown_method_gets_method_not_found(protocol_client: LanguageClient) -> None:
    client = protocol_client
    with pytest.raises(JsonRpcException) as info:
        await asyncio.wait_for(
            client.protocol.send_request_async("lspAssist/noSuchMethod", {}), timeout=10
        )
    assert info.value.code == -32601  # MethodNotFound


async def test_invalid_configuration_change_is_reported(protocol_client: LanguageClient) -> None:
    client = protocol_client
    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"lspAssist": {"maxTokens": "many"}})
    )
    for _ in range(50):
        if any("maxTokens" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.1)
    assert any("maxTokens" in m.message for m in client.messages)
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["initialized"] is True
