"""textDocument/inlineCompletion: the suggestion as ghost text (LSP 3.18)."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.lsp.suggest import accept_command, lsp_position


def register(server: LspAssistServer) -> None:
    """Register the inline completion handler (options passed so it is advertised)."""

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: LspAssistServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        uri, at = params.text_document.uri, params.position
        found = await ls.service.suggest(
            uri, at.line, at.character, ls.encoding, automatic=automatic, inline=True
        )
        if found is None:
            return types.InlineCompletionList(items=[])
        here = types.Range(start=lsp_position(found), end=lsp_position(found))
        # In the engine's order: the greedy suggestion (the one the type-through cache
        # keeps) first, then the alternatives the client cycles to.
        items = [
            types.InlineCompletionItem(insert_text=text, range=here, command=accept_command(item))
            for text, item in zip(found.texts, found.items, strict=True)
        ]
        return types.InlineCompletionList(items=items)
