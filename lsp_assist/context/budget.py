"""The token budget: shares per layer, unused share flowing on, never exceeded.

The total is split by the ratios of :class:`ContextSettings` (default 40% editing
zone, 30% related definitions and similar code, 20% file and project summaries,
10% instructions). Layers are filled in priority order: instructions (the fixed
format overhead), editing zone, related, similar, file summary, project summary.
Each layer may spend its own share plus whatever the layers before it left unused
(a share group at most twice its own share); the last layers get only what is
left. A layer never gets more than the budget still unspent, so the total can
never exceed the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lsp_assist.config import ContextSettings

PRIORITY: tuple[str, ...] = (
    "instructions",
    "editing_zone",
    "related",
    "similar",
    "file_summary",
    "project_summary",
)
"""Fill order, highest priority first."""

PROMPT_ORDER: tuple[str, ...] = (
    "instructions",
    "project_summary",
    "related",
    "similar",
    "file_summary",
    "editing_zone",
)
"""Order of the layers in the prompt: most stable first, the cursor last."""


GROUPS: dict[str, tuple[str, ...]] = {
    "related": ("related", "similar"),
    "similar": ("related", "similar"),
    "file_summary": ("file_summary", "project_summary"),
    "project_summary": ("file_summary", "project_summary"),
}
"""Layers that share one ratio of the settings."""

MAX_GROUP_FACTOR = 2.0
"""A share group spends at most this many times its own share (see ``grant``)."""


def estimate_tokens(text: str) -> int:
    """Return a cheap, usually high estimate of the tokens of ``text`` (3 chars a token)."""
    return len(text) // 3 + 1


@dataclass(kw_only=True)
class BudgetPlan:
    """Grants each layer its share plus the unused share of the layers before it."""

    total: int
    shares: dict[str, int] = field(default_factory=dict)
    spent: dict[str, int] = field(default_factory=dict)
    granted: dict[str, int] = field(default_factory=dict)
    """What each layer was allowed to spend."""
    available: dict[str, int] = field(default_factory=dict)
    """Share plus carry of each layer, before the group cap."""
    carry: int = 0

    @classmethod
    def split(cls, total: int, settings: ContextSettings) -> BudgetPlan:
        """Return the plan of ``total`` tokens split by the settings' ratios."""
        total = max(0, total)
        instr = int(total * settings.instructions_ratio)
        related = int(total * settings.related_ratio)
        summary = int(total * settings.summary_ratio)
        zone = total - instr - related - summary
        shares = {
            "instructions": instr,
            "editing_zone": zone,
            "related": related,
            "similar": 0,
            "file_summary": summary,
            "project_summary": 0,
        }
        return cls(total=total, shares=shares)

    @property
    def remaining(self) -> int:
        """Tokens not spent yet."""
        return self.total - sum(self.spent.values())

    def grant(self, layer: str) -> int:
        """Return what ``layer`` may spend: its share plus the carried unused tokens.

        A share group (zone; related + similar; file + project summary) may take at
        most ``MAX_GROUP_FACTOR`` times its own share: tokens left unused by the
        layers before it flow on, but the prompt is not padded to the budget with
        low-value material (every prompt token costs prefill time).
        """
        available = self.shares.get(layer, 0) + self.carry
        self.available[layer] = available
        group = GROUPS.get(layer, (layer,))
        cap = int(MAX_GROUP_FACTOR * sum(self.shares.get(g, 0) for g in group))
        if layer == "instructions":
            cap = max(cap, available)
        room = cap - sum(self.spent.get(g, 0) for g in group)
        allowed = max(0, min(available, room, self.remaining))
        self.granted[layer] = allowed
        return allowed

    def spend(self, layer: str, used: int) -> None:
        """Record what ``layer`` spent; what it left of its grant flows to the next layer.

        A layer that had to overspend its grant (the fixed format overhead) takes the
        difference from the next layers.
        """
        available = self.available.get(layer, used)
        self.spent[layer] = self.spent.get(layer, 0) + used
        self.carry = available - used
