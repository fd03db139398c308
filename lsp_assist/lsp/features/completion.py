"""textDocument/completion: the fallback for clients without inline completion.

The AI suggestion is one item with a text edit at the cursor, and nothing else, so
clients such as eglot or older Neovim can still show it. Its label, filterText and
insertText start with the word before the cursor (see ``item_label``); the ✨ mark
is in ``detail`` and ``labelDetails``.
"""

from __future__ import annotations

import re
from typing import Any

from lsprotocol import types

from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.lsp.suggest import accept_command, lsp_position
from lsp_assist.serving import Suggestion

DECORATION = "✨ lsp-assist"
LABEL_CHARS = 60
_WORD_BEFORE = re.compile(r"\w*\Z")


def item_label(before: str, text: str) -> str:
    """The item's label: the word before the cursor, then the suggestion's first line.

    eglot 1.9 replaces the word before the cursor with the label, keeps as many of its
    first characters as that word is long, and inserts the textEdit there: a label
    that does not start with the word garbles the line. Other clients filter items
    by that word. The decoration goes to ``detail``/``labelDetails`` instead.
    """
    word = _WORD_BEFORE.search(before)
    typed = word.group(0) if word else ""
    lines = text.split("\n")
    head = lines[0]
    if not head.strip():
        rest = next((line.strip() for line in lines[1:] if line.strip()), "")
        head = f"⏎ {rest}" if rest else "⏎"
    if not typed:
        head = head.lstrip()
    return typed + head[:LABEL_CHARS]


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


def completion_item(ls: LspAssistServer, found: Suggestion) -> types.CompletionItem:
    """The one item of a suggestion: its first text as a text edit at the cursor."""
    text = found.texts[0]  # one item: no alternatives asked for
    doc, pos, here = found.snapshot, found.pos, lsp_position(found)
    label = item_label(doc.line(pos.line)[: pos.column], text)
    return types.CompletionItem(
        label=label,
        label_details=types.CompletionItemLabelDetails(description=DECORATION),
        kind=types.CompletionItemKind.Text,
        detail=f"{DECORATION} (AI suggestion)",
        documentation=documentation(ls, doc.language_id, text),
        sort_text="0000",
        filter_text=label,
        insert_text=label,
        preselect=True,
        insert_text_format=types.InsertTextFormat.PlainText,
        text_edit=types.TextEdit(range=types.Range(start=here, end=here), new_text=text),
        command=accept_command(found.items[0]),
    )


def register(server: LspAssistServer) -> None:
    """Register the completion handler."""

    @server.feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=[".", "(", " "], resolve_provider=False),
    )
    async def completion(
        ls: LspAssistServer, params: types.CompletionParams
    ) -> types.CompletionList:
        uri, at = params.text_document.uri, params.position
        found = await ls.service.suggest(
            uri, at.line, at.character, ls.encoding, automatic=False, inline=False
        )
        items = [] if found is None else [completion_item(ls, found)]
        return types.CompletionList(is_incomplete=True, items=items)
