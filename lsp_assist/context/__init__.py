"""Context: the layered, budgeted prompt for a cursor position (see docs/context.md).

Entry points: :class:`ContextEngine` and :func:`explain`; value types :class:`Cursor`,
:class:`AssembledPrompt` and its layers; :func:`get_parser`, the engine's parser per
language (evaluation checks with it that a suggestion parses). The tokenizer and the
``ModelInfo`` come from the backend or from ``lsp_assist.backends.Vocabulary`` (a
vocabulary-only load): this package never imports llama_cpp.
"""

from lsp_assist.context.engine import ContextEngine, explain
from lsp_assist.context.model import AssembledPrompt, Cursor, Layer, LayerItem, TokenCounter
from lsp_assist.context.syntax import get_parser
from lsp_assist.context.vector_layer import attach_vectors

__all__ = [
    "AssembledPrompt",
    "ContextEngine",
    "Cursor",
    "Layer",
    "LayerItem",
    "TokenCounter",
    "attach_vectors",
    "explain",
    "get_parser",
]
