"""How soon a change reaches the vector index (issue 15): disk writes and buffer edits.

A watched ``WorkspaceIndex`` of tests/index/test_vectors.py's files and a started
``VectorIndex`` (events, no poll); each round changes one definition, on disk (the
watcher's debounce, then the vector index's) or through an open buffer's edit, and
times until that definition's new text is embedded. Run with the counting bag of words
and with the packaged all-MiniLM-L6-v2; also reported: how many texts were embedded in
all (one per change when only the changed definition is).

Run: .venv/bin/python benchmarks/bench_vector_events.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.append(str(ROOT))

import numpy as np  # noqa: E402

from lsp_assist.backends.embedding import Embedder, minilm_gguf_path  # noqa: E402
from lsp_assist.documents.document import Document, Position  # noqa: E402
from lsp_assist.index.vectors import Embedding, VectorIndex  # noqa: E402
from tests.support.vectors import FILES, BagOfWords  # noqa: E402
from tests.support.workspace import scanned_index  # noqa: E402


class Counting:
    """An embedding that keeps every text it embeds."""

    def __init__(self, model: Embedding) -> None:
        self.model = model
        self.dim = model.dim
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Note the texts, then embed them."""
        self.texts.extend(texts)
        return self.model.embed(texts)


def _until(model: Counting, needle: str, started: float) -> float:
    while not any(needle in t for t in model.texts):
        if time.monotonic() - started > 30:
            raise RuntimeError(f"{needle!r} was not embedded within 30 s")
        time.sleep(0.005)
    return time.monotonic() - started


def main() -> int:
    """Time each change until it is embedded; print per model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f}")
    for name in ("bag of words", "all-MiniLM-L6-v2"):
        root = Path(tempfile.mkdtemp(prefix="vector-events-")) / "ws"
        index = scanned_index(root, FILES, watch=True)
        index.start_watching()
        model = Counting(BagOfWords() if name == "bag of words" else Embedder(minilm_gguf_path()))
        vectors = VectorIndex(index, lambda model=model: model, model_id=name)
        vectors.start()
        vectors.ready.wait(60)
        model.texts.clear()
        disk, edits = [], []
        for i in range(args.rounds):
            started = time.monotonic()
            text = FILES["shop/cart.py"].replace("cart.items.clear()", f"cart.items = [{i}]")
            (root / "shop" / "cart.py").write_text(text)
            disk.append(_until(model, f"cart.items = [{i}]", started))
        geo = root.resolve() / "shop" / "geo.py"
        doc = Document(geo.as_uri(), FILES["shop/geo.py"])
        index.open_buffer(geo, doc.text)
        for i in range(args.rounds):
            edit = doc.apply_change(Position(4, 15), Position(4, 16), str(i + 1))
            started = time.monotonic()
            index.edit_buffer(geo, doc.text, edit)
            edits.append(_until(model, f"return {i + 1}", started))
        print(
            f"{name}: disk write -> embedded {[round(x, 2) for x in disk]} s; buffer edit -> "
            f"embedded {[round(x, 2) for x in edits]} s; {len(model.texts)} texts embedded "
            f"for {2 * args.rounds} changes"
        )
        vectors.stop()
        index.stop()
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
