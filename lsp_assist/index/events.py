"""Watcher events to index work: what a batch of file-system events asks the index to do.

Owns :class:`Watcher` (the watchdog observer feeding a debouncer, or the polling
fallback when the observer cannot start) and :func:`plan_events`, which turns one
debounced batch into either a rescan (folder events, renamed folders, ``.gitignore`` and
``.git/info/exclude`` changes, a deleted folder reported as a file) or the list of files
to refresh. The index applies the plan (``WorkspaceIndex._apply_events``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.documents.document import language_for_path
from lsp_assist.index.files import SKIP_DIRS, FileRules
from lsp_assist.index.watch import Debouncer, Poller, start_observer

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class EventPlan:
    """What one batch of events asks for."""

    rescan: bool = False
    """Run a whole scan (stat only for unchanged files) instead of refreshing ``files``."""
    files: list[Path] = field(default_factory=list)
    """Files to re-stat, re-hash and re-parse if changed (or drop, if gone or ineligible)."""


def plan_events(
    batch: dict[Path, bool],
    norm: Callable[[Path], Path],
    rules: FileRules,
    holds_files_under: Callable[[Path], bool],
) -> EventPlan:
    """Turn a batch (path -> is a folder) into a plan; ``norm`` maps a path onto a root,
    ``holds_files_under`` tells whether the index has disk files below a path. Rule
    caches are invalidated when an ignore file changed."""
    plan = EventPlan()
    for raw, is_dir in batch.items():
        path = norm(raw)
        root = rules.root_of(path)
        if root is None:
            continue
        parts = path.relative_to(root).parts
        if parts and parts[0] == ".git":
            if parts[-1] == "exclude":
                rules.invalidate()
                plan.rescan = True
            continue
        if any(part in SKIP_DIRS for part in parts):
            continue  # node_modules, build output ...: never indexed
        if path.name == ".gitignore":
            rules.invalidate()
            plan.rescan = True
        elif is_dir or path.is_dir():
            plan.rescan = True
        else:
            if not path.exists() and language_for_path(path) is None and holds_files_under(path):
                plan.rescan = True  # a deleted folder reported as a file
            plan.files.append(path)
    return plan


class Watcher:
    """The watchdog observer and its debouncer, or the poller when it cannot start."""

    def __init__(
        self,
        roots: list[Path],
        apply: Callable[[dict[Path, bool]], None],
        rescan: Callable[[], object],
    ) -> None:
        self._roots = roots
        self._apply = apply
        self._rescan = rescan
        self._observer: Any = None
        self._debouncer: Debouncer | None = None
        self._poller: Poller | None = None

    @property
    def observing(self) -> bool:
        """True while the observer (not the poller) runs."""
        return self._observer is not None

    def start(self) -> bool:
        """Start the observer; False (and periodic rescans) if it cannot start."""
        self._debouncer = Debouncer(self._apply)
        try:
            self._observer = start_observer(self._roots, self._debouncer.add)
        except OSError as exc:  # inotify limits, a missing root: poll instead
            logger.warning("file watcher unavailable (%s); rescanning every few seconds", exc)
            self._debouncer.stop()
            self._debouncer = None
            self._poller = Poller(self._rescan)
            return False
        return True

    def stop(self) -> None:
        """Stop the observer, the debouncer and the poller (whichever run)."""
        if self._observer is not None:
            try:
                self._observer.stop()
                self._observer.join(timeout=2)
            except (OSError, RuntimeError) as exc:  # pragma: no cover - best effort
                logger.debug("stopping the observer: %s", exc)
            self._observer = None
        if self._debouncer is not None:
            self._debouncer.stop()
            self._debouncer = None
        if self._poller is not None:
            self._poller.stop()
            self._poller = None
