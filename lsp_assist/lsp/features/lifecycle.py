"""initialize, initialized, shutdown and workspace/didChangeConfiguration."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import run_blocking


def register(server: LspAssistServer) -> None:
    """Register the lifecycle handlers."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: LspAssistServer, params: types.InitializeParams) -> None:
        ls.setup(params)

    @server.feature(types.INITIALIZED)
    def initialized(ls: LspAssistServer, params: types.InitializedParams) -> None:
        ls.service.start()  # the settings' warnings, the model's load, the index's scan

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(
        ls: LspAssistServer, params: types.DidChangeConfigurationParams
    ) -> None:
        ls.service.apply_settings(params.settings)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: LspAssistServer, params: None) -> None:
        # Off the event loop: it waits for the model thread to be idle.
        await run_blocking(ls.shutdown_engine, name="lsp-assist-shutdown")
