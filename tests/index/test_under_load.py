"""The index under load: lookups never rebuild the graph during a scan, the scan yields
to foreground requests, memory stays compact (issue 11)."""

from __future__ import annotations

import threading
import time
import tracemalloc
from pathlib import Path

import pytest

from benchmarks.gen_tree import file_text, module_path
from lsp_assist.index import gate as gate_module
from lsp_assist.index import graph as graph_module
from lsp_assist.index import workspace as workspace_module
from lsp_assist.index.model import Import
from lsp_assist.index.packed import SMALL_GROUP, FileSets
from lsp_assist.index.workspace import WorkspaceIndex


def _tree(root: Path, files: int) -> Path:
    """Write ``files`` generated modules (each imports three others of the tree)."""
    for i in range(files):
        target = root / Path(*module_path(i).split(".")).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        for parent in (target.parent, target.parent.parent):
            (parent / "__init__.py").touch()
        target.write_text(file_text(i, files))
    return root


def _imported(root: Path, files: int) -> tuple[Path, Path]:
    """Return (a module, a module importing it) of the generated tree."""
    for i in range(files):
        text = file_text(i, files)
        for line in text.splitlines():
            if line.startswith("from pkg"):
                module = line.split()[1]
                return root / Path(*module.split(".")).with_suffix(".py"), root / Path(
                    *module_path(i).split(".")
                ).with_suffix(".py")
    raise AssertionError("no import in the tree")


def test_lookups_during_a_scan_do_not_rebuild_the_import_graph(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = 150
    root = _tree(tmp_path / "ws", files)
    target, importer = _imported(root, files)
    built: list[int] = []

    class CountingResolver(graph_module.Resolver):  # type: ignore[misc, name-defined]
        def __init__(self, *args: object, **kwargs: object) -> None:
            built.append(1)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(graph_module, "Resolver", CountingResolver)
    index = WorkspaceIndex([root])
    calls: list[int] = []

    def progress(done: int, total: int) -> None:
        # the completion path during the scan: import resolution and the reverse graph
        index.resolve_import(importer, Import(module="os"))
        index.importers_of(target)
        calls.append(done)

    thread = index.start_background_scan(progress)
    thread.join(timeout=120)
    assert not thread.is_alive()
    assert len(calls) > 50
    assert len(built) == 1, f"{len(built)} resolvers built for {len(calls)} lookups"
    assert index.wait_graph(timeout=60)
    assert index._graph.builds == 1  # once, after the scan, on its own thread
    assert importer in index.importers_of(target)
    index.stop()


def test_scan_waits_while_a_foreground_request_is_served(tmp_path: Path) -> None:
    root = _tree(tmp_path / "ws", 30)
    index = WorkspaceIndex([root])
    with index.foreground():
        thread = index.start_background_scan()
        time.sleep(0.4)
        assert thread.is_alive()
        assert index.files() == [], "the scan indexed files while a request was served"
        # a didClose does not wait for the paused scan either
        path = root / Path(*module_path(0).split(".")).with_suffix(".py")
        index.open_buffer(path, "x = 1\n")
        closer = threading.Thread(target=index.close_buffer, args=(path,))
        closer.start()
        closer.join(timeout=5)
        assert not closer.is_alive(), "close_buffer waited for the scan"
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert len([p for p in index.files() if p.name.startswith("mod")]) == 30
    assert index.paused_s >= 0.3
    index.stop()


def test_scan_makes_progress_under_endless_foreground(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate_module, "MAX_YIELD_S", 0.01)
    root = _tree(tmp_path / "ws", 10)
    index = WorkspaceIndex([root])
    with index.foreground():
        thread = index.start_background_scan()
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert len([p for p in index.files() if p.name.startswith("mod")]) == 10
    index.stop()


def test_scan_saves_the_cache_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workspace_module, "SAVE_BATCH", 10)
    root = _tree(tmp_path / "ws", 40)
    index = WorkspaceIndex([root], cache_dir=tmp_path / "cache")
    assert index._store is not None
    sizes: list[int] = []
    original = index._store.save

    def save(rows: list[object], deleted: list[str]) -> None:
        sizes.append(len(rows))
        original(rows, deleted)  # type: ignore[arg-type]

    monkeypatch.setattr(index._store, "save", save)
    stats = index.scan()
    assert stats.parsed == stats.files > 40
    assert max(sizes) <= 10 and sum(sizes) == stats.parsed
    index.stop()
    again = WorkspaceIndex([root], cache_dir=tmp_path / "cache")
    assert again.scan().parsed == 0
    again.stop()


def test_index_memory_is_compact(tmp_path: Path) -> None:
    files = 300
    root = _tree(tmp_path / "ws", files)
    # Counted: what this test's own call stack allocated and still holds (the scan runs on
    # this thread). Threads left by earlier tests in the process (a vector worker, a
    # watcher) allocate meanwhile too and made the process-wide figure flaky.
    tracemalloc.start(64)
    try:
        before = tracemalloc.take_snapshot()
        index = WorkspaceIndex([root])
        stats = index.scan()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    mine = [tracemalloc.Filter(True, __file__, all_frames=True)]
    held = sum(
        stat.size_diff
        for stat in after.filter_traces(mine).compare_to(before.filter_traces(mine), "filename")
    )
    assert stats.files > files and stats.symbols > 12 * files
    # ~16 symbols a file; as objects they took ~8 KB a file, and the scan kept the trees
    # of the last files it parsed (~120 KB each) in the text/tree cache.
    assert held / stats.files < 4096, f"{held / stats.files:.0f} bytes a file"
    assert len(index._cache) == 0
    # what the packed form answers is what was extracted
    path = root / Path(*module_path(7).split(".")).with_suffix(".py")
    entry = index.file(path)
    assert entry is not None and entry.symbols
    first = entry.symbols[0]
    assert first in index.lookup(first.name)
    assert index.file(path) is entry  # unpacked once, then reused
    index.stop()


def test_file_sets_change_representation_both_ways(tmp_path: Path) -> None:
    sets: FileSets[str] = FileSets()
    paths = [tmp_path / f"f{i}.py" for i in range(SMALL_GROUP + 3)]
    assert sets.add("name", paths[0]) is True
    for path in paths[1:]:
        assert sets.add("name", path) is False
        sets.add("name", path)  # twice: no duplicate
    assert sorted(sets.files("name")) == sorted(paths)
    for path in paths[:-1]:
        assert sets.discard("name", path) is False
    assert sets.files("name") == (paths[-1],)
    assert sets.discard("name", paths[-1]) is True
    assert "name" not in sets and sets.files("name") == ()


def test_work_on_the_foreground_thread_never_waits_for_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate_module, "MAX_YIELD_S", 30.0)
    root = _tree(tmp_path / "ws", 20)
    target, importer = _imported(root, 20)
    index = WorkspaceIndex([root])
    started = time.monotonic()
    with index.foreground():  # the CLI: scan and graph on the request's own thread
        index.scan()
        assert importer in index.importers_of(target)
    assert time.monotonic() - started < 20
    index.stop()


def test_a_completion_holds_the_foreground_gate(tmp_path: Path) -> None:
    from lsp_assist.backends.base import GenerationRequest, GenerationResult
    from lsp_assist.serving.model import CompletionQuery
    from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, MarkerBackend, make_engine, snapshot

    held: list[int] = []

    class Probe(MarkerBackend):
        def generate(self, request: GenerationRequest) -> GenerationResult:
            assert engine.session.index is not None
            held.append(engine.session.index._gate.holders)
            return super().generate(request)

    engine, uri = make_engine(tmp_path, Probe())
    assert engine.session.index is not None
    held.clear()
    outcome = engine.complete(
        CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN)
    )
    assert outcome.text and not outcome.error
    assert held == [1], "the model ran without holding the index's foreground gate"
    assert engine.session.index._gate.holders == 0
    engine.session.close()
