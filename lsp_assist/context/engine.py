"""The context engine: builds the prompt for one cursor position, layered and budgeted.

``ContextEngine.build`` assembles, most stable first and most volatile last:
instructions, project summary, related definitions, similar code, file summary, and
the editing zone, with the typed part of the cursor line as the very last piece, so
that typing within a line changes only the tail of the token list and the backend
reuses the rest from its KV cache. Every piece of text is tokenized on its own with
the model's vocabulary (cached per chunk) and the prompt is the concatenation, so
the budget is counted exactly and never exceeded.

This module owns the order in which the layers are filled and their grants (the
budget plan), the per-file memory that keeps the prompt stable while typing, and the
engine's state (settings, recent files, caches). Each layer is rendered next to the
code that finds its content: ``zone.zone_pieces``, ``retrieval.related_layer``,
``similar.similar_layer``, ``summaries.FileOutline`` and
``summaries.project_summary_layer``; ``layout`` orders and assembles the pieces per
prompt format, and ``baseline`` is the ``baseline`` strategy (the whole current file
and the other open files up to the model's context, for comparison).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.backends.base import ModelInfo
from lsp_assist.config import ContextSettings
from lsp_assist.context.baseline import DEFAULT_N_CTX, Baseline
from lsp_assist.context.budget import MAX_GROUP_FACTOR, BudgetPlan, estimate_tokens
from lsp_assist.context.formats import PromptFormat, detect_format
from lsp_assist.context.known_code import KnownCode
from lsp_assist.context.layout import (
    SUFFIX_LINES,
    Parts,
    PieceMaker,
    assemble,
    cost,
    order,
    suffix_after,
)
from lsp_assist.context.model import AssembledPrompt, Cursor, LayerItem, TokenCounter
from lsp_assist.context.retrieval import Candidate, Retriever, related_layer
from lsp_assist.context.similar import SimilarCode, similar_layer
from lsp_assist.context.summaries import FileOutline, project_summary_layer
from lsp_assist.context.syntax import TreeCache
from lsp_assist.context.tokens import CachedCounter
from lsp_assist.context.vector_layer import VectorLayer, query_text
from lsp_assist.context.zone import (
    Zone,
    estimate_ratio,
    select_zone,
    zone_from_span,
    zone_pieces,
)
from lsp_assist.documents.document import clamp_position
from lsp_assist.errors import ContextError, IndexError_
from lsp_assist.index.model import IndexLookup

__all__ = [
    "DEFAULT_N_CTX",
    "TYPED_STEP",
    "AssembledPrompt",
    "ContextEngine",
    "Cursor",
    "estimate_tokens",
    "explain",
]

log = logging.getLogger(__name__)

TYPED_STEP = 32
"""The typed part of the cursor line is charged to the budget in steps of this many tokens."""


@dataclass(slots=True)
class _LineState:
    """A file's last layered build, reused while the user types within its cursor line
    and, from a line below it, for the layers before the zone (see ``_anchored``)."""

    key: tuple[object, ...]
    span: tuple[int, int]
    parts: Parts
    plan: BudgetPlan
    line: int = 0
    block_key: tuple[object, ...] = ()
    """What must not change for a build on a later line to keep this build's head."""
    middle_from: int | None = None
    """FIM: the first line written after the middle token (lines typed since the build
    that laid out the prefix), None when only the cursor line is."""
    before: str = ""
    after: str = ""
    """The zone's prefix and suffix text of this build."""
    n_lines: int = 0


ZONE_GROWTH_SHARE = 10
"""A fresh build spends the budget but 1/10 of it: the room the zone then grows into, line
by line, keeping its first line (``_anchored``) before the next fresh build."""


def zone_growth(total: int) -> int:
    """Return the tokens a fresh build of a ``total``-token prompt leaves for the zone to grow."""
    return total // ZONE_GROWTH_SHARE


ANCHOR_STEP_LINES = 3
"""How far below the last build a build may be to keep its zone start: the next line or
two being typed, not a jump (a prefill at the top of a file, a click further down)."""

_HEAD_PARTS = ("head", "project", "related", "similar", "file_header")
_KEPT_WHILE_TYPING = ("related", "similar")
"""Head parts a build on the next lines keeps from the last one even when a fresh build
would choose others (they follow the cursor): see ``_anchored``."""
"""The layers before the zone that a new line's fresh build must repeat to be anchored."""


class ContextEngine:
    """Builds layered, budgeted prompts laid out for KV cache reuse."""

    def __init__(
        self,
        index: IndexLookup,
        tokenizer: TokenCounter,
        model: ModelInfo,
        settings: ContextSettings | None = None,
        *,
        relative: Callable[[Path], str] | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        repo_name: str | None = None,
    ) -> None:
        self.index = index
        self.counter = (
            tokenizer if isinstance(tokenizer, CachedCounter) else CachedCounter(tokenizer)
        )
        self.model = model
        self.format: PromptFormat = detect_format(model)
        self.settings = settings or ContextSettings()
        self._relative = relative or index.relative
        self._rel_cache: dict[Path, str] = {}
        self.n_ctx = n_ctx
        self.repo_name = repo_name or self._guess_repo_name()
        self.maker = PieceMaker(self.counter, self.format)
        self.baseline = Baseline(self.maker, model, n_ctx)
        self.trees = TreeCache()
        self.retriever = Retriever(index, self.relative)
        self.similar = SimilarCode()
        self.known = KnownCode()
        self.vectors: VectorLayer | None = None
        """Vector retrieval (``layerVector``): given by whoever owns the vector index."""
        self.outline = FileOutline()
        self._recent: OrderedDict[Path, None] = OrderedDict()
        self._zone_memo: dict[Path, tuple[int, int, int, int, int]] = {}
        self._line_states: dict[Path, _LineState] = {}
        self._zone_scale: dict[Path, float] = {}
        """Exact / estimated tokens of each file's last zone (the next selection's scale)."""
        self._lock = threading.RLock()
        # note_opened/note_edited run on the event loop: never behind a build's lock
        self._recent_lock = threading.Lock()
        log.debug("context engine: format %s (%s)", self.format.name, self.format.family)

    def relative(self, path: Path) -> str:
        """Return the workspace-relative form of ``path`` (cached)."""
        found = self._rel_cache.get(path)
        if found is None:
            if len(self._rel_cache) > 50_000:
                self._rel_cache.clear()
            found = self._relative(path)
            self._rel_cache[path] = found
        return found

    # -- state ---------------------------------------------------------------------

    def _guess_repo_name(self) -> str:
        roots = self.index.roots
        return roots[0].name if roots else ""

    def update_settings(self, settings: ContextSettings) -> None:
        """Use new settings from the next build on."""
        with self._lock:
            self.settings = settings
            self.retriever.reset(force=True)
            with self._recent_lock:
                while len(self._recent) > max(1, settings.recent_files):
                    self._recent.popitem(last=False)

    def note_opened(self, path: Path) -> None:
        """Remember that ``path`` was opened (rolling memory of the last M files)."""
        with self._recent_lock:
            self._recent[path] = None
            self._recent.move_to_end(path)
            while len(self._recent) > max(1, self.settings.recent_files):
                self._recent.popitem(last=False)

    def note_edited(self, path: Path) -> None:
        """Remember that ``path`` was edited (same memory as opened files)."""
        self.note_opened(path)

    def recent_files(self) -> list[Path]:
        """Return the remembered files, most recent first."""
        with self._recent_lock:
            return list(reversed(self._recent))

    def _tree(self, cursor: Cursor) -> Tree | None:
        """Return the syntax tree of the cursor's text, seeded from the index's tree."""
        if not self.trees.has(cursor.path, cursor.language):
            try:
                if self.index.text_of(cursor.path) == cursor.text:
                    seed = self.index.tree_of(cursor.path)
                    if seed is not None:
                        self.trees.put(cursor.path, cursor.language, cursor.text, seed.copy())
            except IndexError_:  # the index's tree is an optimisation only
                log.debug("tree_of failed for %s", cursor.path, exc_info=True)
        return self.trees.tree(cursor.path, cursor.language, cursor.text)

    def _zone_hint(
        self, path: Path, n_lines: int, budget: int, settings: ContextSettings
    ) -> tuple[int, int] | None:
        memo = self._zone_memo.get(path)
        if memo is None or memo[:3] != (n_lines, budget, settings.editing_zone_lines):
            return None
        return memo[3], memo[4]

    # -- build -----------------------------------------------------------------------

    def build(
        self, cursor: Cursor, *, strategy: str | None = None, budget: int | None = None
    ) -> AssembledPrompt:
        """Return the prompt for ``cursor`` (deterministic: the same text, settings and
        index, after the same previous build of the file, give the same bytes).

        A position outside the text is clamped as ``Document.clamp`` does.
        """
        start = time.perf_counter()
        with self._lock:
            settings = self.settings
            chosen = strategy or settings.strategy
            self.retriever.reset()
            if self.index.is_denied(cursor.path):
                raise ContextError(f"{cursor.path} is a denied (secret) file: no prompt is built")
            lines = cursor.text.split("\n")
            pos = clamp_position(lines, cursor.line, cursor.column)
            if (pos.line, pos.column) != (cursor.line, cursor.column):
                cursor = replace(cursor, line=pos.line, column=pos.column)
            if chosen == "baseline":
                prompt = self.baseline.build(
                    cursor,
                    lines,
                    budget,
                    index=self.index,
                    relative=self.relative,
                    denied=self.retriever.denied,
                    repo_name=self.repo_name,
                )
            elif chosen == "layered":
                prompt = self._layered(cursor, lines, settings, budget or settings.context_budget)
            else:
                raise ContextError(f"unknown context strategy {chosen!r}")
        prompt.build_ms = (time.perf_counter() - start) * 1000.0
        return prompt

    def _layered(
        self, cursor: Cursor, lines: list[str], settings: ContextSettings, total: int
    ) -> AssembledPrompt:
        fmt = self.format
        maker = self.maker
        rel = self.relative(cursor.path)
        line, col = cursor.line, cursor.column

        # While the user types within one line, everything before the editing zone is
        # kept as it was at the line's first build: only the zone's tail changes.
        key = self._line_key(cursor, lines, settings, total)
        state = self._line_states.get(cursor.path)
        if state is not None and state.key == key:
            reused = self._reuse_line(cursor, lines, state, total, rel)
            if reused is not None:
                return reused
        vectors = self.vectors if settings.layer_vector else None
        if vectors is not None:  # embedded while the zone and related layers are built
            vectors.prefetch(cursor.path, query_text(lines, line, col))

        # A fresh build leaves room for the zone to grow down a few lines (_anchored)
        plan = BudgetPlan.split(total - zone_growth(total), settings)

        # instructions: the fixed format overhead
        parts, overhead = maker.format_parts(cursor.language, rel, self.repo_name, total)
        plan.grant("instructions")
        plan.spend("instructions", overhead)
        parts.items["instructions"] = [
            LayerItem(source=rel, symbol=fmt.family, reason=f"{fmt.name} format", tokens=overhead)
        ]

        entry = self.retriever.entry(cursor.path)
        imports = list(entry.imports) if entry is not None else []

        # project summary: a grant fixed for the file (not what the other layers leave),
        # so it is the same at every position in the file and stays in the KV cache
        ps_budget = 0
        if settings.layer_project_summary and fmt.carries_project_summary:
            share = plan.shares.get("file_summary", 0)
            ps_budget = min(share // 2 if settings.layer_file_summary else share, plan.remaining)
            if ps_budget > 0:
                project = project_summary_layer(
                    self.retriever, maker, cursor, imports, self.recent_files(), ps_budget
                )
                parts.project, parts.items["project_summary"] = project.pieces, project.items
        plan.granted["project_summary"] = ps_budget
        plan.spent["project_summary"] = cost(parts.project)

        # editing zone
        tree = self._tree(cursor)
        zone_budget = plan.grant("editing_zone")
        zone = select_zone(
            tree,
            lines,
            line,
            col,
            max_lines=settings.editing_zone_lines,
            budget=zone_budget,
            count=self.counter.count,
            fim=fmt.is_fim,
            estimate=estimate_tokens,
            scale=self._zone_scale.get(cursor.path, 1.0),
            hint=self._zone_hint(cursor.path, len(lines), zone_budget, settings),
            reserve=TYPED_STEP,
        )
        if len(self._zone_scale) > 256:
            self._zone_scale.clear()
        self._zone_scale[cursor.path] = estimate_ratio(
            zone, lines, self.counter.count, estimate_tokens
        )
        zone_cost = zone_pieces(maker, parts, zone, rel)
        # The typed part of the cursor line changes at every keystroke. The layers
        # after the zone get what the zone left, so charge the typed part in steps
        # of TYPED_STEP tokens: their grants do not move with each character.
        typed_cost = cost(parts.typed)
        reserved = -(-(typed_cost + 1) // TYPED_STEP) * TYPED_STEP
        charged = zone_cost - typed_cost + max(typed_cost, reserved)
        plan.spend("editing_zone", min(charged, max(zone_cost, zone_budget)))

        recent = set(self.recent_files()) | set(cursor.open_files)
        recent.discard(cursor.path)

        # other files' blocks leave out the standard library unless asked (known_code.py)
        skip = None if settings.layer_standard_library else self.known.is_stdlib

        # related definitions
        chosen: list[Candidate] = []
        related_budget = plan.grant("related")
        if settings.layer_related and related_budget > 0:
            related, chosen = related_layer(
                self.retriever,
                maker,
                cursor,
                zone,
                imports,
                recent,
                related_budget,
                settings.related_threshold,
                skip=skip,
            )
            parts.related, parts.items["related"] = related.pieces, related.items
        plan.spend("related", cost(parts.related))

        # similar code
        similar_budget = plan.grant("similar")
        if settings.layer_similar and similar_budget > 0:
            similar = similar_layer(
                self.similar,
                self.retriever,
                maker,
                cursor,
                zone,
                recent,
                chosen,
                similar_budget,
                settings.similar_threshold,
                vectors=vectors.hybrid(cursor.path, settings) if vectors is not None else None,
                skip=skip,
            )
            parts.similar, parts.items["similar"] = similar.pieces, similar.items
        plan.spend("similar", cost(parts.similar))

        # the zone takes what related and similar left, up to its group cap: in a file
        # with little to retrieve the code around the cursor is the best use of the budget
        # (a HumanEval problem's docstring was cut at the zone's own share)
        extra = self._zone_room(plan)
        grant, accepted = extra, False
        # the selection estimates tokens, so a wider zone may overshoot the room by a
        # few: ask again for that much less rather than keep the narrow zone
        for _ in range(3):
            if grant <= TYPED_STEP:
                break
            wider = select_zone(
                tree,
                lines,
                line,
                col,
                max_lines=settings.editing_zone_lines,
                budget=zone_budget + grant,
                count=self.counter.count,
                fim=fmt.is_fim,
                estimate=estimate_tokens,
                scale=self._zone_scale.get(cursor.path, 1.0),
                reserve=TYPED_STEP,
            )
            if (wider.start_line, wider.end_line) == (zone.start_line, zone.end_line):
                break
            wider_cost = zone_pieces(maker, parts, wider, rel)
            over = wider_cost - zone_cost - extra
            if over > 0:
                grant -= over + TYPED_STEP
                continue
            accepted, zone = True, wider
            plan.spent["editing_zone"] += wider_cost - zone_cost
            plan.granted["editing_zone"] += extra
            plan.carry -= wider_cost - zone_cost
            zone_cost = wider_cost
            break
        if not accepted:
            zone_pieces(maker, parts, zone, rel)
        # the next build's selection starts from the zone this one chose (its hint)
        self._zone_memo[cursor.path] = (
            len(lines),
            zone_budget,
            settings.editing_zone_lines,
            zone.start_line,
            max(zone.end_line, line),
        )

        # file summary
        fs_budget = plan.grant("file_summary")
        if settings.layer_file_summary and fs_budget > 0:
            outline = self.outline.layer(maker, cursor, tree, lines, zone, entry, fs_budget, rel)
            parts.file_summary, parts.items["file_summary"] = outline.pieces, outline.items
        plan.spend("file_summary", cost(parts.file_summary))

        span = (zone.start_line, zone.end_line)
        middle_from: int | None = None
        anchored = self._anchored(cursor, lines, parts, plan, state, settings, total, rel)
        if anchored is not None:
            prompt, parts, zone, middle_from = anchored
            span = (zone.start_line, zone.end_line)
        else:
            prompt = self._assemble(lines, cursor, parts, plan, total, zone)
        if len(self._line_states) > 64:
            self._line_states.clear()
        self._line_states[cursor.path] = _LineState(
            key=key,
            span=span,
            parts=parts,
            plan=plan,
            line=line,
            block_key=self._block_key(cursor, lines, span[0], settings, total),
            middle_from=middle_from,
            before=zone.before,
            after=zone.after,
            n_lines=len(lines),
        )
        return prompt

    @staticmethod
    def _zone_room(plan: BudgetPlan) -> int:
        """Return the tokens the zone may still take: what the layers after it left
        unused (the plan's carry), within the zone's group cap and the budget."""
        cap = int(MAX_GROUP_FACTOR * plan.shares.get("editing_zone", 0))
        room = cap - plan.spent.get("editing_zone", 0)
        return max(0, min(plan.carry, room, plan.remaining))

    def _block_key(
        self,
        cursor: Cursor,
        lines: list[str],
        start_line: int,
        settings: ContextSettings,
        total: int,
    ) -> tuple[object, ...]:
        """Return what must not change for a later line to keep a build's zone start."""
        begin = sum(map(len, lines[:start_line])) + start_line
        return (
            start_line,
            hash(cursor.text[:begin]),
            *self._inputs(cursor, settings, total),
        )

    def _anchored(
        self,
        cursor: Cursor,
        lines: list[str],
        fresh: Parts,
        plan: BudgetPlan,
        state: _LineState | None,
        settings: ContextSettings,
        total: int,
        rel: str,
    ) -> tuple[AssembledPrompt, Parts, Zone, int | None] | None:
        """At the last build's line after an edit there, or a line below it, keep that
        build's layers and zone start.

        The first keystroke on a new line used to move the zone's first line (the zone
        is chosen around the cursor) and the file summary (it describes what the zone
        leaves out), so ~300-400 tokens were evaluated again: 1.3-1.7 s on a 2-core CPU
        at every new line. When the fresh build chose the same instructions and project
        summary, the zone keeps its first line and grows down to the cursor, and the
        related, similar and file summary layers are kept; only the lines typed since
        are new. The related and similar layers follow the cursor, so the fresh build at
        a new line often picks others (the line just typed names other definitions):
        taking them would evaluate the whole prompt again (~380 tokens, 2 s with
        Qwen2.5-Coder-0.5B on this CPU) at the first keystroke of each line. They are
        chosen again at the next fresh build: a jump, or when the zone would pass its
        line cap or the budget.

        In a FIM prompt the suffix and the middle token follow the prefix, so a prefix
        that grows at its end still moves everything after it. When the user typed new
        lines (the text after the cursor is the last build's suffix, the text before
        the last build's line is its prefix), the lines typed since are written after
        the middle token instead, as the middle written so far: prefix, suffix and
        middle token stay as they were and the prompt only grows at its end.

        At the last build's own line, when the text after the cursor changed (the rest of
        the line or lines below deleted, as after a jump to a statement the user
        rewrites; the within-line reuse needs it unchanged), the same layers and zone
        start are kept: the prompt a prefill at the cursor evaluated keeps all but the
        zone's end (``lspAssist/didMoveCursor``, docs/serving.md).
        Returns the prompt, its parts, its zone and the first line of the middle.
        """
        if state is None or not state.block_key:
            return None
        if not 0 <= cursor.line - state.line <= ANCHOR_STEP_LINES:
            return None  # not this line or the next two of the same typing: a fresh build
        start, end = state.span
        if cursor.line - start + 1 > settings.editing_zone_lines:
            return None
        if state.block_key != self._block_key(cursor, lines, start, settings, total):
            return None
        for name in _HEAD_PARTS:
            if name in _KEPT_WHILE_TYPING:
                continue
            old, new = getattr(state.parts, name), getattr(fresh, name)
            if [piece.ids for piece in old] != [piece.ids for piece in new]:
                return None
        fim = self.format.is_fim
        # the fresh build's pieces before the zone (the same pieces), the kept related,
        # similar and file summary layers with their explain items, the grown zone
        items = dict(fresh.items)
        for name in ("related", "similar", "file_summary"):
            if name in state.parts.items:
                items[name] = state.parts.items[name]
        parts = replace(
            fresh,
            related=state.parts.related,
            similar=state.parts.similar,
            file_summary=state.parts.file_summary,
            items=items,
        )
        middle_from: int | None = None
        zone: Zone | None = None
        if fim:
            first = state.middle_from if state.middle_from is not None else state.line
            shifted = end + len(lines) - state.n_lines
            grown = zone_from_span(
                lines,
                start,
                max(shifted, cursor.line),
                cursor.line,
                cursor.column,
                fim=True,
                middle_from=first,
            )
            if grown.before == state.before and grown.after == state.after:
                zone, middle_from = grown, first
        if zone is None:
            # lines the user removed or added below the cursor move the zone's end with them
            last = min(max(end + len(lines) - state.n_lines, cursor.line), len(lines) - 1)
            zone = zone_from_span(lines, start, last, cursor.line, cursor.column, fim=fim)
        zone_pieces(self.maker, parts, zone, rel)
        if cost(order(self.format, parts)) > total:
            return None  # the zone outgrew the budget: this line starts a new block
        prompt = self._assemble(lines, cursor, parts, plan, total, zone)
        return prompt, parts, zone, middle_from

    def _assemble(
        self,
        lines: list[str],
        cursor: Cursor,
        parts: Parts,
        plan: BudgetPlan,
        total: int,
        zone: Zone,
    ) -> AssembledPrompt:
        line = cursor.line
        last = max(zone.end_line, line + SUFFIX_LINES)
        suffix = suffix_after(lines, line, cursor.column, last)
        return assemble(self.format, parts, plan, strategy="layered", total=total, suffix=suffix)

    def _inputs(self, cursor: Cursor, settings: ContextSettings, total: int) -> tuple[object, ...]:
        """What besides the text a build depends on (part of both reuse keys)."""
        return (
            total,
            settings,
            cursor.language,
            cursor.open_files,
            tuple(reversed(self.recent_files())),
        )

    def _line_key(
        self, cursor: Cursor, lines: list[str], settings: ContextSettings, total: int
    ) -> tuple[object, ...]:
        """Return what must not change for a build to reuse the line's first build."""
        line = cursor.line
        begin = sum(map(len, lines[:line])) + line
        finish = begin + len(lines[line])
        return (
            line,
            len(lines),
            hash(cursor.text[:begin]),
            hash(cursor.text[finish:]),
            *self._inputs(cursor, settings, total),
        )

    def _reuse_line(
        self,
        cursor: Cursor,
        lines: list[str],
        state: _LineState,
        total: int,
        rel: str,
    ) -> AssembledPrompt | None:
        """Return the prompt with the line's first head and the zone's lines, if it fits."""
        fim = self.format.is_fim
        zone = zone_from_span(
            lines,
            *state.span,
            cursor.line,
            cursor.column,
            fim=fim,
            middle_from=state.middle_from,
        )
        parts = replace(state.parts, items=dict(state.parts.items))
        zone_pieces(self.maker, parts, zone, rel)
        if cost(order(self.format, parts)) > total:
            return None  # the line outgrew what its zone reserved: build afresh
        return self._assemble(lines, cursor, parts, state.plan, total, zone)


def explain(prompt: AssembledPrompt) -> str:
    """Return a human-readable, layer-by-layer account of a prompt (``prompt.explain()``)."""
    return prompt.explain()
