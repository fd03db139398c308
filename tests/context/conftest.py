"""Fixtures of the context engine tests: a small Python workspace through the real index.

Also what several of them build with: ``engine_for`` (a context engine on that index
with an approximate tokenizer and a model family's special tokens) and ``cursor_at``
(a cursor just after a marker of the cart file).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_assist.backends.base import ModelInfo
from lsp_assist.config import ContextSettings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.model import Cursor
from lsp_assist.context.tokens import ApproxTokenizer
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.workspace import scanned_index

from .fakes import GEMMA_LIKE

BILLING = '''"""Billing: totals and taxes."""
TAX_RATE = 0.2


def compute_total(items, discount=0.0):
    """Sum item prices minus a discount."""
    subtotal = sum(item.price for item in items)
    return subtotal * (1 - discount) * (1 + TAX_RATE)


class Invoice:
    """A printable invoice."""

    def __init__(self, number):
        self.number = number

    def render(self):
        return f"Invoice {self.number}"
'''

BILLING_OLD = '''"""Old billing helpers, kept for reference."""


def compute_totals(rows):
    return [r * 2 for r in rows]


def compute_total(rows):
    """The legacy total (do not use)."""
    return len(rows)
'''

SECRETS = """API_KEY = "sk-very-secret-value"


def load_credentials(path):
    return {"key": "hunter2-secret"}
"""

CART = '''"""Shopping cart."""
import os

from shop.billing import compute_total
from shop.secrets import load_credentials

MAX_ITEMS = 10


class Item:
    def __init__(self, name, price):
        self.name = name
        self.price = price


class Cart:
    """Holds items until checkout."""

    def __init__(self):
        self.items = []

    def add(self, item):
        if len(self.items) >= MAX_ITEMS:
            raise ValueError("cart is full")
        self.items.append(item)

    def remove(self, name):
        self.items = [i for i in self.items if i.name != name]

    def total(self):
        creds = load_credentials(os.environ.get("CREDS", ""))
        result = compute_total(self.items)
        return result


def main():
    cart = Cart()
    cart.add(Item("apple", 1.0))
    print(cart.total())
'''

FILES = {
    "shop/__init__.py": "",
    "shop/billing.py": BILLING,
    "shop/billing_old.py": BILLING_OLD,
    "shop/secrets.py": SECRETS,
    "shop/cart.py": CART,
}


@pytest.fixture()
def shop(tmp_path: Path) -> Iterator[WorkspaceIndex]:
    """The shop workspace on disk, scanned by the real index; shop/secrets.py is denied."""
    index = scanned_index(tmp_path / "ws", FILES, deny_globs=["*secrets*"])
    yield index
    index.stop()


def shop_path(index: WorkspaceIndex, rel: str = "shop/cart.py") -> Path:
    """Return the absolute path of a file of the shop workspace."""
    return index.roots[0] / rel


def cart_position(marker: str) -> tuple[int, int]:
    """Return (line, column) just after the first occurrence of ``marker`` in CART."""
    offset = CART.index(marker) + len(marker)
    line = CART.count("\n", 0, offset)
    col = offset - (CART.rfind("\n", 0, offset) + 1)
    return line, col


def engine_for(
    index: WorkspaceIndex, model: ModelInfo = GEMMA_LIKE, **changes: object
) -> ContextEngine:
    """A context engine on ``index`` for ``model``'s family, settings changed by ``changes``."""
    settings = dataclasses.replace(ContextSettings(), **changes)  # type: ignore[arg-type]
    return ContextEngine(index, ApproxTokenizer(model.special_tokens), model, settings)


def cursor_at(index: WorkspaceIndex, marker: str, text: str = CART, **kw: object) -> Cursor:
    """A cursor in the cart file (holding ``text``) just after ``marker``."""
    line, col = cart_position(marker)
    path = shop_path(index)
    return Cursor(path=path, language="python", text=text, line=line, column=col, **kw)  # type: ignore[arg-type]
