"""The ``baseline`` strategy: the whole current file and the other open files, for comparison.

It stuffs the text before the cursor (and, for FIM models, after it) and the other
open buffers, most recently used first, up to the model's context: the mission's
baseline row, what a plugin without a context engine would send.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lsp_assist.backends.base import ModelInfo
from lsp_assist.context.budget import BudgetPlan
from lsp_assist.context.layout import (
    SUFFIX_LINES,
    Piece,
    PieceMaker,
    assemble,
    cost,
    suffix_after,
)
from lsp_assist.context.model import AssembledPrompt, Cursor, LayerItem
from lsp_assist.context.zone import indent_to_prefix
from lsp_assist.index.model import IndexLookup

DEFAULT_N_CTX = 4096
"""The context the baseline fills when the model's training context is larger."""


class Baseline:
    """Builds baseline prompts: as much of the open files as fits the context."""

    def __init__(self, maker: PieceMaker, model: ModelInfo, n_ctx: int = DEFAULT_N_CTX) -> None:
        self.maker = maker
        self.counter = maker.counter
        self.model = model
        self.n_ctx = n_ctx

    def budget(self, requested: int | None) -> int:
        """Return ``requested``, else the model's training context capped at ``n_ctx``."""
        if requested:
            return requested
        train = self.model.context_length_train or self.n_ctx
        return min(train, self.n_ctx)

    def _tail_fit(self, lines: list[str], budget: int) -> str:
        """Return the longest tail of whole ``lines`` whose tokens fit ``budget``."""
        costs = [self.counter.count(x + "\n") for x in lines]
        spent = 0
        start = len(lines)
        while start > 0 and spent + costs[start - 1] <= budget:
            start -= 1
            spent += costs[start]
        text = "".join(f"{x}\n" for x in lines[start:])
        while text and self.counter.count(text) > budget:
            start += max(1, (len(lines) - start) // 20)
            text = "".join(f"{x}\n" for x in lines[start:])
        return text

    def _head_fit(self, text: str, budget: int) -> str:
        """Return the longest head of ``text`` in whole lines whose tokens fit ``budget``."""
        if self.counter.count(text) <= budget:
            return text
        lines = text.split("\n")
        costs = [self.counter.count(x + "\n") for x in lines]
        spent = 0
        end = 0
        while end < len(lines) and spent + costs[end] <= budget:
            spent += costs[end]
            end += 1
        out = "".join(f"{x}\n" for x in lines[:end])
        while out and self.counter.count(out) > budget:
            end -= max(1, end // 20)
            out = "".join(f"{x}\n" for x in lines[: max(0, end)])
        return out

    def build(
        self,
        cursor: Cursor,
        lines: list[str],
        budget: int | None,
        *,
        index: IndexLookup,
        relative: Callable[[Path], str],
        denied: Callable[[Path], bool],
        repo_name: str,
    ) -> AssembledPrompt:
        """Return the baseline prompt at ``cursor`` (a valid position; ``lines`` its text's)."""
        line, col = cursor.line, cursor.column
        maker = self.maker
        fmt = maker.format
        total = self.budget(budget)
        rel = relative(cursor.path)
        plan = BudgetPlan(total=total, shares={"instructions": 0, "editing_zone": total})
        parts, overhead = maker.format_parts(cursor.language, rel, repo_name, total)
        plan.spend("instructions", overhead)
        left = total - overhead
        typed = lines[line][:col]
        indent = ""
        if fmt.is_fim:
            indent, typed = indent_to_prefix("", typed)
        typed_piece = maker.piece("editing_zone", typed) if typed else None
        if typed_piece is not None:
            typed_piece.volatile = True
            left -= len(typed_piece.ids)
        before_lines = lines[:line]
        after_text = ""
        if fmt.is_fim:
            after_text = suffix_after(lines, line, col, len(lines))
            after_text = self._head_fit(after_text, max(0, left // 4))
        after_piece = maker.piece("editing_zone", after_text) if after_text else None
        if after_piece is not None:
            left -= len(after_piece.ids)
        before = self._tail_fit(before_lines, max(0, left - self.counter.count(indent) - 1))
        before += indent
        before_piece = maker.piece("editing_zone", before) if before else None
        if before_piece is not None:
            left -= len(before_piece.ids)
        parts.before = [before_piece] if before_piece else []
        parts.after = [after_piece] if after_piece else []
        parts.typed = [typed_piece] if typed_piece else []
        zone_cost = cost(parts.before + parts.after + parts.typed)
        parts.items["editing_zone"] = [
            LayerItem(source=rel, reason="current file", tokens=zone_cost)
        ]
        # other open files, most recently used first, whole while they fit
        items: list[LayerItem] = []
        for path in cursor.open_files:
            if path == cursor.path or denied(path) or left <= 0:
                continue
            text = index.text_of(path)
            if not text:
                continue
            src = relative(path)
            hdr: list[Piece] = maker.source_header("open_files", src, "", cursor.language)
            room = left - cost(hdr)
            if room <= 8:
                break
            body = self._head_fit(text if text.endswith("\n") else text + "\n", room)
            if not body:
                continue
            piece = maker.piece("open_files", body)
            parts.related += [*hdr, piece]
            spent = cost(hdr) + len(piece.ids)
            left -= spent
            items.append(LayerItem(source=src, reason="open file", tokens=spent))
        parts.items["open_files"] = items
        parts.items["instructions"] = [
            LayerItem(source=rel, symbol=fmt.family, reason=f"{fmt.name} format", tokens=overhead)
        ]
        plan.granted = {"instructions": overhead, "open_files": total, "editing_zone": total}
        suffix = suffix_after(lines, line, col, line + SUFFIX_LINES)
        return assemble(fmt, parts, plan, strategy="baseline", total=total, suffix=suffix)
