"""The context engine's value types: the cursor it is asked about and the prompt it builds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # memory.py builds on this module's types
    from lsp_assist.context.memory import BuildNote


class TokenCounter(Protocol):
    """Tokenizes with the model's own vocabulary (a backend, or a vocabulary-only load)."""

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids (no BOS)."""
        ...


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where the completion is requested: a file's current text and a position in it."""

    path: Path
    language: str
    text: str
    line: int
    """0-based line."""
    column: int
    """0-based column in code points."""
    open_files: tuple[Path, ...] = ()
    """Other open buffers, most recently used first (for the project/similar layers)."""


@dataclass(slots=True)
class LayerItem:
    """One piece of a layer: a definition, a summary line, a chunk of code."""

    source: str
    """Workspace-relative path it came from."""
    symbol: str = ""
    score: float = 1.0
    reason: str = ""
    tokens: int = 0
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by ``lsp-assist context --json``."""
        return {
            "source": self.source,
            "symbol": self.symbol,
            "score": round(self.score, 4),
            "reason": self.reason,
            "tokens": self.tokens,
        }


@dataclass(slots=True)
class Layer:
    """One layer of the prompt and what it spent."""

    name: str
    """instructions, project_summary, related, similar, file_summary, editing_zone."""
    tokens: int = 0
    budget: int = 0
    items: list[LayerItem] = field(default_factory=list)
    text: str = ""

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by ``lsp-assist context --json``."""
        return {
            "name": self.name,
            "tokens": self.tokens,
            "budget": self.budget,
            "items": [item.to_json() for item in self.items],
        }


@dataclass(slots=True)
class AssembledPrompt:
    """The prompt as token ids plus the explanation of how it was built."""

    strategy: str
    budget: int
    format: str
    """fim, repo (prefix-only with repository tokens), or comment."""
    layers: list[Layer]
    tokens: list[int]
    """The prompt token ids, BOS first when the model wants one."""
    prompt: str
    """The prompt as text (special tokens written out), for explain and prompt logging."""
    stable_prefix_len: int = 0
    """Leading tokens that do not change while typing within the editing zone."""
    suffix: str = ""
    """Text after the cursor on the current line and below (the editor still shows it)."""
    healed: str = ""
    """The end of the typed text left out of ``tokens`` for the model to write first
    (token healing): the generation is constrained to begin with it."""
    build_ms: float = 0.0
    budget_reason: str = ""
    """Why ``budget`` is what it is (set by whoever chose it: serving's adaptive budget)."""
    note: BuildNote | None = field(default=None, compare=False, repr=False)
    """What a layered build keeps for the next build of its file, for the owner of a
    ``PromptMemory`` to remember (None: a baseline build keeps nothing)."""

    @property
    def total_tokens(self) -> int:
        """Number of prompt tokens."""
        return len(self.tokens)

    def layer_tokens(self) -> dict[str, int]:
        """Return tokens spent per layer name."""
        return {layer.name: layer.tokens for layer in self.layers}

    def explain(self) -> str:
        """Return a human-readable, layer-by-layer account of the prompt."""
        out = [
            f"strategy {self.strategy}, format {self.format}, "
            f"{self.total_tokens}/{self.budget} tokens, "
            f"{self.stable_prefix_len} stable, built in {self.build_ms:.1f} ms",
        ]
        for layer in self.layers:
            out.append("")
            out.append(f"== {layer.name}: {layer.tokens} tokens (grant {layer.budget}) ==")
            for item in layer.items:
                what = f"{item.source}"
                if item.symbol:
                    what += f" {item.symbol}"
                out.append(f"  - {what} [score {item.score:.2f}; {item.reason}; {item.tokens} tok]")
            if layer.text:
                out.append(layer.text.rstrip("\n"))
        if self.healed:
            out.append(f"(the model writes {self.healed!r} first: token healing)")
        return "\n".join(out) + "\n"

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form used by ``lsp-assist context --json``."""
        return {
            "strategy": self.strategy,
            "budget": self.budget,
            "budget_reason": self.budget_reason,
            "format": self.format,
            "total_tokens": self.total_tokens,
            "stable_prefix_tokens": self.stable_prefix_len,
            "build_ms": round(self.build_ms, 3),
            "layers": [layer.to_json() for layer in self.layers],
            "prompt": self.prompt,
            "healed": self.healed,
        }
