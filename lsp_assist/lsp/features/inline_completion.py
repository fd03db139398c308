"""textDocument/inlineCompletion: the suggestion as ghost text (LSP 3.18)."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.lsp.suggest import suggest


def register(server: LspAssistServer) -> None:
    """Register the inline completion handler (options passed so it is advertised)."""

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: LspAssistServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        uri, position = params.text_document.uri, params.position
        if ls.session is not None:
            ls.session.shown.asked(uri)  # its changes are keys (the quiet rate)
        found = await suggest(ls, uri, position, automatic=automatic, alternatives=True, early=True)
        if found is None:
            return types.InlineCompletionList(items=[])
        here = found.lsp_pos
        # In the engine's order: the greedy suggestion (the one the type-through cache
        # keeps) first, then the alternatives the client cycles to.
        items = [
            types.InlineCompletionItem(
                insert_text=text, range=types.Range(start=here, end=here), command=command
            )
            for text, command in zip(found.texts, found.commands, strict=True)
        ]
        return types.InlineCompletionList(items=items)
