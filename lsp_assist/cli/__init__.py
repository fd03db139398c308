"""CLI: ``lsp-assist`` subcommands, each a thin module over the plain Python API."""
