"""The context engine: builds the prompt for one cursor position, layered and budgeted.

``ContextEngine.build`` assembles, most stable first and most volatile last:
instructions, project summary, related definitions, similar code, file summary, and
the editing zone, with the typed part of the cursor line as the very last piece, so
that typing within a line changes only the tail of the token list and the backend
reuses the rest from its KV cache. Every piece of text is tokenized on its own with
the model's vocabulary (cached per chunk) and the prompt is the concatenation, so
the budget is counted exactly and never exceeded.

This module owns the order in which the layers are filled and their grants (the
budget plan) and the engine's state (settings, recent files, caches). A build is a
query: what it keeps for the next build of the file (the line it was typed on, the
zone's first line and scale) is a :class:`~lsp_assist.context.memory.BuildNote` on the
prompt, stored by the caller that owns the :class:`~lsp_assist.context.memory.PromptMemory`
and read by the next build it hands that memory. Each layer is rendered next to the
code that finds its content: ``zone.zone_pieces``, ``retrieval.related_layer``,
``similar.similar_layer``, ``summaries.FileOutline`` and
``summaries.project_summary_layer``; ``layout`` orders and assembles the pieces per
prompt format, and ``baseline`` is the ``baseline`` strategy (the whole current file
and the other open files up to the model's context, for comparison).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.backends.base import ModelInfo
from lsp_assist.config import Bounded, ContextSettings
from lsp_assist.context.baseline import DEFAULT_N_CTX, Baseline
from lsp_assist.context.budget import BudgetPlan, estimate_tokens
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
from lsp_assist.context.memory import (
    BuildNote,
    KeptLine,
    PromptMemory,
    ZoneMemo,
    anchored,
    block_key,
    build_inputs,
    kept_line,
    line_key,
    zone_growth,
)
from lsp_assist.context.model import AssembledPrompt, Cursor, LayerItem, TokenCounter
from lsp_assist.context.retrieval import (
    CLASS_KINDS,
    SIGNATURE_ONLY,
    Candidate,
    Retriever,
    demanded,
    related_layer,
)
from lsp_assist.context.similar import SimilarCode, similar_layer
from lsp_assist.context.summaries import FileOutline, project_summary_layer
from lsp_assist.context.syntax import TreeCache
from lsp_assist.context.tokens import CachedCounter
from lsp_assist.context.vector_layer import VectorLayer, query_text
from lsp_assist.context.zone import Zone, estimate_ratio, select_zone, widen_zone, zone_pieces
from lsp_assist.documents.document import clamp_position
from lsp_assist.errors import ContextError, IndexError_
from lsp_assist.index.model import FileEntry, Import, IndexLookup

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

RELATIVE_PATHS = 50_000
"""Workspace-relative paths the engine memoises (least recently used dropped first)."""


@dataclass(slots=True)
class _Fresh:
    """One fresh layered build in progress: its inputs and what the grants gave so far."""

    cursor: Cursor
    lines: list[str]
    settings: ContextSettings
    rel: str
    plan: BudgetPlan
    parts: Parts
    tree: Tree | None
    zone: Zone
    zone_budget: int
    zone_cost: int
    scale: float
    """Exact / estimated tokens of the zone first chosen (the next selection's scale)."""
    entry: FileEntry | None
    imports: list[Import]
    recent: set[Path]
    skip: Callable[[Path], bool] | None
    chosen: list[Candidate] = field(default_factory=list)
    """The related layer's definitions (the similar layer leaves them out)."""
    demand: list[Candidate] = field(default_factory=list)
    """What the line asks for (retrieval/demand.py), placed first in the related layer."""


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
        self.relative: Callable[[Path], str] = functools.lru_cache(maxsize=RELATIVE_PATHS)(
            relative or index.relative
        )
        """The workspace-relative form of a path (memoised)."""
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
        self._lock = threading.RLock()
        # note_opened/note_edited run on the event loop: never behind a build's lock
        self._recent_lock = threading.Lock()
        log.debug("context engine: format %s (%s)", self.format.name, self.format.family)

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

    def bounds(self) -> dict[str, Bounded]:
        """What the engine keeps between builds, each against its bound (docs/configuration.md,
        "What grows with use")."""
        with self._recent_lock:
            recent = len(self._recent)
        relative = self.relative.cache_info()  # type: ignore[attr-defined]
        out = {
            "recent_files": Bounded(
                recent, max(1, self.settings.recent_files), "files", "recentFiles"
            ),
            "relative_paths": Bounded(
                relative.currsize, RELATIVE_PATHS, "paths", "context/engine.py RELATIVE_PATHS"
            ),
            **self.counter.bounds(),
            **self.trees.bounds(),
            **self.outline.bounds(),
            **self.retriever.bounds(),
            **self.similar.bounds(),
            **self.known.bounds(),
        }
        vectors = self.vectors
        if vectors is not None:
            out.update(vectors.bounds())
        return out

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

    # -- build -----------------------------------------------------------------------

    def build(
        self,
        cursor: Cursor,
        *,
        strategy: str | None = None,
        budget: int | None = None,
        memory: PromptMemory | None = None,
        slot: str | None = None,
    ) -> AssembledPrompt:
        """Return the prompt for ``cursor``, with the note of what it built (``prompt.note``).

        A query: the same text, settings, index, recent files and note read give the
        same bytes. Without ``memory`` nothing built before counts; with one, the note
        kept for ``slot`` (default the cursor's path) is read, never written: its owner
        stores this build's note with ``memory.remember(prompt.note)``. A position
        outside the text is clamped as ``Document.clamp`` does.
        """
        start = time.perf_counter()
        with self._lock:
            settings = self.settings
            chosen = strategy or settings.strategy
            cursor, lines = self._start(cursor)
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
                key = slot if slot is not None else str(cursor.path)
                kept = memory.recall(key) if memory is not None else None
                total = budget or settings.context_budget
                prompt = self._layered(cursor, lines, settings, total, key, kept)
            else:
                raise ContextError(f"unknown context strategy {chosen!r}")
        prompt.build_ms = (time.perf_counter() - start) * 1000.0
        return prompt

    def related_definitions(self, cursor: Cursor, *, budget: int | None = None) -> list[LayerItem]:
        """Return the related definitions a fresh layered build at ``cursor`` chooses
        (each item with its text), without building the rest of the prompt."""
        with self._lock:
            settings = self.settings
            cursor, lines = self._start(cursor)
            total = budget or settings.context_budget
            fresh = self._fresh(cursor, lines, settings, total, None)
            self._related(fresh)
            return list(fresh.parts.items.get("related", []))

    def _start(self, cursor: Cursor) -> tuple[Cursor, list[str]]:
        """Begin a build: the retriever's memo reset, a denied file refused, the cursor
        clamped to the text; return the cursor and the text's lines."""
        self.retriever.reset()
        if self.index.is_denied(cursor.path):
            raise ContextError(f"{cursor.path} is a denied (secret) file: no prompt is built")
        lines = cursor.text.split("\n")
        pos = clamp_position(lines, cursor.line, cursor.column)
        if (pos.line, pos.column) != (cursor.line, cursor.column):
            cursor = replace(cursor, line=pos.line, column=pos.column)
        return cursor, lines

    def _layered(
        self,
        cursor: Cursor,
        lines: list[str],
        settings: ContextSettings,
        total: int,
        slot: str,
        kept: BuildNote | None,
    ) -> AssembledPrompt:
        rel = self.relative(cursor.path)
        inputs = build_inputs(cursor, settings, total, self.recent_files())
        # While the user types within one line, everything before the editing zone is
        # kept as it was at the line's first build: only the zone's tail changes.
        key = line_key(cursor, lines, inputs)
        # what the line asks for and the kept build did not: a fresh build holds it
        unmet = kept is not None and self._unmet(cursor, lines, settings, kept)
        if kept is not None and not unmet:
            reused = self._reuse_line(cursor, lines, kept, key, total, rel)
            if reused is not None:
                return reused
        vectors = self.vectors if settings.layer_vector else None
        if vectors is not None:  # embedded while the zone and related layers are built
            vectors.prefetch(cursor.path, query_text(lines, cursor.line, cursor.column))

        # the grants in order: instructions, project summary and the zone (_fresh),
        # related, similar, the zone's room, the file summary
        fresh = self._fresh(cursor, lines, settings, total, kept)
        self._related(fresh)
        self._similar(fresh, vectors)
        zone, _ = widen_zone(
            fresh.plan,
            fresh.zone,
            fresh.zone_cost,
            functools.partial(self._select_zone, fresh),
            maker=self.maker,
            parts=fresh.parts,
            rel=rel,
            step=TYPED_STEP,
        )
        self._file_summary(fresh, zone)
        zone = self._whole_file_zone(fresh, zone, zone_growth(total))
        # the next build's selection starts from the zone this one chose (its hint)
        memo = ZoneMemo(
            len(lines),
            fresh.zone_budget,
            settings.editing_zone_lines,
            zone.start_line,
            max(zone.end_line, cursor.line),
        )

        parts, plan, middle_from = fresh.parts, fresh.plan, None
        grown = None if unmet else self._anchored(fresh, kept, inputs, total)
        if grown is not None:
            prompt, parts, zone, middle_from = grown
        else:
            prompt = self._assemble(lines, cursor, parts, plan, total, zone)
        span = (zone.start_line, zone.end_line)
        line = KeptLine(
            key=key,
            span=span,
            parts=parts,
            plan=plan,
            line=cursor.line,
            block_key=block_key(cursor, lines, span[0], inputs),
            middle_from=middle_from,
            before=zone.before,
            after=zone.after,
            n_lines=len(lines),
            asked=frozenset(cand.key for cand in fresh.demand),
        )
        prompt.note = BuildNote(slot=slot, line=line, zone=memo, scale=fresh.scale)
        return prompt

    def _fresh(
        self,
        cursor: Cursor,
        lines: list[str],
        settings: ContextSettings,
        total: int,
        kept: BuildNote | None,
    ) -> _Fresh:
        """Grant the instructions, the project summary and the editing zone of a fresh
        build (the zone selected from the kept note's hint and scale, when given)."""
        fmt = self.format
        maker = self.maker
        rel = self.relative(cursor.path)
        # A fresh build leaves room for the zone to grow down a few lines (memory.anchored)
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
        recent_files = self.recent_files()

        # project summary: a grant fixed for the file (not what the other layers leave),
        # so it is the same at every position in the file and stays in the KV cache
        ps_budget = 0
        if settings.layer_project_summary and fmt.carries_project_summary:
            share = plan.shares.get("file_summary", 0)
            ps_budget = min(share // 2 if settings.layer_file_summary else share, plan.remaining)
            if ps_budget > 0:
                project = project_summary_layer(
                    self.retriever, maker, cursor, imports, recent_files, ps_budget
                )
                parts.project, parts.items["project_summary"] = project.pieces, project.items
        plan.granted["project_summary"] = ps_budget
        plan.spent["project_summary"] = cost(parts.project)

        # editing zone
        tree = self._tree(cursor)
        zone_budget = plan.grant("editing_zone")
        fresh = _Fresh(
            cursor=cursor,
            lines=lines,
            settings=settings,
            rel=rel,
            plan=plan,
            parts=parts,
            tree=tree,
            zone=Zone(0, 0, "", "", ""),
            zone_budget=zone_budget,
            zone_cost=0,
            scale=kept.scale if kept is not None else 1.0,
            entry=entry,
            imports=imports,
            recent=(set(recent_files) | set(cursor.open_files)) - {cursor.path},
            # other files' blocks leave out the standard library unless asked (known_code.py)
            skip=None if settings.layer_standard_library else self.known.is_stdlib,
        )
        hint = None
        if kept is not None:  # the last build's zone, kept while the file keeps its shape
            hint = kept.zone.hint(len(lines), zone_budget, settings.editing_zone_lines)
        zone = self._select_zone(fresh, 0, hint=hint)
        fresh.zone = zone
        fresh.scale = estimate_ratio(zone, lines, self.counter.count, estimate_tokens)
        zone_cost = fresh.zone_cost = zone_pieces(maker, parts, zone, rel)
        # The typed part of the cursor line changes at every keystroke. The layers
        # after the zone get what the zone left, so charge the typed part in steps
        # of TYPED_STEP tokens: their grants do not move with each character.
        typed_cost = cost(parts.typed)
        reserved = -(-(typed_cost + 1) // TYPED_STEP) * TYPED_STEP
        charged = zone_cost - typed_cost + max(typed_cost, reserved)
        plan.spend("editing_zone", min(charged, max(zone_cost, zone_budget)))
        return fresh

    def _select_zone(
        self, fresh: _Fresh, extra: int, *, hint: tuple[int, int] | None = None
    ) -> Zone:
        """Select the zone around the cursor within the zone's grant and ``extra`` tokens."""
        cursor = fresh.cursor
        return select_zone(
            fresh.tree,
            fresh.lines,
            cursor.line,
            cursor.column,
            max_lines=fresh.settings.editing_zone_lines,
            budget=fresh.zone_budget + extra,
            count=self.counter.count,
            fim=self.format.is_fim,
            estimate=estimate_tokens,
            scale=fresh.scale,
            hint=hint,
            reserve=TYPED_STEP,
        )

    def _demand(
        self,
        cursor: Cursor,
        lines: list[str],
        settings: ContextSettings,
        zone_start: int,
        imports: list[Import],
    ) -> list[Candidate]:
        """Return what the line at ``cursor`` asks of the related layer (retrieval/demand.py):
        pins, then with their settings on the receiver's class and the line's names (the
        standard library's files left out unless ``layerStandardLibrary``)."""
        if not (settings.related_pins or settings.related_line_names or settings.related_receivers):
            return []
        typed = lines[cursor.line][: cursor.column] if cursor.line < len(lines) else ""
        found = demanded(
            self.retriever,
            path=cursor.path,
            language=cursor.language,
            lines=lines,
            line=cursor.line,
            typed=typed,
            zone_before="\n".join(lines[zone_start : cursor.line]),
            imports=imports,
            pins=settings.related_pins,
            line_names_on=settings.related_line_names,
            receivers_on=settings.related_receivers,
        )
        if settings.layer_standard_library:
            return found
        return [c for c in found if c.reason == "pinned" or not self.known.is_stdlib(c.symbol.path)]

    def _unmet(
        self, cursor: Cursor, lines: list[str], settings: ContextSettings, kept: BuildNote
    ) -> bool:
        """True when the line now asks for a definition the kept build neither was asked for
        nor holds: a function in any form, a class in more than its compact signature (one
        already in the KV cache is not evaluated again)."""
        if not (settings.related_pins or settings.related_line_names or settings.related_receivers):
            return False
        entry = self.retriever.entry(cursor.path)
        imports = list(entry.imports) if entry is not None else []
        start = min(kept.line.span[0], cursor.line)
        found = self._demand(cursor, lines, settings, start, imports)
        held = {
            (item.source, item.symbol): item.reason.endswith(SIGNATURE_ONLY)
            for item in kept.line.parts.items.get("related", [])
        }

        def met(cand: Candidate) -> bool:
            compact = held.get((cand.source, cand.label))
            whole = compact is False or (compact and cand.symbol.kind not in CLASS_KINDS)
            return cand.key in kept.line.asked or bool(whole)

        return not all(met(cand) for cand in found)

    def _related(self, fresh: _Fresh) -> None:
        """Grant the related definitions, what the line asks for first."""
        settings, parts = fresh.settings, fresh.parts
        related_budget = fresh.plan.grant("related")
        if settings.layer_related:
            fresh.demand = self._demand(
                fresh.cursor, fresh.lines, settings, fresh.zone.start_line, fresh.imports
            )
        if settings.layer_related and related_budget > 0:
            related, fresh.chosen = related_layer(
                self.retriever,
                self.maker,
                fresh.cursor,
                fresh.zone,
                fresh.imports,
                fresh.recent,
                related_budget,
                settings.related_threshold,
                skip=fresh.skip,
                demand=fresh.demand,
                only_demand=settings.related_on_demand,
            )
            parts.related, parts.items["related"] = related.pieces, related.items
        fresh.plan.spend("related", cost(parts.related))

    def _similar(self, fresh: _Fresh, vectors: VectorLayer | None) -> None:
        """Grant the similar code (fused with the vector layer's hits when it is on)."""
        settings, parts, cursor = fresh.settings, fresh.parts, fresh.cursor
        similar_budget = fresh.plan.grant("similar")
        # relatedOnDemand: nothing cross-file the line did not ask for
        if settings.layer_similar and similar_budget > 0 and not settings.related_on_demand:
            similar = similar_layer(
                self.similar,
                self.retriever,
                self.maker,
                cursor,
                fresh.zone,
                fresh.recent,
                fresh.chosen,
                similar_budget,
                settings.similar_threshold,
                vectors=vectors.hybrid(cursor.path, settings) if vectors is not None else None,
                skip=fresh.skip,
            )
            parts.similar, parts.items["similar"] = similar.pieces, similar.items
        fresh.plan.spend("similar", cost(parts.similar))

    def _file_summary(self, fresh: _Fresh, zone: Zone) -> None:
        """Grant the file summary (the outline of what ``zone`` leaves out)."""
        settings, parts = fresh.settings, fresh.parts
        fs_budget = fresh.plan.grant("file_summary")
        if settings.layer_file_summary and fs_budget > 0:
            outline = self.outline.layer(
                self.maker,
                fresh.cursor,
                fresh.tree,
                fresh.lines,
                zone,
                fresh.entry,
                fs_budget,
                fresh.rel,
            )
            parts.file_summary, parts.items["file_summary"] = outline.pieces, outline.items
        fresh.plan.spend("file_summary", cost(parts.file_summary))

    def _whole_file_zone(self, fresh: _Fresh, zone: Zone, growth: int) -> Zone:
        """Return the zone grown to the whole file when the file fits what is left.

        The zone's group cap keeps low-value material out of the prompt, but the file's
        own code is the most useful text there is: a small file is shown whole rather
        than cut to the zone's share while the budget stands unused. The zone may take
        what every layer left, the outline's tokens (a whole file needs no outline) and
        the ``growth`` room a fresh build keeps for typing (a zone that is the whole file
        does not need it: its next build starts at the same line). Anything short of the
        whole file is undone: a larger prompt costs prefill time at every fresh build,
        and the acceptance replay lost keystrokes to it.
        """
        plan, parts = fresh.plan, fresh.parts
        kept = (dict(plan.spent), dict(plan.granted), plan.carry, plan.total)
        plan.total += growth
        plan.spent["file_summary"] = 0
        # a cheap estimate first: a large file is not selected again
        rest = fresh.lines[: zone.start_line] + fresh.lines[zone.end_line + 1 :]
        if plan.remaining > TYPED_STEP and estimate_tokens("\n".join(rest)) * fresh.scale <= (
            plan.remaining
        ):
            base = plan.granted.get("editing_zone", fresh.zone_budget) - fresh.zone_budget
            wider, _ = widen_zone(
                plan,
                zone,
                cost(parts.before + parts.after + parts.typed),
                functools.partial(self._select_beyond, fresh, base),
                maker=self.maker,
                parts=parts,
                rel=fresh.rel,
                step=TYPED_STEP,
                room=plan.remaining,
            )
            if (wider.start_line, wider.end_line) != (zone.start_line, zone.end_line):
                outside = fresh.lines[: wider.start_line] + fresh.lines[wider.end_line + 1 :]
                if not any(text.strip() for text in outside):  # whole: no outline
                    parts.file_summary, parts.items["file_summary"] = [], []
                    return wider
                # widen_zone set the wider zone's pieces: back to the zone's
                zone_pieces(self.maker, parts, zone, fresh.rel)
        plan.spent, plan.granted, plan.carry, plan.total = kept
        return zone

    def _select_beyond(self, fresh: _Fresh, base: int, extra: int) -> Zone:
        """Select the zone with ``extra`` tokens beyond the ``base`` it was already granted."""
        return self._select_zone(fresh, base + extra)

    def _anchored(
        self, fresh: _Fresh, kept: BuildNote | None, inputs: tuple[object, ...], total: int
    ) -> tuple[AssembledPrompt, Parts, Zone, int | None] | None:
        """Return the prompt that keeps the kept build's head and zone start
        (:func:`~lsp_assist.context.memory.anchored`), its parts, zone and middle's first
        line; None when nothing is kept or the grown zone would pass the budget."""
        if kept is None:
            return None
        cursor, lines = fresh.cursor, fresh.lines
        found = anchored(
            kept,
            cursor,
            lines,
            fresh.parts,
            inputs,
            max_lines=fresh.settings.editing_zone_lines,
            fim=self.format.is_fim,
        )
        if found is None:
            return None
        parts, zone, middle_from = found
        zone_pieces(self.maker, parts, zone, fresh.rel)
        if cost(order(self.format, parts)) > total:
            return None  # the zone outgrew the budget: this line starts a new block
        prompt = self._assemble(lines, cursor, parts, fresh.plan, total, zone)
        return prompt, parts, zone, middle_from

    def _reuse_line(
        self,
        cursor: Cursor,
        lines: list[str],
        kept: BuildNote,
        key: tuple[object, ...],
        total: int,
        rel: str,
    ) -> AssembledPrompt | None:
        """Return the prompt with the line's first head and the zone's lines, if it fits."""
        found = kept_line(kept, cursor, lines, key, fim=self.format.is_fim)
        if found is None:
            return None
        parts, plan, zone = found
        zone_pieces(self.maker, parts, zone, rel)
        if cost(order(self.format, parts)) > total:
            return None  # the line outgrew what its zone reserved: build afresh
        prompt = self._assemble(lines, cursor, parts, plan, total, zone)
        prompt.note = kept  # nothing new to keep: the line's first build stays
        return prompt

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


def explain(prompt: AssembledPrompt) -> str:
    """Return a human-readable, layer-by-layer account of a prompt (``prompt.explain()``)."""
    return prompt.explain()
