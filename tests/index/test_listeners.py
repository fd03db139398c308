"""The index's change listeners run after its lock is released, and its lock is its own.

A listener used to run with the index lock held ("it must only note the path"): one
that waited for another thread using the index, or took a lock another thread held
while it queried the index, deadlocked. ``WorkspaceIndex`` now collects the changed
paths and tells the listeners once the lock is released; the symbol table and the
import graph guard themselves with private locks taken under it.
"""

from __future__ import annotations

import threading
from pathlib import Path

from lsp_assist.config import IndexSettings
from lsp_assist.documents.document import ByteEdit
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.workspace import write_files

WAIT_S = 5.0


def _index(tmp_path: Path) -> tuple[WorkspaceIndex, Path]:
    root = write_files(
        tmp_path / "ws",
        {"app/a.py": "def alpha():\n    return 1\n", "app/b.py": "from app.a import alpha\n"},
    )
    index = WorkspaceIndex([root], IndexSettings(watch=False, persist=False))
    return index, root / "app" / "a.py"


def _append(index: WorkspaceIndex, path: Path, old: str, tail: str) -> str:
    """Append ``tail`` to the open buffer ``path`` (whose text is ``old``) as one edit."""
    end = len(old.encode())
    row = old.count("\n")
    edit = ByteEdit(
        start_byte=end,
        old_end_byte=end,
        new_end_byte=end + len(tail.encode()),
        start_point=(row, 0),
        old_end_point=(row, 0),
        new_end_point=(row + tail.count("\n"), 0),
    )
    index.edit_buffer(path, old + tail, edit)
    return old + tail


def test_a_listener_may_wait_for_another_thread_that_queries_the_index(tmp_path: Path) -> None:
    index, path = _index(tmp_path)
    answered: list[bool] = []

    def listener(changed: Path) -> None:
        reader = threading.Thread(target=lambda: (index.files(), index.lookup("alpha")))
        reader.start()
        reader.join(WAIT_S)
        answered.append(not reader.is_alive())

    index.on_change(listener)
    index.scan()
    assert answered == [True, True]  # both files, each told with the lock free
    text = path.read_text()
    index.open_buffer(path, text)  # the same content: nothing to tell
    _append(index, path, text, "def beta():\n    return 2\n")
    assert answered == [True] * 3
    assert [s.name for s in index.lookup("beta")] == ["beta"]
    index.stop()


def test_a_listener_that_takes_another_lock_does_not_deadlock(tmp_path: Path) -> None:
    """ABBA: the listener wants ``other`` while the thread holding it asks the index."""
    index, path = _index(tmp_path)
    index.scan()
    text = path.read_text()
    index.open_buffer(path, text)
    other = threading.Lock()
    told: list[Path] = []

    def listener(changed: Path) -> None:
        with other:
            told.append(changed)

    index.on_change(listener)
    holding = threading.Event()
    queried = threading.Event()

    def hold_then_query() -> None:
        with other:
            holding.set()
            # long enough for the edit below to take the index lock and reach the listener
            threading.Event().wait(0.3)
            index.files()  # takes the index lock
            queried.set()

    holder = threading.Thread(target=hold_then_query, daemon=True)
    holder.start()
    assert holding.wait(WAIT_S)
    editor = threading.Thread(target=_append, args=(index, path, text, "x = 1\n"), daemon=True)
    editor.start()
    editor.join(WAIT_S)
    holder.join(WAIT_S)
    assert queried.is_set() and not editor.is_alive(), "the listener deadlocked the index"
    assert told == [path]
    index.stop()


def test_the_graph_and_the_table_keep_their_locks(tmp_path: Path) -> None:
    index, path = _index(tmp_path)
    index.scan()
    assert index._lock not in vars(index._table).values()
    assert index._lock not in vars(index._graph).values()
    assert index.importers_of(path) == [path.parent / "b.py"]
    index.stop()
