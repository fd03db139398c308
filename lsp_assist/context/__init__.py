"""Context: see docs/architecture.md."""
