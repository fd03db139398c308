"""A counting bag-of-words embedding and a small shop project, for the vector tests.

``BagOfWords`` stands in for the embedding model where a test is about the logic
around it (chunking, incremental embedding, persistence, the layer's lifetime); the model
itself is tested with the packaged all-MiniLM-L6-v2 (tests/index/test_vector_model.py).
``FILES`` is the three-file project those tests index (``scanned_index(root, FILES)``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np


class BagOfWords:
    """Each identifier hashed into one of 256 dimensions; counts every text it embeds."""

    dim = 256

    def __init__(self) -> None:
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return the normalised bag of hashed identifiers of each text."""
        self.texts.extend(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z]+", text.lower()):
                h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "little")
                out[row, h % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.maximum(norms, 1e-9)


FILES = {
    "shop/cart.py": (
        "def cart_total(items):\n"
        "    return sum(item.price * item.quantity for item in items)\n\n\n"
        "def cart_clear(cart):\n"
        "    cart.items.clear()\n"
    ),
    "shop/mail.py": (
        "def send_receipt(address, order):\n"
        "    body = render_receipt(order)\n"
        "    smtp_deliver(address, body)\n"
    ),
    "shop/geo.py": (
        "class Point:\n"
        "    '''A point on the map.'''\n\n"
        "    def distance(self, other):\n"
        "        return 0\n"
    ),
}
"""Three files of a shop: a cart, a mailer and a map point (one chunk per definition)."""
