"""Closing a buffer returns the index to the disk's state without losing the import graph."""

from __future__ import annotations

from pathlib import Path

from lsp_assist.index.workspace import WorkspaceIndex


def test_close_buffer_restores_disk_imports_incrementally(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("def helper():\n    return 1\n")
    (tmp_path / "b.py").write_text("import a\n\nx = a.helper()\n")
    (tmp_path / "c.py").write_text("y = 2\n")
    index = WorkspaceIndex([tmp_path])
    index.scan()
    a, b, c = (tmp_path / n for n in ("a.py", "b.py", "c.py"))
    assert index.importers_of(a) == [b]
    # The buffer drops the import and c starts importing a, unsaved.
    index.open_buffer(b, "x = 1\n")
    index.open_buffer(c, "import a\ny = 2\n")
    assert index.importers_of(a) == [c]
    graph = index._graph.importers
    index.close_buffer(b)
    index.close_buffer(c)
    assert index.importers_of(a) == [b]
    assert index._graph.importers is graph, "closing a buffer rebuilt the whole import graph"
    assert [s.name for s in index.symbols_of(b)] == ["x"]
