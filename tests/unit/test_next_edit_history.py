"""Edit history: bursts coalesced, bounds in count and bytes, dropped on close, no secrets."""

from __future__ import annotations

from pathlib import Path

from lsp_assist.config import Settings
from lsp_assist.documents import EditHistory, Position
from lsp_assist.serving import Buffers


def test_deleting_a_name_and_typing_another_is_one_change() -> None:
    history = EditHistory("def area(w): pass\n")
    history.record(4, "area", "", now=0.0)
    for i, char in enumerate("surface"):
        history.record(4 + i, "", char, now=0.1 * (i + 1))
    (change,) = history.changes()
    assert (change.start, change.removed, change.inserted) == (4, "area", "surface")


def test_backspacing_past_the_burst_start_and_a_pause_split_bursts() -> None:
    history = EditHistory("abcdef")
    history.record(3, "", "X", now=0.0)  # abcXdef
    history.record(2, "cX", "", now=0.5)  # abdef: back over the burst and one more
    assert [(c.start, c.removed, c.inserted) for c in history] == [(2, "c", "")]
    history.record(2, "", "Y", now=10.0)  # long pause: a new burst
    assert len(history) == 2


def test_an_undone_burst_leaves_nothing() -> None:
    history = EditHistory("abc")
    history.record(1, "", "z", now=0.0)
    history.record(1, "z", "", now=0.1)
    assert len(history) == 0


def test_bounded_in_count_and_bytes() -> None:
    history = EditHistory("", max_edits=3, max_bytes=100)
    for i in range(10):
        history.record(i * 100, "", "x", now=float(i * 10))
    assert len(history) == 3
    history.record(0, "", "y" * 60, now=1000.0)
    history.record(5000, "", "z" * 60, now=2000.0)
    assert history.size <= 100 and history.last() is not None
    assert history.last().inserted == "z" * 60  # type: ignore[union-attr]


def test_buffers_keep_a_history_per_open_document_and_drop_it_on_close(tmp_path: Path) -> None:
    buffers = Buffers(Settings, None)
    uri = (tmp_path / "a.py").as_uri()
    buffers.open(uri, "x = 1\n", version=1)
    buffers.change(uri, 2, [(Position(0, 0), Position(0, 1), "y")])
    history = buffers.history.get(uri)
    assert history is not None and history.opened_text == "x = 1\n"
    assert [(c.start, c.removed, c.inserted) for c in history] == [(0, "x", "y")]
    buffers.change(uri, 3, [(None, None, "y = 12\n")])  # a whole-text change, made minimal
    assert history.last() is not None and history.last().inserted in ("12", "2")  # type: ignore[union-attr]
    buffers.close(uri)
    assert buffers.history.get(uri) is None


def test_secret_files_get_no_history(tmp_path: Path) -> None:
    buffers = Buffers(Settings, None)
    uri = (tmp_path / ".env").as_uri()
    buffers.open(uri, "TOKEN=abc\n", version=1)
    buffers.change(uri, 2, [(Position(0, 6), Position(0, 9), "xyz")])
    assert buffers.history.get(uri) is None
