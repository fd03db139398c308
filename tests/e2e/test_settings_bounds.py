"""Out-of-bound numeric settings over stdio: the server clamps them, warns and still completes.

``threads: 100000`` used to reach llama.cpp as is and kill the server on the first decode
(a segfault here, std::bad_alloc in issue 11).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import small_model_path
from lsp_assist.config import MAX_DRAFT_TOKENS
from tests.e2e.conftest import (
    SERVER,
    SMALL_MODEL_OPTIONS,
    TAIL,
    inline_params,
    open_file,
    server_env,
    start_session,
    wait_ready,
)

pytestmark = pytest.mark.slow


@pytest_lsp.fixture(
    config=ClientServerConfig(
        server_command=[*SERVER, "--setting", "threads=100000"], server_env=server_env()
    )
)
async def greedy_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server started with 100,000 threads on its command line, 100,000 draft tokens
    in its initializationOptions, and the small model."""
    options = {"modelPath": str(small_model_path()), **SMALL_MODEL_OPTIONS, "draftTokens": 100000}
    await start_session(lsp_client, request, options)
    yield
    await lsp_client.shutdown_session()


async def test_absurd_thread_count_still_completes(greedy_client: LanguageClient) -> None:
    client = greedy_client
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    status = await wait_ready(client)
    assert status["model"]["loaded"], status
    path = workspace / "shop" / "checkout.py"
    text = path.read_text().rstrip() + "\n" + TAIL
    lines = text.split("\n")
    uri = open_file(client, path, text)
    result = await client.text_document_inline_completion_async(
        inline_params(uri, len(lines) - 1, len(lines[-1]))
    )
    assert isinstance(result, types.InlineCompletionList)
    assert 1 <= len(result.items) <= 3  # an explicit request: alternatives too
    assert isinstance(result.items[0].insert_text, str) and result.items[0].insert_text.strip()
    for _ in range(50):
        if any("'draftTokens'" in m.message for m in client.messages):
            break
        await asyncio.sleep(0.1)
    assert any(
        "'draftTokens'" in m.message and f"using {MAX_DRAFT_TOKENS}" in m.message
        for m in client.messages
    )
