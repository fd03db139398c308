"""textDocument/completion: the fallback for clients without inline completion.

The AI suggestion is one clearly labelled item with a text edit at the cursor, and
nothing else, so clients such as eglot or older Neovim can still show it.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from lsp_assist.lsp.features.inline_completion import suggest
from lsp_assist.lsp.server import LspAssistServer

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
        uri = params.text_document.uri
        found = await suggest(ls, uri, params.position, automatic=False)
        if found is None:
            return types.CompletionList(is_incomplete=True, items=[])
        text, here, accept, doc = found
        first_line = text.strip().splitlines()[0]
        # Clients filter items by the word before the cursor: match it, so the item stays.
        pos = doc.from_lsp(here.line, here.character, ls.encoding)
        words = doc.line(pos.line)[: pos.column].split()
        item = types.CompletionItem(
            label=LABEL_PREFIX + first_line[:60],
            kind=types.CompletionItemKind.Text,
            detail="lsp-assist (AI suggestion)",
            documentation=documentation(ls, doc.language_id, text),
            sort_text="0000",
            filter_text=words[-1] if words else first_line,
            preselect=True,
            insert_text_format=types.InsertTextFormat.PlainText,
            text_edit=types.TextEdit(range=types.Range(start=here, end=here), new_text=text),
            command=accept,
        )
        return types.CompletionList(is_incomplete=True, items=[item])
