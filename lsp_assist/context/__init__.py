"""Context: the layered, budgeted prompt for a cursor position (see docs/context.md).

Entry points: :class:`ContextEngine` and :func:`explain`; :class:`PromptMemory`, what a
completion keeps for the next prompt of its file (owned by its caller, read by a build
handed it); value types :class:`Cursor`, :class:`AssembledPrompt` and its layers;
:func:`get_parser`, the engine's parser per
language (evaluation checks with it that a suggestion parses). The tokenizer and the
``ModelInfo`` come from the backend or from ``lsp_assist.backends.Vocabulary`` (a
vocabulary-only load): this package never imports llama_cpp.
"""

from lsp_assist.context.engine import ContextEngine, explain
from lsp_assist.context.memory import BuildNote, PromptMemory
from lsp_assist.context.model import AssembledPrompt, Cursor, Layer, LayerItem, TokenCounter
from lsp_assist.context.rewrite import (
    RECENT_EDITS,
    REWRITE_FORMATS,
    EditWindow,
    RecentEdit,
    RewriteFormat,
    choose_rewrite_format,
    edit_window,
    fit_rewrite_prompt,
    original_window,
    recent_edits,
    rewrite_prompt,
)
from lsp_assist.context.rewrite_diff import LineEdit, Rejoin, smallest_edits
from lsp_assist.context.syntax import get_parser
from lsp_assist.context.vector_layer import attach_vectors

__all__ = [
    "RECENT_EDITS",
    "REWRITE_FORMATS",
    "AssembledPrompt",
    "BuildNote",
    "ContextEngine",
    "Cursor",
    "EditWindow",
    "Layer",
    "LayerItem",
    "LineEdit",
    "PromptMemory",
    "RecentEdit",
    "Rejoin",
    "RewriteFormat",
    "TokenCounter",
    "attach_vectors",
    "choose_rewrite_format",
    "edit_window",
    "explain",
    "fit_rewrite_prompt",
    "get_parser",
    "original_window",
    "recent_edits",
    "rewrite_prompt",
    "smallest_edits",
]
