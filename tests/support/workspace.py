"""Workspaces on disk for tests, indexed by the real ``WorkspaceIndex``; the demo project.

Tests that need an index write their files into a temporary folder and scan it: the
symbols, imports, deny rules and import resolution are the ones a user's server has,
not a second extractor's. Tests that drive a server work on a copy of the demo project
(``docs/examples/shop``).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from lsp_assist.config import IndexSettings
from lsp_assist.index.workspace import WorkspaceIndex

DEMO = Path(__file__).resolve().parents[2] / "docs" / "examples" / "shop"
"""The demo project of the README (a package ``shop`` inside a folder ``shop``)."""


def copy_demo(parent: Path) -> Path:
    """Copy the demo project to ``parent / "shop"`` and return that folder."""
    workspace = parent / "shop"
    shutil.copytree(DEMO, workspace)
    return workspace


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``files`` (relative path -> text) under ``root``; return ``root``."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def scanned_index(
    root: Path,
    files: Mapping[str, str] | None = None,
    *,
    index_class: type[WorkspaceIndex] = WorkspaceIndex,
    **settings: object,
) -> WorkspaceIndex:
    """Write ``files`` under ``root`` and return an index of ``root`` after one scan.

    ``settings`` are ``IndexSettings`` fields (``deny_globs=[...]``); the index neither
    watches nor persists unless they say so.
    """
    if files:
        write_files(root, files)
    options: dict[str, object] = {"watch": False, "persist": False, **settings}
    index = index_class([root], IndexSettings(**options))  # type: ignore[arg-type]
    index.scan()
    return index


def rewrite(index: WorkspaceIndex, rel: str, text: str) -> Path:
    """Write one file under the index's first root and scan again; return its path.

    The file's modification time moves forward even when the text is written within the
    file system's timestamp granularity, so the scan always sees the new text.
    """
    path = index.roots[0] / rel
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    after = path.stat().st_mtime_ns
    if after <= before:
        os.utime(path, ns=(after, before + 1_000_000))
    index.scan()
    return path
