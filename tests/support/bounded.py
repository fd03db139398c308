"""Run a blocking call on a thread with a limit, so a hang fails the test instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any


def bounded(func: Callable[[], Any], limit_s: float) -> tuple[Any, float]:
    """Run ``func`` on a thread; return (its result or exception, seconds it took).

    Fails the test (instead of hanging it) when ``func`` still runs after ``limit_s``.
    """
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(func())
        except Exception as exc:
            out.append(exc)

    started = time.perf_counter()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    took = time.perf_counter() - started
    assert not thread.is_alive(), f"still running after {took:.1f} s"
    return out[0], took
