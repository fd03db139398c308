"""Context: the layered, budgeted prompt for a cursor position (see docs/context.md).

Entry points: ``lsp_assist.context.engine.ContextEngine`` and ``explain``; value types
in ``lsp_assist.context.model``. The tokenizer and the ``ModelInfo`` come from the
backend or from ``lsp_assist.backends.vocab.Vocabulary`` (a vocabulary-only load): this
package never imports llama_cpp.
"""
