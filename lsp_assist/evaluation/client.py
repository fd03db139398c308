"""An editor's side of the protocol: start ``lsp-assist serve`` over stdio and talk to it.

The one home of the client code that the demo, the benchmarks and ``lsp-assist
bench``/``eval`` share: start and initialize the server, wait for the model and the
index, send edits, ask for inline completions, read the server's status.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lsprotocol import types

SERVE = [sys.executable, "-m", "lsp_assist.cli.main", "serve"]


def line_edit(
    uri: str, version: int, line: int, start: int, end: int, text: str
) -> types.DidChangeTextDocumentParams:
    """Return a didChange replacing columns ``start``-``end`` of one line with ``text``."""
    return range_edit(uri, version, (line, start), (line, end), text)


def range_edit(
    uri: str, version: int, start: tuple[int, int], end: tuple[int, int], text: str
) -> types.DidChangeTextDocumentParams:
    """Return a didChange replacing ``start``-``end`` ((line, character) each) with ``text``."""
    return types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[
            types.TextDocumentContentChangePartial(
                range=types.Range(
                    start=types.Position(line=start[0], character=start[1]),
                    end=types.Position(line=end[0], character=end[1]),
                ),
                text=text,
            )
        ],
    )


async def command(client: Any, name: str, *arguments: Any) -> dict[str, Any]:
    """Run a workspace/executeCommand and return its result as a dict."""
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=name, arguments=list(arguments) or None)
    )
    return dict(result or {})


async def inline_request(
    client: Any, uri: str, line: int, character: int, *, automatic: bool
) -> tuple[str, float, dict[str, Any]]:
    """Ask for an inline completion; return the suggestion, the round trip (ms), the outcome.

    The outcome is the server's ``lspAssist.status`` "last" entry, asked for after the
    answer (outside the measured round trip). An early answer (docs/serving.md) is
    recorded only when the whole suggestion is written: the outcome is then
    ``{"request_id": ..., "pending": True}`` with the id the answer's accept command
    carries, for the caller to find in the metrics log.
    """
    kind = types.InlineCompletionTriggerKind
    t0 = time.perf_counter()
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(
                trigger_kind=kind.Automatic if automatic else kind.Invoked
            ),
        )
    )
    elapsed = (time.perf_counter() - t0) * 1000
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    suggestion = str(items[0].insert_text) if items else ""
    accept = items[0].command if items else None
    answer_id = str(accept.arguments[0]) if accept is not None and accept.arguments else ""
    state = await command(client, "lspAssist.status")
    last: dict[str, Any] = state.get("last", {})
    if answer_id and last.get("request_id") != answer_id:
        last = {"request_id": answer_id, "pending": True}
    return suggestion, elapsed, last


async def start_server(
    name: str,
    root: Path,
    options: dict[str, Any],
    *,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = ("--log-level", "WARNING"),
    on_message: Callable[[str], None] | None = None,
    experimental: dict[str, Any] | None = None,
    notifications: dict[str, Callable[..., None]] | None = None,
) -> tuple[Any, types.InitializeResult]:
    """Start ``lsp-assist serve`` over stdio and initialize it on ``root``.

    ``options`` are the initializationOptions (the settings an editor sends), ``args``
    extra command-line flags, ``on_message`` receives each window/showMessage text,
    ``experimental`` goes into the client capabilities (``lspAssistSuggestionReady``
    opts in to early-answer notices) and ``notifications`` maps more server
    notifications to handlers. Returns the client and the server's InitializeResult.
    """
    from pygls.lsp.client import LanguageClient

    client = LanguageClient(name, "0.1")

    def ignore(*_: Any) -> None:
        return None

    def show_message(*params: Any) -> None:
        if on_message is not None:
            message = params[-1]
            on_message(str(getattr(message, "message", message)))

    client.feature(types.WINDOW_SHOW_MESSAGE)(show_message)
    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(ignore)
    client.feature(types.PROGRESS)(ignore)
    for method, handler in (notifications or {}).items():
        client.feature(method)(_plain(handler))
    await client.start_io(*SERVE, *args, env=env)
    init = await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                text_document=types.TextDocumentClientCapabilities(
                    inline_completion=types.InlineCompletionClientCapabilities()
                ),
                window=types.WindowClientCapabilities(work_done_progress=True),
                experimental=experimental,
            ),
            root_uri=root.as_uri(),
            workspace_folders=[types.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    client.initialized(types.InitializedParams())
    return client, init


def _plain(handler: Callable[..., None]) -> Callable[..., None]:
    """Return ``handler`` as a plain function (pygls sets attributes on what it registers,
    which a bound method refuses)."""

    def call(*params: Any) -> None:
        handler(*params)

    return call


async def wait_loaded(client: Any, timeout: float = 600.0) -> dict[str, Any]:
    """Poll ``lspAssist.status`` until the model is loaded and the index scanned.

    Returns the last status; raises RuntimeError when the model failed to load or the
    wait ran past ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        state = await command(client, "lspAssist.status")
        model = state.get("model", {})
        index = state.get("index", {})
        if model.get("error"):
            raise RuntimeError(f"the server could not load the model: {model['error']}")
        done, total = index.get("files_done", 0), index.get("files_total", 0)
        if model.get("loaded") and total and done >= total:
            return state
        if time.monotonic() > deadline:
            raise RuntimeError(f"model or index not ready after {timeout:.0f} s: {state}")
        await asyncio.sleep(0.25)


def open_document(client: Any, uri: str, text: str, language: str, version: int = 1) -> None:
    """Send didOpen for a buffer."""
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(
                uri=uri, language_id=language, version=version, text=text
            )
        )
    )


async def rest_cursor(
    client: Any, uri: str, line: int, character: int, *, version: int = 1, timeout: float = 60.0
) -> dict[str, Any]:
    """Report where the cursor rests (``lspAssist/didMoveCursor``), as lsp-assist's
    editors do, and wait for the server's prefill there.

    Returns the status's ``last_prefill`` for that line ({} when none came in time: no
    model, or a request cancelled it).
    """
    position = {"line": line, "character": character}
    client.protocol.notify(
        "lspAssist/didMoveCursor",
        {"textDocument": {"uri": uri, "version": version}, "position": position},
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record: dict[str, Any] = (await command(client, "lspAssist.status")).get(
            "last_prefill"
        ) or {}
        if record.get("reason") == "cursor" and (record.get("uri"), record.get("line")) == (
            uri,
            line,
        ):
            return record
        await asyncio.sleep(0.1)
    return {}


def close_document(client: Any, uri: str) -> None:
    """Send didClose for a buffer."""
    client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )


async def stop_server(client: Any) -> None:
    """Shut the server down politely and wait for its process to end."""
    try:
        await asyncio.wait_for(client.shutdown_async(None), timeout=30)
        client.exit(None)
    finally:
        await client.stop()
