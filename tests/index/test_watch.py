"""The watcher: files created, changed, renamed and deleted on disk reach the index."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from lsp_assist.config import IndexSettings
from lsp_assist.index import watch
from lsp_assist.index.workspace import WorkspaceIndex


def _wait(condition: Callable[[], bool], deadline: float = 5.0) -> bool:
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_watcher_reflects_disk_changes(tmp_path: Path) -> None:
    index = WorkspaceIndex([tmp_path])
    index.scan()
    assert index.start_watching()
    try:
        path = tmp_path / "a.py"
        path.write_text("def first():\n    pass\n")
        assert _wait(lambda: bool(index.lookup("first")))
        started = time.monotonic()
        path.write_text("def second():\n    pass\n")
        assert _wait(lambda: bool(index.lookup("second")) and not index.lookup("first"))
        assert time.monotonic() - started < 3.0  # debounce <= 0.5 s, slack for loaded CI
        renamed = tmp_path / "b.py"
        path.rename(renamed)
        assert _wait(
            lambda: bool(index.lookup("second")) and index.lookup("second")[0].path == renamed
        )
        assert index.file(path) is None
        sub = tmp_path / "pkg"
        sub.mkdir()
        (sub / "c.py").write_text("class Third:\n    pass\n")
        assert _wait(lambda: bool(index.lookup("Third")))
        renamed.unlink()
        assert _wait(lambda: not index.lookup("second"))
        assert renamed not in index.files()
        (tmp_path / ".gitignore").write_text("pkg/\n")
        assert _wait(lambda: not index.lookup("Third"))
    finally:
        index.stop()


def test_watcher_fallback_polls(tmp_path: Path, monkeypatch: object) -> None:
    def broken(*_args: object) -> object:
        raise OSError("inotify watch limit reached")

    import pytest

    mp = pytest.MonkeyPatch()
    mp.setattr(watch, "start_observer", broken)
    mp.setattr("lsp_assist.index.events.start_observer", broken)
    mp.setattr(watch, "POLL_INTERVAL_S", 0.05)
    original = watch.Poller.__init__

    def fast_init(self: watch.Poller, rescan: Callable[[], object], interval: float = 0.05) -> None:
        original(self, rescan, 0.05)

    mp.setattr(watch.Poller, "__init__", fast_init)
    try:
        index = WorkspaceIndex([tmp_path])
        index.scan()
        assert index.start_watching() is False
        (tmp_path / "p.py").write_text("def polled():\n    pass\n")
        assert _wait(lambda: bool(index.lookup("polled")))
        index.stop()
    finally:
        mp.undo()


def test_watch_disabled(tmp_path: Path) -> None:
    index = WorkspaceIndex([tmp_path], IndexSettings(watch=False))
    assert index.start_watching() is False
    index.stop()
