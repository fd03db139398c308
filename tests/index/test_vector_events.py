"""The vector index follows the workspace index's change events, not a poll.

The real ``WorkspaceIndex`` (its watcher on a temporary folder, its open buffers) tells
the vector index which files changed (``on_change``); the worker embeds only their
changed definitions, debounced, and waits while a request holds the foreground gate.
The embedding is the counting bag of words of tests/index/test_vectors.py; the same path
with the packaged model is tested in tests/index/test_vector_model.py.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from lsp_assist.documents.document import Document, Position
from lsp_assist.index.vectors import VectorIndex
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.vectors import FILES, BagOfWords
from tests.support.workspace import scanned_index

SOON_S = 2.5
"""A change is embedded within this (watcher 0.1-0.5 s, quiet 0.5 s, slack for a busy CI)."""


def _within(condition: Callable[[], bool], limit: float = 8.0) -> float | None:
    """Seconds until ``condition()`` held, None if it did not within ``limit``."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        if condition():
            return time.monotonic() - started
        time.sleep(0.01)
    return None


def _embedded(model: BagOfWords, needle: str) -> Callable[[], bool]:
    return lambda: any(needle in t for t in model.texts)


def _open(index: WorkspaceIndex, rel: str) -> tuple[Path, Document]:
    """Open FILES[rel] as an editor buffer (the same text as on disk: nothing to embed)."""
    path = index.roots[0] / rel
    doc = Document(path.as_uri(), FILES[rel])
    index.open_buffer(path, doc.text)
    return path, doc


@pytest.fixture
def workspace(tmp_path: Path) -> Iterator[tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path]]:
    """A watched index of FILES and its started vector index (no poll), first pass done."""
    root = tmp_path / "ws"
    index = scanned_index(root, FILES, watch=True)
    assert index.start_watching()
    model = BagOfWords()
    vectors = VectorIndex(index, lambda: model, model_id="bag")
    vectors.start()
    assert vectors.ready.wait(10)
    assert vectors.stats.chunks == 5 and len(model.texts) == 5
    model.texts.clear()
    yield index, vectors, model, root.resolve()
    vectors.stop()
    index.stop()


def test_an_index_that_reports_changes_is_never_polled(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    _, vectors, model, _ = workspace
    assert vectors.poll_s is None
    syncs = vectors.stats.syncs
    time.sleep(0.8)  # nothing changed: the worker sleeps
    assert vectors.stats.syncs == syncs and model.texts == []


def test_a_file_changed_on_disk_is_re_embedded_soon(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    _, vectors, model, root = workspace
    cart = root / "shop" / "cart.py"
    cart.write_text(FILES["shop/cart.py"].replace("cart.items.clear()", "cart.items = []"))
    took = _within(_embedded(model, "cart.items = []"))
    assert took is not None and took < SOON_S, took
    # only the changed definition: cart_total and the other files keep their vectors
    assert len(model.texts) == 1 and model.texts[0].startswith("shop/cart.py cart_clear\n")
    assert vectors.stats.chunks == 5
    query = BagOfWords().embed(["cart items = []"])[0]
    best = vectors.search(query, limit=1, threshold=0.1)
    assert best and best[0].span.label == "cart_clear"


def test_a_file_deleted_on_disk_leaves_the_matrix(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    _, vectors, model, root = workspace
    (root / "shop" / "mail.py").unlink()
    took = _within(lambda: vectors.stats.chunks == 4)
    assert took is not None and took < SOON_S, took
    assert vectors.chunks_of(root / "shop" / "mail.py") == []
    query = BagOfWords().embed(["send receipt address order smtp deliver"])[0]
    assert all(h.path.name != "mail.py" for h in vectors.search(query, limit=5, threshold=0.0))
    assert model.texts == []


def test_an_open_buffers_edit_is_re_embedded_soon(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    index, vectors, model, _ = workspace
    geo, doc = _open(index, "shop/geo.py")
    edit = doc.apply_change(Position(4, 15), Position(4, 16), "self.x - other.x")
    started = time.monotonic()
    index.edit_buffer(geo, doc.text, edit)
    took = _within(_embedded(model, "return self.x - other.x"))
    assert took is not None and time.monotonic() - started < SOON_S, took
    assert len(model.texts) == 1 and model.texts[0].startswith("shop/geo.py Point.distance\n")
    assert _within(lambda: len(vectors.chunks_of(geo)) == 2) is not None
    # closing the buffer brings the disk's text back: its old vector is embedded again
    model.texts.clear()
    index.close_buffer(geo)
    took = _within(_embedded(model, "return 0"))
    assert took is not None and took < SOON_S, took
    assert len(model.texts) == 1


def test_edits_in_quick_succession_are_embedded_once(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    index, vectors, model, _ = workspace
    cart, doc = _open(index, "shop/cart.py")
    syncs = vectors.stats.syncs
    typed = "  # total"
    end = len("def cart_total(items):")
    for i, char in enumerate(typed):  # typing a comment after cart_total's header, 0.1 s a key
        edit = doc.apply_change(Position(0, end + i), Position(0, end + i), char)
        index.edit_buffer(cart, doc.text, edit)
        time.sleep(0.1)
    assert _within(lambda: vectors.stats.syncs > syncs) is not None
    took = _within(_embedded(model, typed))
    assert took is not None
    time.sleep(0.3)
    # the debounce waited for the pause: one pass, one embedding of the final text
    assert vectors.stats.syncs - syncs <= 2
    assert sum(typed in t for t in model.texts) == len(model.texts) <= 2


def test_the_worker_waits_while_a_request_holds_the_gate(
    workspace: tuple[WorkspaceIndex, VectorIndex, BagOfWords, Path],
) -> None:
    index, _, _, _ = workspace
    held, release = threading.Event(), threading.Event()

    def request() -> None:
        with index.foreground():
            held.set()
            release.wait(10)

    # the vector index yields to the same gate as the scan does (its own model: the
    # fixture's worker, which waits too, counts into another)
    own = BagOfWords()
    gated = VectorIndex(index, lambda: own, model_id="bag")
    gated.sync()
    own.texts.clear()
    thread = threading.Thread(target=request)
    thread.start()
    assert held.wait(5)
    geo, doc = _open(index, "shop/geo.py")
    edit = doc.apply_change(Position(4, 15), Position(4, 16), "1")
    index.edit_buffer(geo, doc.text, edit)
    waiter = threading.Thread(target=gated.sync)
    waiter.start()
    time.sleep(0.5)
    assert own.texts == []  # the request goes first
    release.set()
    thread.join()
    waiter.join(5)
    assert len(own.texts) == 1 and "return 1" in own.texts[0]
    gated.stop()


def test_a_source_without_events_is_polled(tmp_path: Path) -> None:
    class Silent:
        """The index's lookups, but ``on_change`` cannot report changes (None)."""

        def __init__(self, index: WorkspaceIndex) -> None:
            self.files = index.files
            self.holds = index.holds
            self.file = index.file
            self.text_of = index.text_of
            self.relative = index.relative
            self.is_denied = index.is_denied
            self.yield_to_foreground = index.yield_to_foreground

        def on_change(self, listener: Callable[[Path], None]) -> None:
            """Report nothing: the vector index polls."""
            return None

    index = scanned_index(tmp_path / "ws", FILES)
    vectors = VectorIndex(Silent(index), BagOfWords, model_id="bag")
    assert vectors.poll_s == 30.0
    fast = VectorIndex(Silent(index), BagOfWords, model_id="bag", poll_s=0.2)
    fast.start()
    assert fast.ready.wait(10)
    assert _within(lambda: fast.stats.syncs >= 3, 5) is not None
    fast.stop()


def test_holds_agrees_with_the_file_list(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = scanned_index(root, FILES)
    listed = index.files()
    assert listed and all(index.holds(p) for p in listed)
    outside = tmp_path / "elsewhere.py"  # an open buffer outside the roots: not listed
    index.open_buffer(outside, "def elsewhere():\n    return 1\n")
    assert index.file(outside) is not None
    assert outside not in index.files() and not index.holds(outside)
    assert not index.holds(root / "shop" / "missing.py")
