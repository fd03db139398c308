"""textDocument/inlineCompletion: the suggestion as ghost text (LSP 3.18)."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving.engine import CompletionQuery

ACCEPT_COMMAND = "lspAssist.accept"


def register(server: LspAssistServer) -> None:
    """Register the inline completion handler (options passed so it is advertised)."""

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: LspAssistServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        engine, scheduler = ls.engine, ls.scheduler
        doc = engine.documents.get(params.text_document.uri) if engine else None
        if engine is None or scheduler is None or doc is None:
            return types.InlineCompletionList(items=[])
        pos = doc.from_lsp(params.position.line, params.position.character, ls.encoding)
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        query = CompletionQuery(
            uri=doc.uri,
            line=pos.line,
            column=pos.column,
            trigger="automatic" if automatic else "invoked",
            version=doc.version,
        )
        outcome = await scheduler.complete(query)
        if not outcome.text:
            return types.InlineCompletionList(items=[])
        line, character = doc.to_lsp(pos, ls.encoding)
        here = types.Position(line=line, character=character)
        item = types.InlineCompletionItem(
            insert_text=outcome.text,
            range=types.Range(start=here, end=here),
            command=types.Command(
                title="Accept suggestion", command=ACCEPT_COMMAND, arguments=[outcome.request_id]
            ),
        )
        return types.InlineCompletionList(items=[item])
