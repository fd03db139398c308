"""The watcher asks inotify for changes only: reading files in the tree queues no events.

With watchdog's default mask every open and every read-only close in a watched tree is an
event; on the standard library that overflowed inotify's queue, and watchdog re-walked the
whole tree after each overflow (a thread at full CPU, every prefill 3-10x slower).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from lsp_assist.index import watch

IN_ACCESS = 0x01
IN_CLOSE_NOWRITE = 0x10
IN_OPEN = 0x20
IN_MODIFY = 0x02
IN_CREATE = 0x100


def _inotify_masks() -> list[int]:
    """Return the mask of every inotify watch this process holds (from /proc fdinfo)."""
    masks: list[int] = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if "inotify" not in target:
            continue
        info = Path(f"/proc/self/fdinfo/{fd}").read_text()
        masks += [
            int(m, 16) for m in re.findall(r"^inotify wd:\S+ .*?mask:([0-9a-f]+)", info, re.M)
        ]
    return masks


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_observer_subscribes_to_changes_not_reads(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    before = len(_inotify_masks())
    observer = watch.start_observer([tmp_path], lambda _path, _is_dir: None)
    try:
        masks = _inotify_masks()[before:]
        assert len(masks) >= 2  # the root and pkg/
        for mask in masks:
            assert mask & (IN_OPEN | IN_CLOSE_NOWRITE | IN_ACCESS) == 0, hex(mask)
            assert mask & IN_MODIFY and mask & IN_CREATE, hex(mask)
    finally:
        observer.stop()
        observer.join(timeout=2)
