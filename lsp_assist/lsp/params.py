"""Reading request params that arrive as lsprotocol objects or as plain JSON dicts.

pygls gives an unregistered method's params as a namespace object and a client may send
any shape, so the notifications outside the LSP spec (Copilot's telemetry, next edits)
read their fields through :func:`field_of`, which never raises.
"""

from __future__ import annotations

from typing import Any


def field_of(value: Any, name: str) -> Any:
    """Return ``value``'s field ``name`` (a dict key or an attribute); None when absent."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)
