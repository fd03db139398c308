"""initialize, initialized, shutdown and workspace/didChangeConfiguration."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.lsp.blocking import run_blocking
from lsp_assist.lsp.server import LspAssistServer


def register(server: LspAssistServer) -> None:
    """Register the lifecycle handlers."""

    @server.feature(types.INITIALIZE)
    def initialize(ls: LspAssistServer, params: types.InitializeParams) -> None:
        ls.setup(params)

    @server.feature(types.INITIALIZED)
    def initialized(ls: LspAssistServer, params: types.InitializedParams) -> None:
        for warning in ls.pending_warnings:
            ls.warn(warning)
        ls.pending_warnings.clear()
        ls.background(ls.start_background_work())

    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    def did_change_configuration(
        ls: LspAssistServer, params: types.DidChangeConfigurationParams
    ) -> None:
        ls.apply_settings(params.settings)

    @server.feature(types.SHUTDOWN)
    async def shutdown(ls: LspAssistServer, params: None) -> None:
        # Off the event loop: it waits for the model thread to be idle.
        await run_blocking(ls.shutdown_engine, name="lsp-assist-shutdown")
