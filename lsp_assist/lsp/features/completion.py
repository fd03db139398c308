"""textDocument/completion: the fallback for clients without inline completion.

The AI suggestion is one clearly labelled item with a text edit at the cursor, and
nothing else, so clients such as eglot or older Neovim can still show it.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_assist.lsp.features.inline_completion import ACCEPT_COMMAND
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving.engine import CompletionQuery

LABEL_PREFIX = "✨ "


def documentation(ls: LspAssistServer, language: str, text: str) -> types.MarkupContent | str:
    """Show the whole suggestion as Markdown when the client renders it, else as a string."""
    formats: Any = None
    try:
        item_caps = ls.client_capabilities.text_document.completion.completion_item  # type: ignore[union-attr]
        formats = item_caps.documentation_format if item_caps else None
    except AttributeError:
        formats = None
    if formats and types.MarkupKind.Markdown in formats:
        return types.MarkupContent(
            kind=types.MarkupKind.Markdown, value=f"```{language}\n{text}\n```"
        )
    return text


def register(server: LspAssistServer) -> None:
    """Register the completion handler."""

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", " "], resolve_provider=False),
    )
    async def completion(
        ls: LspAssistServer, params: types.CompletionParams
    ) -> types.CompletionList:
        engine, scheduler = ls.engine, ls.scheduler
        doc = engine.documents.get(params.text_document.uri) if engine else None
        empty = types.CompletionList(is_incomplete=True, items=[])
        if engine is None or scheduler is None or doc is None:
            return empty
        pos = doc.from_lsp(params.position.line, params.position.character, ls.encoding)
        query = CompletionQuery(
            uri=doc.uri, line=pos.line, column=pos.column, trigger="invoked", version=doc.version
        )
        outcome = await scheduler.complete(query)
        if not outcome.text:
            return empty
        line, character = doc.to_lsp(pos, ls.encoding)
        here = types.Position(line=line, character=character)
        first_line = outcome.text.strip().splitlines()[0] if outcome.text.strip() else outcome.text
        item = types.CompletionItem(
            label=LABEL_PREFIX + first_line[:60],
            kind=types.CompletionItemKind.Text,
            detail="lsp-assist (AI suggestion)",
            documentation=documentation(ls, doc.language_id, outcome.text),
            sort_text="0000",
            filter_text=doc.line(pos.line)[: pos.column].split()[-1]
            if doc.line(pos.line)[: pos.column].split()
            else first_line,
            preselect=True,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(
                range=types.Range(start=here, end=here), new_text=outcome.text
            ),
            command=types.Command(
                title="Accept suggestion", command=ACCEPT_COMMAND, arguments=[outcome.request_id]
            ),
        )
        return types.CompletionList(is_incomplete=True, items=[item])
