"""A tiny shop: orders, payments and receipts (the lsp-assist demo workspace)."""
