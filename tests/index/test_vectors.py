"""The vector index: chunks from the syntax index, incremental embedding, persistence, search.

The chunker and the bookkeeping run over the real ``WorkspaceIndex`` with a counting
bag-of-words embedding (``tests/support/vectors.py``; a unit test of the logic around the
model); the threshold and the model itself are tested with the packaged all-MiniLM-L6-v2
in tests/index/test_vector_model.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from lsp_assist.index.vectors import MAX_LINES, VectorIndex, chunk_file
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.vectors import FILES, BagOfWords
from tests.support.workspace import rewrite, scanned_index

FIXTURES = Path(__file__).parent / "fixtures"
LANGUAGES = ["python", "javascript", "typescript", "go", "rust", "java", "c", "cpp"]


@pytest.mark.parametrize("language", LANGUAGES)
def test_chunker_one_chunk_per_definition(language: str) -> None:
    index = WorkspaceIndex([FIXTURES / language])
    index.scan()
    seen = 0
    for path in index.files():
        text = index.text_of(path)
        entry = index.file(path)
        assert text is not None and entry is not None
        rel = index.relative(path)
        chunks = chunk_file(rel, entry.symbols, text)
        lines = text.split("\n")
        defs = [s for s in entry.symbols if s.kind in ("function", "method", "class", "struct")]
        starts = {span.start_line for span, _ in chunks}
        for sym in defs:
            assert sym.start_line in starts, (rel, sym.name)
        for span, embedded in chunks:
            head, body = embedded.split("\n", 1)
            assert head.startswith(f"{rel} ")
            assert span.label in head
            assert body.startswith(lines[span.start_line])
            assert span.end_line - span.start_line < MAX_LINES
        seen += len(chunks)
    assert seen >= 3, language


def test_chunk_labels_carry_the_enclosing_names() -> None:
    index = WorkspaceIndex([FIXTURES / "python"])
    index.scan()
    path = FIXTURES.resolve() / "python" / "pkg" / "core.py"
    entry = index.file(path)
    assert entry is not None
    chunks = chunk_file("pkg/core.py", entry.symbols, index.text_of(path) or "")
    by_label = {span.label: (span, text) for span, text in chunks}
    assert "Engine.start" in by_label
    engine_span, engine_text = by_label["Engine"]
    # the class chunk is its header (docstring, attributes) up to the first method,
    # with the member names in the embedded text only
    assert engine_span.end_line < by_label["Engine.start"][0].start_line
    assert '"""Runs things."""' in engine_text and "wheels = 4" in engine_text
    assert engine_text.endswith("members: wheels, start")


def test_long_definition_is_split(tmp_path: Path) -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(95))
    index = scanned_index(tmp_path, {"big.py": f"def big():\n{body}"})
    path = tmp_path.resolve() / "big.py"
    chunks = chunk_file("big.py", index.symbols_of(path), index.text_of(path) or "")
    assert [s.label for s, _ in chunks] == ["big", "big (part 2)", "big (part 3)"]
    assert [(s.start_line, s.end_line) for s, _ in chunks] == [(0, 39), (40, 79), (80, 95)]


def _vectors(index: WorkspaceIndex, model: BagOfWords, cache: Path | None = None) -> VectorIndex:
    vectors = VectorIndex(index, lambda: model, model_id="bag", cache_dir=cache)
    vectors.sync()
    return vectors


def test_incremental_embeds_only_changed_definitions(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = scanned_index(root, FILES)
    model = BagOfWords()
    vectors = _vectors(index, model)
    first = len(model.texts)
    assert first == vectors.stats.chunks == 5  # cart 2, mail 1, geo: the class and its method
    assert sorted(s.label for s in vectors.chunks_of(root.resolve() / "shop/geo.py")) == [
        "Point",
        "Point.distance",
    ]
    model.texts.clear()
    vectors.sync()
    assert model.texts == []  # nothing changed, nothing embedded

    cart = FILES["shop/cart.py"].replace("cart.items.clear()", "cart.items = []")
    rewrite(index, "shop/cart.py", cart)
    vectors.notify([root.resolve() / "shop/cart.py"])
    vectors.sync()
    assert len(model.texts) == 1 and "cart.items = []" in model.texts[0]
    assert vectors.stats.chunks == 5

    # a new function shifts the others down: they keep their vectors
    rewrite(index, "shop/cart.py", "import os\n\n\n" + cart)
    model.texts.clear()
    vectors.notify(None)
    vectors.sync()
    assert model.texts == []
    spans = vectors.chunks_of(root.resolve() / "shop/cart.py")
    assert sorted(s.start_line for s in spans) == [3, 7]

    (root / "shop/mail.py").unlink()
    index.scan()
    vectors.notify(None)
    vectors.sync()
    assert vectors.stats.chunks == 4
    assert vectors.chunks_of(root.resolve() / "shop/mail.py") == []


def test_vectors_survive_a_restart(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    cache = tmp_path / "cache"
    index = scanned_index(root, FILES)
    model = BagOfWords()
    first = _vectors(index, model, cache)
    query = BagOfWords().embed(["send the receipt by mail"])[0]
    before = first.search(query, limit=3, threshold=0.1)
    first.stop()

    model2 = BagOfWords()
    second = _vectors(index, model2, cache)
    assert model2.texts == []
    assert second.stats.reused == second.stats.chunks == 5
    after = second.search(query, limit=3, threshold=0.1)
    assert [(h.path, h.span.label) for h in after] == [(h.path, h.span.label) for h in before]
    assert after[0].span.label == "send_receipt"
    assert abs(after[0].score - before[0].score) < 1e-3  # float16 on disk
    second.stop()

    # changed while the server was down: only that definition is embedded again
    rewrite(index, "shop/mail.py", FILES["shop/mail.py"].replace("smtp_deliver", "post"))
    model3 = BagOfWords()
    third = _vectors(index, model3, cache)
    assert len(model3.texts) == 1 and "post(address, body)" in model3.texts[0]
    third.stop()


def test_search_threshold_skip_and_order(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = scanned_index(root, FILES)
    vectors = _vectors(index, BagOfWords())
    query = BagOfWords().embed(["total price of the cart items quantity"])[0]
    hits = vectors.search(query, limit=5, threshold=0.3)
    assert hits and hits[0].span.label == "cart_total"
    assert all(h.score >= 0.3 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert not any(h.span.label.startswith("Point") for h in hits)
    skipped = vectors.search(
        query, limit=5, threshold=0.3, skip=lambda p, s: s.label == "cart_total"
    )
    assert "cart_total" not in [h.span.label for h in skipped]
    assert vectors.search(query, limit=5, threshold=0.99) == []


def test_background_worker_follows_notifications(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index = scanned_index(root, FILES)
    model = BagOfWords()
    vectors = VectorIndex(index, lambda: model, model_id="bag", poll_s=60)
    vectors.start()
    assert vectors.ready.wait(10)
    assert vectors.stats.chunks == 5
    model.texts.clear()
    rewrite(index, "shop/geo.py", FILES["shop/geo.py"].replace("return 0", "return 1"))
    vectors.notify([root.resolve() / "shop/geo.py"])
    for _ in range(200):
        if model.texts:
            break
        time.sleep(0.02)
    assert len(model.texts) == 1 and "return 1" in model.texts[0]
    vectors.stop()
