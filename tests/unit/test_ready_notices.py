"""``lspAssist/suggestionReady``: chosen at set-up from the client's capabilities.

The scheduler's ``on_ready`` is a constructor argument that ``LspAssistServer.setup``
picks from ``capabilities.experimental.lspAssistSuggestionReady`` and hands to the
serving object it makes; no request handler installs it later.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_assist.config import Settings
from lsp_assist.lsp.server import READY_CAPABILITY, create_server, wants_ready_notices


def _initialized(tmp_path: Path, experimental: Any) -> Any:
    server = create_server(Settings())
    params = types.InitializeParams(
        capabilities=types.ClientCapabilities(experimental=experimental),
        root_uri=tmp_path.as_uri(),
        initialization_options={
            "metrics": False,
            "persist": False,
            "watch": False,
            "cacheDir": str(tmp_path / "cache"),
        },
    )
    server.setup(params)
    return server


@pytest.mark.parametrize(
    ("experimental", "wanted"),
    [
        ({READY_CAPABILITY: True}, True),
        (None, False),
        ({}, False),
        ({READY_CAPABILITY: False}, False),
    ],
)
def test_on_ready_is_chosen_at_setup(tmp_path: Path, experimental: Any, wanted: bool) -> None:
    server = _initialized(tmp_path, experimental)
    scheduler = server.service.scheduler
    try:
        if wanted:
            assert scheduler.on_ready == server.announce_ready
        else:
            assert scheduler.on_ready is None  # a client without the capability: none
    finally:
        server.shutdown_engine()


def test_the_capability_is_read_from_experimental() -> None:
    assert wants_ready_notices(types.ClientCapabilities(experimental={READY_CAPABILITY: 1}))
    assert not wants_ready_notices(types.ClientCapabilities(experimental=[READY_CAPABILITY]))
    assert not wants_ready_notices(types.ClientCapabilities())
    assert not wants_ready_notices(None)
