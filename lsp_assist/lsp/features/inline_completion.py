"""textDocument/inlineCompletion: the suggestion as ghost text (LSP 3.18)."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.documents import Position
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.lsp.suggest import suggest
from lsp_assist.serving import CompletionOutcome, CompletionQuery

READY_NOTIFICATION = "lspAssist/suggestionReady"
READY_CAPABILITY = "lspAssistSuggestionReady"
"""A client that sets this in ``capabilities.experimental`` gets READY_NOTIFICATION."""


def wants_ready_notices(ls: LspAssistServer) -> bool:
    """True when the client asked for ``lspAssist/suggestionReady`` (an experimental capability)."""
    try:
        experimental = ls.client_capabilities.experimental
    except (AttributeError, RuntimeError):
        return False
    return isinstance(experimental, dict) and bool(experimental.get(READY_CAPABILITY))


def announce_ready(ls: LspAssistServer, query: CompletionQuery, whole: CompletionOutcome) -> None:
    """Tell the client that an early-answered suggestion is now whole: asking again gets it."""
    snapshot = query.snapshot
    line, character = snapshot.to_lsp(Position(whole.line, whole.column), ls.encoding)
    ls.protocol.notify(
        READY_NOTIFICATION,
        {
            "textDocument": {"uri": query.uri, "version": whole.version},
            "position": {"line": line, "character": character},
        },
    )


def install_ready_notices(ls: LspAssistServer) -> None:
    """Have the scheduler announce whole suggestions, once, if the client asked for it."""
    scheduler = ls.scheduler
    if scheduler is not None and scheduler.on_ready is None and wants_ready_notices(ls):
        scheduler.on_ready = lambda query, whole: announce_ready(ls, query, whole)


def register(server: LspAssistServer) -> None:
    """Register the inline completion handler (options passed so it is advertised)."""

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: LspAssistServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        uri, position = params.text_document.uri, params.position
        install_ready_notices(ls)
        found = await suggest(ls, uri, position, automatic=automatic, alternatives=True, early=True)
        if found is None:
            return types.InlineCompletionList(items=[])
        here = found.lsp_pos
        # In the engine's order: the greedy suggestion (the one the type-through cache
        # keeps) first, then the alternatives the client cycles to.
        items = [
            types.InlineCompletionItem(
                insert_text=text, range=types.Range(start=here, end=here), command=found.accept
            )
            for text in found.texts
        ]
        return types.InlineCompletionList(items=items)
