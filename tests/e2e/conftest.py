"""Fixtures that start ``lsp-assist serve`` as a subprocess and drive it with pytest-lsp.

Also the helpers the end-to-end tests share: the LSP params they send, the demo project
with a half-typed last line (``demo_with_tail``, ``cursor_at_end``), ``run_cli`` (the
CLI as a subprocess).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import small_model_path
from tests.support.jsonrpc import StdioClient
from tests.support.workspace import copy_demo

SERVER = [sys.executable, "-m", "lsp_assist.cli.main", "serve", "--log-level", "INFO"]
CLI = [sys.executable, "-m", "lsp_assist.cli.main"]


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """Run ``lsp-assist ARGS`` and return the finished process."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=timeout, env=full_env, check=False
    )


def server_env(**extra: str) -> dict[str, str]:
    """Return the environment for a server subprocess."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
    env.update(extra)
    return env


def init_params(
    workspace: Path, options: dict[str, Any], *, utf8: bool = False
) -> types.InitializeParams:
    """Return InitializeParams of an editor with inline completion support."""
    general = (
        types.GeneralClientCapabilities(
            position_encodings=[types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16]
        )
        if utf8
        else None
    )
    return types.InitializeParams(
        capabilities=types.ClientCapabilities(
            general=general,
            text_document=types.TextDocumentClientCapabilities(
                inline_completion=types.InlineCompletionClientCapabilities(),
                completion=types.CompletionClientCapabilities(),
            ),
            window=types.WindowClientCapabilities(work_done_progress=True),
        ),
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name=workspace.name)],
        initialization_options=options,
    )


async def wait_ready(client: LanguageClient, timeout: float = 120) -> dict[str, Any]:
    """Poll lspAssist.status until the model is loaded or failed."""
    deadline = time.monotonic() + timeout
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="lspAssist.status")
        )
        if status.get("model", {}).get("loaded") or status.get("model", {}).get("error"):
            return status
        await asyncio.sleep(0.2)
    return status


def open_file(client: LanguageClient, path: Path, text: str | None = None, version: int = 1) -> str:
    """Send didOpen for a file and return its URI."""
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri,
                language_id="python",
                version=version,
                text=path.read_text() if text is None else text,
            )
        )
    )
    return uri


async def open_half_typed(client: LanguageClient) -> tuple[str, int, int]:
    """Once the backend is loaded, open shop/checkout.py with a half-typed last line
    (``    return create_``); return its URI and the cursor at the line's end."""
    status = await wait_ready(client, 60)
    assert status["model"]["loaded"], status
    path = client.workspace_path / "shop" / "checkout.py"  # type: ignore[attr-defined]
    text = path.read_text().rstrip() + "\n    return create_"
    path.write_text(text)
    lines = text.split("\n")
    return open_file(client, path), len(lines) - 1, len(lines[-1])


def inline_params(
    uri: str, line: int, character: int, automatic: bool = False
) -> types.InlineCompletionParams:
    """Return InlineCompletionParams at a position."""
    kind = (
        types.InlineCompletionTriggerKind.Automatic
        if automatic
        else types.InlineCompletionTriggerKind.Invoked
    )
    return types.InlineCompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=line, character=character),
        context=types.InlineCompletionContext(trigger_kind=kind),
    )


SMALL_MODEL_OPTIONS: dict[str, Any] = {
    "debounceMs": 0,
    "contextBudget": 512,
    "maxTokens": 24,
    # The machine may be shared: a cap that fires returns nothing and fails the test.
    "promptTimeoutMs": 120000,
    "generationTimeoutMs": 120000,
    # Whole suggestions: these tests compare texts across requests (the automatic answer
    # with the first alternative, typed-through remainders); early answers have their own
    # tests (test_early_answers.py).
    "answerAfterMs": 0,
}


async def start_session(
    lsp_client: LanguageClient,
    request: pytest.FixtureRequest,
    options: dict[str, Any],
    *,
    utf8: bool = False,
) -> None:
    """Initialize a server on a copy of the demo workspace; remember paths on the client."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    workspace = copy_demo(tmp_path)
    options = {"cacheDir": str(tmp_path / "cache"), **options}
    result = await lsp_client.initialize_session(init_params(workspace, options, utf8=utf8))
    lsp_client.init_result = result  # type: ignore[attr-defined]
    lsp_client.workspace_path = workspace  # type: ignore[attr-defined]
    lsp_client.cache_path = tmp_path / "cache"  # type: ignore[attr-defined]


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server on a copy of the demo workspace with the small SmolLM2 model."""
    options = {"modelPath": str(small_model_path()), **SMALL_MODEL_OPTIONS}
    await start_session(lsp_client, request, options)
    yield
    await lsp_client.shutdown_session()


NO_MODEL = "no-model.gguf"
"""A model file that does not exist (under the test's tmp_path): the server's model load
fails at once and it serves the protocol without completions, so a test of the protocol
alone pays for no model work."""


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def protocol_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server on a copy of the demo workspace that loads no model (protocol-only tests)."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    await start_session(lsp_client, request, {"modelPath": str(tmp_path / NO_MODEL)})
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def broken_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server told to load a model file that does not exist, plus invalid settings."""
    tmp_path: Path = request.getfixturevalue("tmp_path")
    options = {
        "modelPath": str(tmp_path / "missing.gguf"),
        "contextBudget": "lots",
        "noSuchSetting": True,
    }
    await start_session(lsp_client, request, options)
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def utf8_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server negotiated to UTF-8 positions, with the small model."""
    options = {"modelPath": str(small_model_path()), **SMALL_MODEL_OPTIONS}
    await start_session(lsp_client, request, options, utf8=True)
    yield
    await lsp_client.shutdown_session()


def open_with_small_model(client: StdioClient, workspace: Path, cache: Path, path: Path) -> str:
    """Initialize ``client`` on ``workspace`` with SmolLM2, wait until its model is
    loaded, open ``path`` (its text on disk); return its URI."""
    options = {"modelPath": str(small_model_path()), **SMALL_MODEL_OPTIONS}
    client.initialize(workspace, {**options, "cacheDir": str(cache)})
    deadline = time.monotonic() + 120
    while not client.command("lspAssist.status").get("ready"):
        assert time.monotonic() < deadline, "the model did not load"
        time.sleep(0.2)
    uri = path.as_uri()
    document = {"uri": uri, "languageId": "python", "version": 1, "text": path.read_text()}
    client.notify("textDocument/didOpen", {"textDocument": document})
    return uri


TAIL = "    return create_"
"""The half-typed line the demo's shop/checkout.py ends with in :func:`demo_with_tail`:
even the tiny test model completes a call here."""

CHECKOUT = "shop/checkout.py"
"""The demo's file the completion tests type in (relative to the workspace)."""


def cursor_at_end(path: Path) -> tuple[int, int]:
    """Write the half-typed line :data:`TAIL` into ``path``; return the cursor after it."""
    text = path.read_text().rstrip() + "\n" + TAIL
    path.write_text(text)
    lines = text.split("\n")
    return len(lines) - 1, len(lines[-1])


def demo_with_tail(tmp_path: Path) -> tuple[Path, Path, int, int]:
    """Copy the demo project into ``tmp_path`` and end its shop/checkout.py with
    :data:`TAIL`; return the workspace, that file and the cursor at its end (line, column)."""
    workspace = copy_demo(tmp_path)
    path = workspace / "shop" / "checkout.py"
    text = path.read_text().rstrip() + "\n" + TAIL
    path.write_text(text)
    return workspace, path, text.count("\n"), len(TAIL)


def shown_stats(log: Path) -> dict[str, Any]:
    """Return ``lsp-assist stats --json``'s ``shown`` figures of the metrics log ``log``."""
    out = subprocess.run(
        [sys.executable, "-m", "lsp_assist.cli.main", "stats", "--metrics", str(log), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    shown: dict[str, Any] = json.loads(out.stdout)["shown"]
    return shown
