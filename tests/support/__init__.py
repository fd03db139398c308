"""Helpers shared by the test packages (docs/testing.md).

The tiny GGUF writer, workspaces on disk through the real index, stdio JSON-RPC clients.
"""
