"""Blocking calls of a session, each on a thread of its own that ends with the call.

This module owns :func:`run_blocking`, how the event loop waits for blocking work
(the serving object waiting for the index scan; the LSP layer shutting the serving
object down, freeing a session) without blocking the loop. It does not use the loop's
default executor: that pool keeps its idle workers for the life of the loop, and how
many it makes depends on timing (a worker that has just finished a call counts as busy
until it is scheduled again, so the next call starts another). Over TCP one loop serves
session after session, and on a busy machine each session could leave one more idle
worker than the one before it. A thread here runs one call and ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


async def run_blocking(func: Callable[..., T], *args: Any, name: str) -> T:
    """Run ``func(*args)`` on a new daemon thread called ``name`` and await its result."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)  # type: ignore[arg-type]

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = func(*args)
        except BaseException as exc:  # handed to the awaiting task, as an executor does
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
