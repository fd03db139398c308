"""The workspace a bench or an eval runs on: a copy of the indexable files, and its tasks.

The copy lives in a temporary folder of its own (the server runs on it, so a task can
blank its line on disk; the user's files are never written). It is indexed once (the
servers then start from that SQLite cache) and the tasks are chosen from that index
(tasks.py). This module also says what a hole task does to a file (``blanked_bytes``)
and which other files an editor would have open beside it (``siblings``).
"""

from __future__ import annotations

import random
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.config import IndexSettings, parse_settings
from lsp_assist.evaluation.tasks import Task, copy_workspace, generate_tasks

STDLIB_EXCLUDE = [
    "**/test/**",
    "**/tests/**",
    "idlelib/**",
    "lib2to3/**",
    "turtledemo/**",
    "ensurepip/**",
    "site-packages/**",
    "dist-packages/**",
]
"""What the default workspace (the installed standard library) leaves out."""


@dataclass(slots=True)
class Workspace:
    """The copy the servers run on and what the tasks read from it."""

    source: Path
    root: Path
    """The copy (under ``scratch``)."""
    scratch: Path
    cache_dir: Path
    exclude: list[str]
    originals: dict[str, bytes] = field(default_factory=dict)
    """Task files' bytes as they were, by workspace-relative path."""
    files: list[str] = field(default_factory=list)
    """Every copied file, workspace-relative, sorted."""
    index_s: float = 0.0

    def text(self, rel: str) -> str:
        """Return a task file's original text."""
        return self.originals[rel].decode("utf-8", "replace")

    def options(self) -> dict[str, Any]:
        """Return the settings every server on this workspace gets."""
        return {
            "cacheDir": str(self.cache_dir),
            "excludeGlobs": list(self.exclude),
            "watch": False,
            "metrics": True,
            "logPrompts": True,
        }

    def cleanup(self) -> None:
        """Delete the copy and its caches."""
        shutil.rmtree(self.scratch, ignore_errors=True)


def prepare_workspace(
    source: Path,
    exclude: Sequence[str],
    *,
    cross_file: int,
    in_file: int,
    typing: int,
    seed: int,
    scratch: Path | None = None,
    on_index: Callable[[Any], None] | None = None,
) -> tuple[Workspace, list[Task]]:
    """Copy ``source``'s indexable files, index the copy, choose the tasks (``on_index``, when
    given, reads the scanned index too: another benchmark's tasks)."""
    from lsp_assist.config import workspace_cache_dir
    from lsp_assist.index import FileRules, WorkspaceIndex

    source = source.resolve()
    if scratch is not None:
        scratch.mkdir(parents=True, exist_ok=True)
    # a fresh folder of our own, even inside a folder the user named: cleanup removes it whole
    scratch = Path(tempfile.mkdtemp(prefix="lsp-assist-bench-", dir=scratch))
    root = scratch / "workspace" / (source.name or "root")
    cache_dir = scratch / "cache"
    index_settings = IndexSettings(exclude_globs=list(exclude), watch=False)
    found = FileRules([source], index_settings).walk()
    copy_workspace([f.path for f in found], source, root)
    started = time.perf_counter()
    settings, _ = parse_settings({"cacheDir": str(cache_dir)})
    index = WorkspaceIndex(
        [root], index_settings, cache_dir=workspace_cache_dir(settings, root.resolve())
    )
    try:
        index.scan()
        tasks = generate_tasks(
            index, cross_file=cross_file, in_file=in_file, typing=typing, seed=seed
        )
        if on_index is not None:
            on_index(index)
        files = sorted(index.relative(p) for p in index.files())
    finally:
        index.stop()
    workspace = Workspace(
        source=source,
        root=root.resolve(),
        scratch=scratch,
        cache_dir=cache_dir,
        exclude=list(exclude),
        files=files,
        index_s=time.perf_counter() - started,
    )
    for task in tasks:
        workspace.originals.setdefault(task.path, (workspace.root / task.path).read_bytes())
    return workspace, tasks


def blanked_bytes(original: bytes, task: Task) -> bytes:
    """Return the file's bytes with the task's line cut to its indentation."""
    lines = original.split(b"\n")
    raw = lines[task.line]
    lines[task.line] = raw[: task.indent] + (b"\r" if raw.endswith(b"\r") else b"")
    return b"\n".join(lines)


def siblings(workspace: Workspace, task: Task, count: int, seed: int) -> list[str]:
    """Return ``count`` other files of the task's folder (seeded): the editor's other tabs."""
    folder = task.path.rsplit("/", 1)[0] if "/" in task.path else ""
    same = [
        f
        for f in workspace.files
        if f != task.path and (f.rsplit("/", 1)[0] if "/" in f else "") == folder
    ]
    rng = random.Random(f"{seed}:{task.id}")
    return rng.sample(same, min(count, len(same)))
