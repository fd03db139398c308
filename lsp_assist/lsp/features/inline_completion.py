"""textDocument/inlineCompletion: the suggestion as ghost text (LSP 3.18)."""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import CompletionOutcome, CompletionQuery

ACCEPT_COMMAND = "lspAssist.accept"
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
    if snapshot is None:
        return
    line, character = snapshot.to_lsp(Position(whole.line, whole.column), ls.encoding)
    ls.protocol.notify(
        READY_NOTIFICATION,
        {
            "textDocument": {"uri": query.uri, "version": whole.version},
            "position": {"line": line, "character": character},
        },
    )


async def suggest(
    ls: LspAssistServer,
    uri: str,
    position: types.Position,
    *,
    automatic: bool,
    alternatives: bool = False,
    early: bool = False,
) -> tuple[tuple[str, ...], types.Position, types.Command, DocumentSnapshot] | None:
    """Ask the engine for suggestions at an LSP position.

    Returns the texts (one, or with ``alternatives`` on an explicit request up to the
    ``alternatives`` setting, the greedy one first), the cursor in the client's
    encoding, the accept command and the snapshot of the buffer the suggestions were
    made for, or None when there is nothing to show. With ``early`` (ghost text, which
    the type-through cache and ``lspAssist/suggestionReady`` extend) the engine may
    answer with the suggestion's start (serving/early.py). The snapshot is taken here, as the
    request arrives: the position is converted against it, and the engine works on it
    while edits go on.
    """
    buffers, scheduler = ls.buffers, ls.scheduler
    snapshot = buffers.snapshot(uri, disk=False) if buffers is not None else None
    if scheduler is None or snapshot is None:
        return None
    if scheduler.on_ready is None and wants_ready_notices(ls):
        scheduler.on_ready = lambda query, whole: announce_ready(ls, query, whole)
    pos = snapshot.from_lsp(position.line, position.character, ls.encoding)
    query = CompletionQuery(
        uri=snapshot.uri,
        line=pos.line,
        column=pos.column,
        trigger="automatic" if automatic else "invoked",
        snapshot=snapshot,
        want_alternatives=alternatives and not automatic,
        answer_early=early,
    )
    outcome = await scheduler.complete(query)
    if not outcome.text:
        return None
    line, character = snapshot.to_lsp(Position(outcome.line, outcome.column), ls.encoding)
    accept = types.Command(
        title="Accept suggestion", command=ACCEPT_COMMAND, arguments=[outcome.request_id]
    )
    return outcome.items, types.Position(line=line, character=character), accept, snapshot


def register(server: LspAssistServer) -> None:
    """Register the inline completion handler (options passed so it is advertised)."""

    @server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
    async def inline_completion(
        ls: LspAssistServer, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        automatic = params.context.trigger_kind == types.InlineCompletionTriggerKind.Automatic
        uri, position = params.text_document.uri, params.position
        found = await suggest(ls, uri, position, automatic=automatic, alternatives=True, early=True)
        if found is None:
            return types.InlineCompletionList(items=[])
        texts, here, accept, _snapshot = found
        # In the engine's order: the greedy suggestion (the one the type-through cache
        # keeps) first, then the alternatives the client cycles to.
        items = [
            types.InlineCompletionItem(
                insert_text=text, range=types.Range(start=here, end=here), command=accept
            )
            for text in texts
        ]
        return types.InlineCompletionList(items=items)
