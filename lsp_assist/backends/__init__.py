"""Backends: see docs/architecture.md."""
