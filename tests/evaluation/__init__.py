"""Tests of ``lsp-assist bench`` and ``eval``; :func:`python_task` builds the tasks they score."""

from __future__ import annotations

from typing import Any

from lsp_assist.evaluation.tasks import Task, TaskKind


def python_task(
    task_id: str, kind: TaskKind, path: str, line: int, target: str, **fields: Any
) -> Task:
    """Return a task on ``line`` of a Python file, the cursor at the target's indentation."""
    indent = len(target) - len(target.lstrip())
    return Task(
        id=task_id,
        kind=kind,
        path=path,
        language="python",
        line=line,
        indent=indent,
        target=target,
        **fields,
    )
