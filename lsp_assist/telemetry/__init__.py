"""Telemetry: see docs/architecture.md."""
