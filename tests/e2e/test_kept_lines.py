"""Kept lines through the real server and the real model (serving/kept.py).

An automatic inline request at the end of a half-typed line is answered early, and the
model goes on past the shown line. Once it is done, the user types the shown line: at
its end the server answers with the line break and the next kept line from memory, and
after Enter with that line's indentation, with the rest of it, without the model. At the
end of a whole line (``nextLineAtEnd``) the answer is the next line, below.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import small_model_path
from tests.e2e.conftest import (
    SERVER,
    SMALL_MODEL_OPTIONS,
    init_params,
    inline_params,
    open_file,
    server_env,
    wait_ready,
)
from tests.support.workspace import copy_demo

pytestmark = pytest.mark.slow

LINE = 8
"""``    items = [LineItem(sku, qty, price) for sku, (qty, price) in cart.items()]`` of the
demo's shop/checkout.py: typed up to its middle, the lines after it removed."""
WAIT_S = 120.0
"""How long the model may take to write on a loaded 2-core machine."""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def client(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A server on a copy of the demo with kept lines on and early answers."""
    workspace = copy_demo(tmp_path)
    options: dict[str, Any] = {
        **SMALL_MODEL_OPTIONS,
        "modelPath": str(small_model_path()),
        "cacheDir": str(tmp_path / "cache"),
        "answerAfterMs": 1,
        "keptLines": 4,
    }
    await lsp_client.initialize_session(init_params(workspace, options))
    lsp_client.workspace_path = workspace  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()


async def _status(client: LanguageClient) -> dict[str, Any]:
    result: dict[str, Any] = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    return result


async def _ask(client: LanguageClient, uri: str, line: int, col: int) -> tuple[str, str]:
    """Ask (Automatic); return the first item's text and its request id."""
    result = await client.text_document_inline_completion_async(
        inline_params(uri, line, col, automatic=True)
    )
    assert result is not None
    if not result.items:
        return "", ""
    item = result.items[0]
    command = item.command
    request_id = str(command.arguments[0]) if command and command.arguments else ""
    return str(item.insert_text), request_id


def _type(client: LanguageClient, uri: str, version: int, line: int, col: int, text: str) -> None:
    at = types.Position(line=line, character=col)
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(start=at, end=at), text=text
                )
            ],
        )
    )


async def test_the_next_line_comes_from_memory(client: LanguageClient) -> None:
    assert (await wait_ready(client))["model"]["loaded"]
    path = client.workspace_path / "shop" / "checkout.py"  # type: ignore[attr-defined]
    lines = path.read_text().split("\n")
    col = len(lines[LINE]) * 6 // 10
    text = "\n".join([*lines[:LINE], lines[LINE][:col]])
    path.write_text(text)
    uri = open_file(client, path)
    start, request_id = await _ask(client, uri, LINE, col)
    assert start and request_id
    # the whole is recorded once the model is done writing the kept lines too
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        last = (await _status(client))["last"]
        if last.get("request_id") == request_id:
            break
        await asyncio.sleep(0.1)
    assert last.get("request_id") == request_id, "the generation did not end"
    assert last["output_tokens"] > 0
    shown, _ = await _ask(client, uri, LINE, col)  # the whole line, from the cache
    assert shown.startswith(start) and "\n" not in shown
    misses = (await _status(client))["typethrough"]["misses"]
    _type(client, uri, 2, LINE, col, shown)
    below, _ = await _ask(client, uri, LINE, col + len(shown))
    # at the line's end: the line break and the next kept line, a ghost line below
    assert below.startswith("\n") and below.strip(), below
    indent = below[1 : len(below) - len(below[1:].lstrip(" \t"))]
    _type(client, uri, 3, LINE, col + len(shown), "\n" + indent)
    rest, _ = await _ask(client, uri, LINE + 1, len(indent))
    assert rest == below[1 + len(indent) :]
    state = await _status(client)
    assert state["last"]["cache_hit"] is True
    assert state["typethrough"]["misses"] == misses  # no request went to the model


async def test_at_a_finished_lines_end_the_next_line_shows_below(client: LanguageClient) -> None:
    """``nextLineAtEnd``: at the end of a whole line, where the model ends the line at once,
    the answer is the line break and the model's next line; after Enter, its rest comes
    from memory (switched off, nothing shows there: the first assertion fails)."""
    assert (await wait_ready(client))["model"]["loaded"]
    path = client.workspace_path / "shop" / "checkout.py"  # type: ignore[attr-defined]
    lines = path.read_text().split("\n")
    path.write_text("\n".join(lines[: LINE + 1]) + "\n")
    uri = open_file(client, path)
    end = len(lines[LINE])
    below, request_id = await _ask(client, uri, LINE, end)
    assert below.startswith("\n") and below.strip() and request_id, below
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (await _status(client))["last"].get("request_id") == request_id:
            break
        await asyncio.sleep(0.1)
    whole, _ = await _ask(client, uri, LINE, end)  # the whole next line, from the cache
    assert whole.startswith(below) and whole.count("\n") == 1, whole
    misses = (await _status(client))["typethrough"]["misses"]
    indent = whole[1 : len(whole) - len(whole[1:].lstrip(" \t"))]
    _type(client, uri, 2, LINE, end, "\n" + indent)
    rest, _ = await _ask(client, uri, LINE + 1, len(indent))
    assert rest == whole[1 + len(indent) :] and rest.strip()
    state = await _status(client)
    assert state["last"]["cache_hit"] is True
    assert state["typethrough"]["misses"] == misses  # no request went to the model


async def test_a_line_that_opens_a_block_comes_with_its_body(client: LanguageClient) -> None:
    """``dynamicMultiline``: typed up to a loop's header, the suggestion shown at once is
    the header's end; once the model is done, asked again, it is the header with the
    loop's body (switched off, the header alone: the last assertion fails)."""
    assert (await wait_ready(client))["model"]["loaded"]
    path = client.workspace_path / "shop" / "checkout.py"  # type: ignore[attr-defined]
    lines = path.read_text().split("\n")
    header = "    for item in items"
    path.write_text("\n".join([*lines[: LINE + 1], header]))
    uri = open_file(client, path)
    start, request_id = await _ask(client, uri, LINE + 1, len(header))
    assert start.startswith(":") and request_id, start
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        if (await _status(client))["last"].get("request_id") == request_id:
            break
        await asyncio.sleep(0.1)
    block, _ = await _ask(client, uri, LINE + 1, len(header))
    body = block.split("\n")[1:]
    assert block.startswith(":\n") and body and body[0].startswith(" " * 8), block
