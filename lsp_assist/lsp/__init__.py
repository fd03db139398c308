"""Lsp: see docs/architecture.md."""
