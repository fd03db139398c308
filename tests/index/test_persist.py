"""The persistent cache: a restart parses nothing that did not change."""

from __future__ import annotations

import os
from pathlib import Path

from lsp_assist.index.workspace import WorkspaceIndex


def _make(root: Path) -> None:
    (root / "pkg").mkdir()
    (root / "pkg" / "__init__.py").write_text('"""Package."""\n')
    (root / "pkg" / "a.py").write_text("def alpha():\n    '''Alpha doc.'''\n")
    (root / "pkg" / "b.py").write_text("from .a import alpha\n\nclass Beta:\n    pass\n")
    (root / "main.go").write_text("package main\n\nfunc main() {}\n")


def test_second_run_parses_nothing_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _make(root)
    cache = tmp_path / "cache"
    first = WorkspaceIndex([root], cache_dir=cache)
    stats = first.scan()
    assert (stats.files, stats.parsed, stats.skipped_unchanged) == (4, 4, 0)
    first.stop()

    second = WorkspaceIndex([root], cache_dir=cache)
    stats = second.scan()
    assert (stats.files, stats.parsed, stats.skipped_unchanged) == (4, 0, 4)
    alpha = second.lookup("alpha")
    assert [s.doc for s in alpha] == ["Alpha doc."]
    assert alpha[0].path == root / "pkg" / "a.py"
    assert second.importers_of(root / "pkg" / "a.py") == [root / "pkg" / "b.py"]
    entry = second.file(root / "pkg" / "b.py")
    assert entry is not None and entry.content_hash and entry.size > 0
    second.stop()

    # one file changed, one only touched (same content, new mtime), one deleted
    (root / "pkg" / "a.py").write_text("def alpha2():\n    pass\n")
    b = root / "pkg" / "b.py"
    st = b.stat()
    os.utime(b, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    (root / "main.go").unlink()
    third = WorkspaceIndex([root], cache_dir=cache)
    stats = third.scan()
    assert (stats.files, stats.parsed, stats.skipped_unchanged) == (3, 1, 2)
    assert third.lookup("alpha2") and not third.lookup("alpha") and not third.lookup("main")
    third.stop()

    fourth = WorkspaceIndex([root], cache_dir=cache)
    stats = fourth.scan()
    assert (stats.files, stats.parsed) == (3, 0)
    assert fourth.lookup("alpha2")
    fourth.stop()


def test_in_memory_rescan_parses_only_changes(tmp_path: Path) -> None:
    _make(tmp_path)
    index = WorkspaceIndex([tmp_path])
    assert index.scan().parsed == 4
    assert index.scan().parsed == 0
    (tmp_path / "pkg" / "b.py").write_text("class Gamma:\n    pass\n")
    stats = index.scan()
    assert stats.parsed == 1 and index.lookup("Gamma") and not index.lookup("Beta")


def test_corrupt_cache_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    _make(root)
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "index.sqlite3").write_bytes(b"not a database at all" * 100)
    index = WorkspaceIndex([root], cache_dir=cache)
    stats = index.scan()
    assert stats.files == 4 and index.lookup("Beta")
    index.stop()
    again = WorkspaceIndex([root], cache_dir=cache)  # the database was recreated
    assert again.scan().parsed == 0
    again.stop()


def test_background_scan_and_progress(tmp_path: Path) -> None:
    _make(tmp_path)
    seen: list[tuple[int, int]] = []
    index = WorkspaceIndex([tmp_path])
    thread = index.start_background_scan(lambda done, total: seen.append((done, total)))
    index.lookup("alpha")  # lookups work while scanning
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert index.progress == (4, 4)
    assert seen[0] == (0, 4) and seen[-1] == (4, 4)
    assert index.lookup("alpha")


def test_importers_follow_edits_and_concurrent_use(tmp_path: Path) -> None:
    import threading

    from lsp_assist.documents.document import Document, Position

    _make(tmp_path)
    for i in range(30):
        (tmp_path / f"extra{i}.py").write_text(
            f"from pkg.a import alpha\n\ndef e{i}():\n    pass\n"
        )
    index = WorkspaceIndex([tmp_path])
    index.scan()
    a = tmp_path / "pkg" / "a.py"
    b = tmp_path / "pkg" / "b.py"
    assert b in index.importers_of(a)
    doc = Document(b.as_uri(), b.read_text())
    index.open_buffer(b, doc.text)
    edit = doc.apply_change(Position(0, 0), Position(0, len("from .a import alpha")), "import os")
    index.edit_buffer(b, doc.text, edit)
    assert b not in index.importers_of(a)
    edit = doc.apply_change(Position(0, 0), Position(0, len("import os")), "from . import a")
    index.edit_buffer(b, doc.text, edit)
    assert b in index.importers_of(a)

    errors: list[BaseException] = []
    stop = threading.Event()

    def reader() -> None:
        try:
            while not stop.is_set():
                index.lookup("alpha")
                index.lookup_prefix("e")
                index.importers_of(a)
                tree = index.tree_of(b)
                assert tree is not None
                str(tree.root_node)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for i in range(40):
        index.scan()
        edit = doc.apply_change(Position(2, 0), Position(2, 0), f"X{i} = {i}\n")
        index.edit_buffer(b, doc.text, edit)
    stop.set()
    for thread in threads:
        thread.join(timeout=10)
    assert not errors
    assert len(index.lookup_prefix("X", limit=100)) == 40
