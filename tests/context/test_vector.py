"""Vector retrieval in the prompt: the query, the deadline, the hybrid merge, the layer.

The vector index is the real one over a real ``WorkspaceIndex``; its model is the
bag-of-words embedding of tests/index/test_vectors.py (slowed down where the deadline
is tested). The packaged model itself is tested in tests/index/test_vector_model.py.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lsp_assist.context.similar import Chunk, SimilarHit
from lsp_assist.context.vector_layer import VectorLayer, merge, query_text
from lsp_assist.index.vectors import VectorIndex
from tests.support.vectors import FILES, BagOfWords
from tests.support.workspace import scanned_index


class SlowBag(BagOfWords):
    """The bag of words, ``delay`` seconds per call once the index is built."""

    delay = 0.0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Sleep, then embed."""
        time.sleep(self.delay)
        return super().embed(texts)


def _layer(tmp_path: Path, model: BagOfWords) -> tuple[VectorLayer, Path]:
    root = tmp_path / "ws"
    index = scanned_index(root, FILES)
    vectors = VectorIndex(index, lambda: model, model_id="bag")
    vectors.sync()
    layer = VectorLayer(vectors, text_of=index.text_of, relative=index.relative)
    return layer, root.resolve()


def test_query_is_the_nearest_lines_and_the_typed_part() -> None:
    lines = ["import os", "", "def f(cart):", "    a = 1", "", "    b = 2", "    tot", "x = 3"]
    assert query_text(lines, 6, 7, n_lines=2) == "    a = 1\n    b = 2\n    tot"
    assert query_text(lines, 6, 0, n_lines=8) == "import os\ndef f(cart):\n    a = 1\n    b = 2"
    assert query_text(lines, 0, 0) == ""


def test_merge_fuses_by_rank_and_joins_overlaps() -> None:
    a, b = Path("/w/a.py"), Path("/w/b.py")

    def hit(path: Path, start: int, end: int, score: float, reason: str) -> SimilarHit:
        return SimilarHit(Chunk(path, start, end, "x\n", frozenset()), path.name, score, reason)

    lexical = [hit(a, 0, 11, 0.5, "jaccard a"), hit(b, 30, 41, 0.3, "jaccard b")]
    vector = [hit(b, 35, 50, 0.8, "vector b"), hit(a, 100, 110, 0.6, "vector a2")]
    fused = merge(lexical, vector)
    # b's window and b's definition overlap: one item ranked first (both lists name it)
    assert [(h.chunk.path, h.chunk.start_line) for h in fused] == [(b, 30), (a, 0), (a, 100)]
    assert fused[0].reason == "hybrid: jaccard b 0.30 + vector b"
    assert fused[1].reason == "jaccard a 0.50" and fused[2].reason == "vector a2"
    assert fused[0].score > fused[1].score > fused[2].score
    assert merge([], []) == []
    assert [h.reason for h in merge([], vector)] == ["vector b", "vector a2"]


def test_search_never_waits_past_its_deadline(tmp_path: Path) -> None:
    model = SlowBag()
    layer, root = _layer(tmp_path, model)
    model.delay = 0.5
    cursor_file = root / "shop" / "geo.py"
    query = "    total = price * quantity of the cart items"
    layer.prefetch(cursor_file, query)
    started = time.perf_counter()
    hits = layer.search(cursor_file, threshold=0.2, wait_ms=30, exclude=lambda p, a, b: False)
    waited = time.perf_counter() - started
    assert hits == [] and waited < 0.25
    assert layer.misses == 1
    # once embedded, the same query is answered at once, without waiting
    deadline = time.monotonic() + 5
    while query not in layer._done and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.perf_counter()
    hits = layer.search(cursor_file, threshold=0.2, wait_ms=0, exclude=lambda p, a, b: False)
    assert time.perf_counter() - started < 0.1
    assert [h.chunk.start_line for h in hits][:1] == [0]
    assert hits[0].source == "shop/cart.py" and "cart_total" in hits[0].reason
    assert hits[0].chunk.text.startswith("def cart_total(items):")
    layer.stop()


def test_search_skips_the_current_file_and_excluded_spans(tmp_path: Path) -> None:
    layer, root = _layer(tmp_path, BagOfWords())
    cart = root / "shop" / "cart.py"
    query = "total price quantity cart items clear"
    layer.prefetch(cart, query)
    assert layer.search(cart, threshold=0.1, wait_ms=2000, exclude=lambda p, a, b: False) == []
    other = root / "shop" / "geo.py"
    layer.prefetch(other, query)
    found = layer.search(other, threshold=0.1, wait_ms=2000, exclude=lambda p, a, b: False)
    assert {h.chunk.start_line for h in found if h.chunk.path == cart} == {0, 4}
    kept = layer.search(other, threshold=0.1, wait_ms=2000, exclude=lambda p, a, b: a == 0)
    assert 0 not in {h.chunk.start_line for h in kept if h.chunk.path == cart}
    layer.stop()


MAIN = (
    "from shop.cart import cart_total\n\n\n"
    "def checkout(order):\n"
    "    address = order.customer.email\n"
    "    receipt = render the receipt of the order and mail it to the address\n"
    "    \n"
)


def test_the_layer_in_a_build_with_the_switch(tmp_path: Path) -> None:
    from lsp_assist.config import ContextSettings
    from lsp_assist.context.engine import ContextEngine
    from lsp_assist.context.model import Cursor
    from lsp_assist.context.tokens import ApproxTokenizer

    from .fakes import GEMMA_LIKE

    root = tmp_path / "ws"
    index = scanned_index(root, {**FILES, "shop/checkout.py": MAIN})
    vectors = VectorIndex(index, BagOfWords, model_id="bag")
    vectors.sync()
    main = root.resolve() / "shop" / "checkout.py"
    cursor = Cursor(path=main, language="python", text=MAIN, line=6, column=4)
    engine = ContextEngine(
        index, ApproxTokenizer(GEMMA_LIKE.special_tokens), GEMMA_LIKE, relative=index.relative
    )
    engine.vectors = VectorLayer(vectors, text_of=index.text_of, relative=index.relative)
    off = engine.build(cursor)
    assert "smtp_deliver" not in off.prompt  # mail.py: neither imported nor open

    on = ContextSettings(layer_vector=True, vector_threshold=0.2, vector_wait_ms=5000)
    engine.update_settings(on)
    prompt = engine.build(cursor)
    similar = next(layer for layer in prompt.layers if layer.name == "similar")
    reasons = {item.source: item.reason for item in similar.items}
    assert "smtp_deliver(address, body)" in prompt.prompt
    assert reasons["shop/mail.py"].startswith("vector cosine")
    assert "send_receipt" in reasons["shop/mail.py"]
    # cart_total is the related layer's (imported): not again as a match; cart_clear may be
    related = next(layer for layer in prompt.layers if layer.name == "related")
    assert any("cart_total" in item.symbol for item in related.items)
    assert not any("cart_total" in item.reason for item in similar.items)
    assert prompt.total_tokens <= prompt.budget
    assert "vector cosine" in prompt.explain()
    engine.vectors.stop()
