"""Alternatives over real stdio with the real model (SmolLM2): what an editor cycles.

An automatic inline request gets one item; an explicit (Invoked) one at the same place
gets two or three distinct items, the first of them the automatic request's item; the
type-through cache keeps that first item.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from lsp_assist.evaluation.client import line_edit
from tests.e2e.conftest import CHECKOUT, cursor_at_end, inline_params, open_file, wait_ready

pytestmark = pytest.mark.slow


def texts(
    result: types.InlineCompletionList | list[types.InlineCompletionItem] | None,
) -> list[str]:
    """The items' insert texts, in order."""
    assert isinstance(result, types.InlineCompletionList), result
    found = []
    for item in result.items:
        assert isinstance(item.insert_text, str)
        assert item.command is not None and item.command.command == "lspAssist.accept"
        found.append(item.insert_text)
    return found


async def test_invoked_request_returns_distinct_alternatives_greedy_first(
    client: LanguageClient,
) -> None:
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    assert (await wait_ready(client))["model"]["loaded"]
    path = workspace / CHECKOUT
    line, col = cursor_at_end(path)  # after "    return create_"
    uri = open_file(client, path)

    automatic = texts(
        await client.text_document_inline_completion_async(
            inline_params(uri, line, col, automatic=True)
        )
    )
    assert len(automatic) == 1 and automatic[0].strip(), automatic

    invoked = texts(
        await client.text_document_inline_completion_async(inline_params(uri, line, col))
    )
    assert 2 <= len(invoked) <= 3, invoked
    assert len(set(invoked)) == len(invoked) and all(t.strip() for t in invoked), invoked
    assert invoked[0] == automatic[0], (automatic, invoked)
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["last"]["text"] == invoked[0]
    assert state["last"]["alternatives"] == invoked[1:]
    hits = state["typethrough"]["hits"]

    # Typing the first character of the first item: the cache answers with the rest of it.
    client.text_document_did_change(line_edit(uri, 2, line, col, col, invoked[0][0]))
    rest = texts(
        await client.text_document_inline_completion_async(
            inline_params(uri, line, col + 1, automatic=True)
        )
    )
    assert rest == [invoked[0][1:]], (rest, invoked)
    state = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.status")
    )
    assert state["typethrough"]["hits"] == hits + 1
