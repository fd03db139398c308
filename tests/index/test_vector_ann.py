"""The vector index's approximate (hnswlib HNSW) path against brute force.

A small threshold (``ann_min_chunks``) forces the approximate index over a workspace of
400 chunks; the embedding is a fake (a random unit vector seeded by each text's hash),
so the two paths are compared on random vectors. The packaged model is tested on the
brute-force path in tests/index/test_vector_model.py.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from lsp_assist.index.vectors import VectorHit, VectorIndex
from lsp_assist.index.vectors import index as vectors_module
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.workspace import rewrite, scanned_index

FILES_N = 40
DEFS_PER_FILE = 10
DIM = 64


class HashedRandom:
    """Each text's vector: a unit vector drawn from a generator seeded by its hash."""

    dim = DIM

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return one seeded random unit vector per text."""
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            v = np.random.default_rng(seed).standard_normal(self.dim)
            out[row] = v / np.linalg.norm(v)
        return out


def _source(i: int) -> str:
    return "".join(
        f"def f_{i}_{j}(x):\n    return x * {i} + {j}\n\n\n" for j in range(DEFS_PER_FILE)
    )


FILES = {f"pkg/m{i}.py": _source(i) for i in range(FILES_N)}


def _pair(root: Path) -> tuple[WorkspaceIndex, VectorIndex, VectorIndex]:
    """The workspace, an index that stays brute force, one that goes approximate."""
    index = scanned_index(root, FILES)
    brute = VectorIndex(index, HashedRandom, model_id="r", ann_min_chunks=10**9)
    ann = VectorIndex(index, HashedRandom, model_id="r", ann_min_chunks=100)
    brute.sync()
    ann.sync()
    return index, brute, ann


def _ids(hits: list[VectorHit]) -> list[tuple[Path, str]]:
    return [(h.path, h.span.label) for h in hits]


def test_ann_matches_brute_force(tmp_path: Path) -> None:
    index, brute, ann = _pair(tmp_path / "ws")
    chunks = FILES_N * DEFS_PER_FILE
    assert brute.stats.chunks == ann.stats.chunks == chunks
    assert brute.stats.ann_chunks == 0
    assert ann.stats.ann_chunks == chunks and ann.stats.ann_builds == 1
    rng = np.random.default_rng(3)
    found = 0
    for _ in range(50):
        q = rng.standard_normal(DIM).astype(np.float32)
        q /= np.linalg.norm(q)
        exact = brute.search(q, limit=5, threshold=-1.0)
        approx = ann.search(q, limit=5, threshold=-1.0)
        assert len(exact) == len(approx) == 5
        found += len(set(_ids(exact)) & set(_ids(approx)))
        # scores are exact (from the matrix), best first
        scores = [h.score for h in approx]
        assert scores == sorted(scores, reverse=True)
        for h in approx:
            assert h.score == pytest.approx(float(q @ HashedRandom().embed([_text(index, h)])[0]))
    assert found / (50 * 5) >= 0.95

    # the layer's call: a threshold and a skipped file
    q = HashedRandom().embed([_text(index, brute.search(q, limit=1, threshold=-1.0)[0])])[0]
    target = brute.search(q, limit=1, threshold=-1.0)[0]
    assert ann.search(q, limit=1, threshold=0.99)[0].span.label == target.span.label
    skipped = ann.search(q, limit=3, threshold=-1.0, skip=lambda p, s: p == target.path)
    exact = brute.search(q, limit=3, threshold=-1.0, skip=lambda p, s: p == target.path)
    assert _ids(skipped) == _ids(exact)
    assert all(h.path != target.path for h in skipped)
    assert ann.search(q, limit=5, threshold=1.01) == []


def _text(index: WorkspaceIndex, hit: VectorHit) -> str:
    """The embedded text of a hit's chunk (as the chunker builds it)."""
    from lsp_assist.index.vectors import chunk_file

    entry = index.file(hit.path)
    assert entry is not None
    chunks = chunk_file(index.relative(hit.path), entry.symbols, index.text_of(hit.path) or "")
    return next(t for s, t in chunks if s == hit.span)


def test_changed_definition_is_removed_by_key(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    index, brute, ann = _pair(root)
    path = root.resolve() / "pkg/m7.py"
    old = next(s for s in ann.chunks_of(path) if s.label == "f_7_3")
    old_hit = VectorHit(path, old, 1.0)
    old_q = HashedRandom().embed([_text(index, old_hit)])[0]
    assert ann.search(old_q, limit=1, threshold=0.99)[0].span == old

    new_source = FILES["pkg/m7.py"].replace("return x * 7 + 3", "return x - 73")
    rewrite(index, "pkg/m7.py", new_source)
    for vectors in (brute, ann):
        vectors.notify([path])
        vectors.sync()
    assert ann.stats.ann_builds == 1  # kept current by key, not rebuilt
    assert ann.stats.ann_chunks == ann.stats.chunks == FILES_N * DEFS_PER_FILE
    assert ann.search(old_q, limit=1, threshold=0.99) == []
    assert all(h.span != old for h in ann.search(old_q, limit=20, threshold=-1.0))
    new = next(s for s in ann.chunks_of(path) if s.label == "f_7_3")
    new_q = HashedRandom().embed([_text(index, VectorHit(path, new, 1.0))])[0]
    top = ann.search(new_q, limit=1, threshold=0.99)
    assert [h.span for h in top] == [new] and "x - 73" in _text(index, top[0])

    # a deleted file's chunks leave the approximate index too
    (root / "pkg/m8.py").unlink()
    index.scan()
    ann.notify(None)
    ann.sync()
    assert ann.stats.ann_chunks == ann.stats.chunks == (FILES_N - 1) * DEFS_PER_FILE
    gone = root.resolve() / "pkg/m8.py"
    q = np.random.default_rng(5).standard_normal(DIM).astype(np.float32)
    assert all(h.path != gone for h in ann.search(q, limit=50, threshold=-1.0))


def test_search_falls_back_to_brute_force_while_building(tmp_path: Path) -> None:
    index = scanned_index(tmp_path / "ws", FILES)
    held, release = threading.Event(), threading.Event()

    def request() -> None:
        with index.foreground():
            held.set()
            release.wait(10)

    ann = VectorIndex(index, HashedRandom, model_id="r", ann_min_chunks=100)
    brute = VectorIndex(index, HashedRandom, model_id="r", ann_min_chunks=10**9)
    ann.sync()
    brute.sync()
    assert ann.stats.ann_chunks == 400
    holder = threading.Thread(target=request)  # a request is being served: the build
    holder.start()  # waits between batches
    assert held.wait(5)
    builder = threading.Thread(target=ann.build_ann)
    builder.start()
    try:
        for _ in range(200):
            if ann.stats.ann_chunks == 0:
                break
            time.sleep(0.005)
        assert ann.stats.ann_chunks == 0  # the old index is gone, the new one not installed
        q = np.random.default_rng(11).standard_normal(DIM).astype(np.float32)
        assert _ids(ann.search(q, limit=5, threshold=-1.0)) == _ids(
            brute.search(q, limit=5, threshold=-1.0)
        )
        assert builder.is_alive()
    finally:
        release.set()
        holder.join(10)
        builder.join(10)
    assert ann.stats.ann_chunks == 400 and ann.stats.ann_builds == 2


def test_threshold_builds_and_drops(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    monkeypatch.setattr(vectors_module, "ANN_MIN_CHUNKS", 390)
    index = scanned_index(root, FILES)
    vectors = VectorIndex(index, HashedRandom, model_id="r")
    assert vectors.ann_min_chunks == 390
    vectors.sync()
    assert vectors.stats.ann_chunks == 400
    for i in range(9):  # 310 chunks: under 0.8 x 390
        (root / f"pkg/m{i}.py").unlink()
    index.scan()
    vectors.notify(None)
    vectors.sync()
    assert vectors.stats.chunks == 310 and vectors.stats.ann_chunks == 0
    q = np.random.default_rng(2).standard_normal(DIM).astype(np.float32)
    assert len(vectors.search(q, limit=5, threshold=-1.0)) == 5
