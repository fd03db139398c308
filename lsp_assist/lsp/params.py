"""Reading request params that arrive as lsprotocol objects or as plain JSON dicts.

pygls gives an unregistered method's params as a namespace object and a client may send
any shape, so the notifications outside the LSP spec (Copilot's telemetry, next edits)
read their fields through :func:`field_of`, which never raises. A command's arguments
are read with :func:`command_arguments`, which answers misuse with InvalidParams.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from pygls.exceptions import JsonRpcInvalidParams


def field_of(value: Any, name: str) -> Any:
    """Return ``value``'s field ``name`` (a dict key or an attribute); None when absent."""
    if isinstance(value, dict):
        return value.get(name)
    return getattr(value, name, None)


def command_arguments(
    args: Sequence[Any], usage: str, *kinds: Callable[[Any], Any]
) -> tuple[Any, ...]:
    """Return a command's first arguments converted by ``kinds`` (``str``, ``int``).

    Missing or unconvertible ones raise :class:`JsonRpcInvalidParams` with ``usage``: the
    client gets a JSON-RPC error (-32602), not a result.
    """
    if len(args) < len(kinds):
        raise JsonRpcInvalidParams(f"usage: {usage}")
    try:
        return tuple(kind(arg) for kind, arg in zip(kinds, args, strict=False))
    except (TypeError, ValueError) as exc:
        raise JsonRpcInvalidParams(f"usage: {usage} ({exc})") from exc
