"""Context: the layered, budgeted prompt for a cursor position (see docs/context.md).

Entry points: ``lsp_assist.context.engine.ContextEngine`` and ``explain``; value types
in ``lsp_assist.context.model``; ``lsp_assist.context.tokens.VocabTokenizer`` for a
vocabulary-only tokenizer.
"""
