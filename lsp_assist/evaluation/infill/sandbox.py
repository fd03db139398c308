"""The sandbox the infill benchmarks run a program in: the scratch folder's environment,
the child's memory cap, and the process group killed at the timeout.

HumanEval (humaneval.run_tests) and SAFIM (safim's compile-and-run) run an answered
program with ``sys.executable -I`` or the language's own tools in a scratch folder of
its own, in a session of its own (``start_new_session``), with :func:`limit_memory` as
its ``preexec_fn`` on POSIX and :func:`scratch_env` as its environment; a run past its
timeout has its whole group killed (:func:`kill_group`). No pygls, no model.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

MEMORY_LIMIT_BYTES = 4 << 30
"""Address-space cap of a test run (a suggestion such as ``[0] * 10**12`` fails fast)."""


def scratch_env(folder: Path) -> dict[str, str]:
    """Return a sandboxed run's environment: the PATH alone, ``folder`` as its home and a
    fixed hash seed."""
    return {"PATH": os.environ.get("PATH", ""), "PYTHONHASHSEED": "0", "HOME": str(folder)}


def limit_memory() -> None:  # pragma: no cover - runs in the child
    """Cap the child's address space at :data:`MEMORY_LIMIT_BYTES` (where the platform can)."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    except (ImportError, ValueError, OSError):
        pass


def kill_group(process: subprocess.Popen[bytes]) -> None:
    """Kill the process's group (it runs in a session of its own), or the process alone."""
    try:
        os.killpg(process.pid, 9)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
