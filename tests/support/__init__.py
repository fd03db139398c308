"""Helpers shared by the test packages (tiny GGUF writer, stdio JSON-RPC client)."""
