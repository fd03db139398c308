"""Shared fixtures: one SmolLM2 backend per module (fast), tiny GGUFs, code prompts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from lsp_assist.backends.models import small_model_path
from lsp_assist.config import ModelSettings

REPO = Path(__file__).resolve().parents[2]


def code_text(chars: int, name: str = "lsp_assist/backends/kv_states.py") -> str:
    """Return the first ``chars`` characters of a real source file of this repository."""
    return (REPO / name).read_text()[:chars]


COPY_SOURCE = '''class Inventory:
    """Items in stock, by name."""

    def __init__(self) -> None:
        self.items: dict[str, int] = {}

    def add(self, name: str, count: int = 1) -> int:
        """Add ``count`` of ``name``; return the new count."""
        if count <= 0:
            raise ValueError("count must be positive")
        self.items[name] = self.items.get(name, 0) + count
        return self.items[name]

    def remove(self, name: str, count: int = 1) -> int:
        """Remove ``count`` of ``name``; return what is left."""
        left = self.items.get(name, 0) - count
        if left < 0:
            raise KeyError(name)
        self.items[name] = left
        return left


class Warehouse(Inventory):
    """The same inventory, in a warehouse."""

    def add(self, name: str, count: int = 1) -> int:
'''
"""A continuation that copies its context (the method above, in a subclass)."""


@pytest.fixture(scope="module")
def smol_path() -> Path:
    """SmolLM2-135M (Q4_1), the fast test model."""
    return small_model_path()


@pytest.fixture(scope="module")
def smol(smol_path: Path) -> Iterator[object]:
    """A LocalBackend on SmolLM2 with generous time caps (the machine is shared)."""
    from lsp_assist.backends.llama import LocalBackend

    backend = LocalBackend(
        ModelSettings(
            context_length=2048,
            prompt_timeout_ms=60_000,
            generation_timeout_ms=60_000,
            kv_cache_mb=64,
            # the backend's drafting and identity tests run the pre-2026-12-07 defaults
            draft="prompt-lookup",
            batch_invariant=True,
        ),
        model_path=smol_path,
    )
    yield backend
    backend.close()
