"""Serving: see docs/architecture.md."""
