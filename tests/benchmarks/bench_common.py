"""What the benchmark scripts share: the percentile they report, starting the real server."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def pct(values: list[float], q: float) -> float:
    """Return the q-th percentile (0-100) of values by nearest rank, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


async def start_server(
    name: str, root: Path, options: dict[str, Any], env: dict[str, str] | None = None
) -> Any:
    """Start ``lsp-assist serve`` over stdio, initialize it on ``root``; return the client."""
    from lsprotocol import types
    from pygls.lsp.client import LanguageClient

    client = LanguageClient(name, "0.1")

    def ignore(*args: Any) -> None:
        return None

    client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)(ignore)
    client.feature(types.PROGRESS)(ignore)
    command = [sys.executable, "-m", "lsp_assist.cli.main", "serve", "--log-level", "WARNING"]
    await client.start_io(*command, env=env)
    await client.initialize_async(
        types.InitializeParams(
            capabilities=types.ClientCapabilities(
                text_document=types.TextDocumentClientCapabilities(
                    inline_completion=types.InlineCompletionClientCapabilities()
                )
            ),
            root_uri=root.as_uri(),
            initialization_options=options,
        )
    )
    client.initialized(types.InitializedParams())
    return client
