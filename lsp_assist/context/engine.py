"""The context engine: builds the prompt for one cursor position, layered and budgeted.

``ContextEngine.build`` assembles, most stable first and most volatile last:
instructions, project summary, related definitions, similar code, file summary, and
the editing zone, with the typed part of the cursor line as the very last piece, so
that typing within a line changes only the tail of the token list and the backend
reuses the rest from its KV cache. Every piece of text is tokenized on its own with
the model's vocabulary (cached per chunk) and the prompt is the concatenation, so
the budget is counted exactly and never exceeded.

The ``baseline`` strategy stuffs the whole current file and the other open files up
to the model's context, for comparison (the mission's baseline row).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from tree_sitter import Tree

from lsp_assist.backends.base import ModelInfo
from lsp_assist.config import ContextSettings
from lsp_assist.context.budget import PRIORITY, PROMPT_ORDER, BudgetPlan
from lsp_assist.context.formats import PromptFormat, comment_prefix, detect_format
from lsp_assist.context.model import AssembledPrompt, Cursor, Layer, LayerItem, TokenCounter
from lsp_assist.context.retrieval import Candidate, Retriever, partial_identifier
from lsp_assist.context.similar import SimilarCode
from lsp_assist.context.summaries import (
    SummaryEntry,
    file_summary,
    project_line,
    select_entries,
)
from lsp_assist.context.syntax import TreeCache
from lsp_assist.context.tokens import CachedCounter
from lsp_assist.context.zone import Zone, estimate_ratio, select_zone, zone_from_span
from lsp_assist.errors import ContextError, IndexError_
from lsp_assist.index.model import FileEntry, Import, IndexLookup

log = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
"""The context the baseline fills when the model's training context is larger."""

MAX_PROJECT_LINES = 12


def estimate_tokens(text: str) -> int:
    """Return a cheap, usually high estimate of the tokens of ``text`` (3 chars a token)."""
    return len(text) // 3 + 1


TYPED_STEP = 32
"""The typed part of the cursor line is charged to the budget in steps of this many tokens."""

_REFERENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*(?:\(|\.|::|->)(?:\s*[A-Za-z_][A-Za-z0-9_]*)?")


@dataclass(slots=True)
class _Piece:
    layer: str
    text: str
    ids: tuple[int, ...]
    volatile: bool = False


@dataclass(slots=True)
class _Parts:
    """The selected pieces of each layer, before they are laid out in format order."""

    head: list[_Piece] = field(default_factory=list)
    project: list[_Piece] = field(default_factory=list)
    related: list[_Piece] = field(default_factory=list)
    similar: list[_Piece] = field(default_factory=list)
    file_header: list[_Piece] = field(default_factory=list)
    file_summary: list[_Piece] = field(default_factory=list)
    before: list[_Piece] = field(default_factory=list)
    after: list[_Piece] = field(default_factory=list)
    typed: list[_Piece] = field(default_factory=list)
    pre: list[_Piece] = field(default_factory=list)
    suf: list[_Piece] = field(default_factory=list)
    mid: list[_Piece] = field(default_factory=list)
    items: dict[str, list[LayerItem]] = field(default_factory=dict)


@dataclass(slots=True)
class _LineState:
    """A file's last layered build, reused while the user types within its cursor line."""

    key: tuple[object, ...]
    span: tuple[int, int]
    parts: _Parts
    plan: BudgetPlan


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
        self.trees = TreeCache()
        self.retriever = Retriever(index, self.relative)
        self.similar = SimilarCode()
        self._recent: OrderedDict[Path, None] = OrderedDict()
        self._zone_memo: dict[Path, tuple[int, int, int, int, int]] = {}
        self._summary_memo: dict[Path, tuple[tuple[int, int], int, list[SummaryEntry]]] = {}
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

    def _summary_entries(
        self, cursor: Cursor, tree: Tree | None, lines: list[str], zone: Zone
    ) -> list[SummaryEntry]:
        """Return the file summary, reused while the text outside the zone is unchanged.

        A half-typed line inside the zone can make the parser's error recovery swallow
        later definitions; reusing the summary keeps the prompt stable meanwhile.
        """
        key = (zone.start_line, zone.end_line)
        outside = hash(
            (tuple(lines[: zone.start_line]), tuple(lines[zone.end_line + 1 :]), len(lines))
        )
        memo = self._summary_memo.get(cursor.path)
        if memo is not None and memo[0] == key and memo[1] == outside:
            return memo[2]
        entries = file_summary(tree, cursor.text, lines, cursor.language, key)
        if len(self._summary_memo) > 64:
            self._summary_memo.clear()
        self._summary_memo[cursor.path] = (key, outside, entries)
        return entries

    # -- helpers ---------------------------------------------------------------------

    def _piece(self, layer: str, text: str, *, special: bool = False) -> _Piece:
        ids = self.counter.special(text) if special else self.counter.tokens(text)
        return _Piece(layer=layer, text=text, ids=ids)

    def _pieces(self, layer: str, parts: Iterable[tuple[str, bool]]) -> list[_Piece]:
        return [self._piece(layer, text, special=sp) for text, sp in parts]

    def _id_piece(self, layer: str, token: int | None) -> list[_Piece]:
        if token is None:
            return []
        return [_Piece(layer=layer, text=self.format.text_of(token), ids=(token,))]

    @staticmethod
    def _cost(pieces: Iterable[_Piece]) -> int:
        return sum(len(p.ids) for p in pieces)

    def _source_header(self, layer: str, source: str, caption: str, language: str) -> list[_Piece]:
        fmt = self.format
        if fmt.has_repo_tokens:
            return self._pieces(layer, fmt.file_header(source))
        c = comment_prefix(language)
        return [self._piece(layer, f"{c} {caption}{source}\n")]

    def _file_entry(self, path: Path) -> FileEntry | None:
        try:
            return self.index.file(path)
        except IndexError_:  # an index failure must not break the prompt
            log.debug("index.file failed for %s", path, exc_info=True)
            return None

    # -- build -----------------------------------------------------------------------

    def build(
        self, cursor: Cursor, *, strategy: str | None = None, budget: int | None = None
    ) -> AssembledPrompt:
        """Return the prompt for ``cursor`` (deterministic: same state, same prompt)."""
        start = time.perf_counter()
        with self._lock:
            settings = self.settings
            chosen = strategy or settings.strategy
            self.retriever.reset()
            if self.index.is_denied(cursor.path):
                raise ContextError(f"{cursor.path} is a denied (secret) file: no prompt is built")
            if chosen == "baseline":
                prompt = self._baseline(cursor, budget)
            elif chosen == "layered":
                prompt = self._layered(cursor, settings, budget or settings.context_budget)
            else:
                raise ContextError(f"unknown context strategy {chosen!r}")
        prompt.build_ms = (time.perf_counter() - start) * 1000.0
        return prompt

    def _head(self, cursor: Cursor, rel: str, *, instructions: bool) -> list[_Piece]:
        fmt = self.format
        head = self._id_piece("instructions", fmt.bos_id)
        if fmt.has_repo_tokens and fmt.repo_name_token:
            head += self._pieces("instructions", fmt.repo_header(self.repo_name or "repo"))
        if instructions and not fmt.has_repo_tokens:
            c = comment_prefix(cursor.language)
            head.append(
                self._piece("instructions", f"{c} Language: {cursor.language}. File: {rel}\n")
            )
        return head

    def _format_parts(self, cursor: Cursor, rel: str, total: int) -> tuple[_Parts, int]:
        """Return the format's fixed pieces (head, file header, FIM ids) and their cost."""
        fmt = self.format
        parts = _Parts()
        parts.head = self._head(cursor, rel, instructions=True)
        if fmt.has_repo_tokens:
            parts.file_header = self._pieces("instructions", fmt.file_header(rel))
        if fmt.is_fim:
            parts.pre = self._id_piece("instructions", fmt.fim_prefix_id)
            parts.suf = self._id_piece("instructions", fmt.fim_suffix_id)
            parts.mid = self._id_piece("instructions", fmt.fim_middle_id)
        overhead = self._cost(parts.head + parts.file_header + parts.pre + parts.suf + parts.mid)
        if overhead > total:
            raise ContextError(f"budget {total} is smaller than the format overhead ({overhead})")
        return parts, overhead

    def _layered(self, cursor: Cursor, settings: ContextSettings, total: int) -> AssembledPrompt:
        fmt = self.format
        rel = self.relative(cursor.path)
        lines = cursor.text.split("\n")
        line = max(0, min(cursor.line, len(lines) - 1))
        col = max(0, min(cursor.column, len(lines[line])))

        # While the user types within one line, everything before the editing zone is
        # kept as it was at the line's first build: only the zone's tail changes.
        key = self._line_key(cursor, lines, line, settings, total)
        state = self._line_states.get(cursor.path)
        if state is not None and state.key == key:
            reused = self._reuse_line(cursor, lines, line, col, state, total, rel)
            if reused is not None:
                return reused

        plan = BudgetPlan.split(total, settings)
        c = comment_prefix(cursor.language)

        # instructions: the fixed format overhead
        parts, overhead = self._format_parts(cursor, rel, total)
        plan.grant("instructions")
        plan.spend("instructions", overhead)
        parts.items["instructions"] = [
            LayerItem(source=rel, symbol=fmt.family, reason=f"{fmt.name} format", tokens=overhead)
        ]

        entry = self._file_entry(cursor.path)
        imports = list(entry.imports) if entry is not None else []

        # project summary: a grant fixed for the file (not what the other layers leave),
        # so it is the same at every position in the file and stays in the KV cache
        ps_budget = 0
        if settings.layer_project_summary:
            share = plan.shares.get("file_summary", 0)
            ps_budget = min(share // 2 if settings.layer_file_summary else share, plan.remaining)
            if ps_budget > 0:
                self._project_summary(cursor, imports, ps_budget, parts, c)
        plan.granted["project_summary"] = ps_budget
        plan.spent["project_summary"] = self._cost(parts.project)

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
        self._zone_memo[cursor.path] = (
            len(lines),
            zone_budget,
            settings.editing_zone_lines,
            zone.start_line,
            max(zone.end_line, line),
        )
        zone_cost = self._zone_pieces(parts, zone, rel)
        # The typed part of the cursor line changes at every keystroke. The layers
        # after the zone get what the zone left, so charge the typed part in steps
        # of TYPED_STEP tokens: their grants do not move with each character.
        typed_cost = self._cost(parts.typed)
        reserved = -(-(typed_cost + 1) // TYPED_STEP) * TYPED_STEP
        charged = zone_cost - typed_cost + max(typed_cost, reserved)
        plan.spend("editing_zone", min(charged, max(zone_cost, zone_budget)))

        recent = set(self.recent_files()) | set(cursor.open_files)
        recent.discard(cursor.path)

        # related definitions
        chosen: list[Candidate] = []
        related_budget = plan.grant("related")
        if settings.layer_related and related_budget > 0:
            chosen = self._related(cursor, zone, imports, recent, related_budget, settings, parts)
        plan.spend("related", self._cost(parts.related))

        # similar code
        similar_budget = plan.grant("similar")
        if settings.layer_similar and similar_budget > 0:
            self._similar(cursor, zone, recent, chosen, similar_budget, settings, parts)
        plan.spend("similar", self._cost(parts.similar))

        # file summary
        fs_budget = plan.grant("file_summary")
        if settings.layer_file_summary and fs_budget > 0:
            self._file_summary(cursor, tree, lines, zone, entry, fs_budget, parts, c, rel)
        plan.spend("file_summary", self._cost(parts.file_summary))

        prompt = self._assemble(cursor, parts, plan, "layered", total, zone)
        if len(self._line_states) > 64:
            self._line_states.clear()
        self._line_states[cursor.path] = _LineState(
            key=key, span=(zone.start_line, zone.end_line), parts=parts, plan=plan
        )
        return prompt

    def _line_key(
        self, cursor: Cursor, lines: list[str], line: int, settings: ContextSettings, total: int
    ) -> tuple[object, ...]:
        """Return what must not change for a build to reuse the line's first build."""
        begin = sum(map(len, lines[:line])) + line
        finish = begin + len(lines[line])
        return (
            line,
            len(lines),
            hash(cursor.text[:begin]),
            hash(cursor.text[finish:]),
            total,
            settings,
            cursor.language,
            cursor.open_files,
            tuple(reversed(self.recent_files())),
        )

    def _zone_pieces(self, parts: _Parts, zone: Zone, rel: str) -> int:
        """Set the zone's pieces and item in ``parts``; return their cost."""
        parts.before = [self._piece("editing_zone", zone.before)] if zone.before else []
        parts.after = [self._piece("editing_zone", zone.after)] if zone.after else []
        parts.typed = [self._piece("editing_zone", zone.typed)] if zone.typed else []
        for piece in parts.typed:
            piece.volatile = True
        zone_cost = self._cost(parts.before + parts.after + parts.typed)
        parts.items["editing_zone"] = [
            LayerItem(
                source=rel,
                reason=f"lines {zone.start_line + 1}-{zone.end_line + 1}",
                tokens=zone_cost,
            )
        ]
        return zone_cost

    def _reuse_line(
        self,
        cursor: Cursor,
        lines: list[str],
        line: int,
        col: int,
        state: _LineState,
        total: int,
        rel: str,
    ) -> AssembledPrompt | None:
        """Return the prompt with the line's first head and the zone's lines, if it fits."""
        zone = zone_from_span(lines, *state.span, line, col, fim=self.format.is_fim)
        parts = replace(state.parts, items=dict(state.parts.items))
        self._zone_pieces(parts, zone, rel)
        if self._cost(self._order(parts)) > total:
            return None  # the line outgrew what its zone reserved: build afresh
        return self._assemble(cursor, parts, state.plan, "layered", total, zone)

    # -- layers -----------------------------------------------------------------------

    def _related(
        self,
        cursor: Cursor,
        zone: Zone,
        imports: list[Import],
        recent: set[Path],
        budget: int,
        settings: ContextSettings,
        parts: _Parts,
    ) -> list[Candidate]:
        # On the cursor line only finished calls and attribute chains count (``name(``,
        # ``name.``): every other word being typed would reshuffle the layer.
        typed_refs = " ".join(_REFERENCE.findall(zone.typed))
        near_lines = (zone.before.split("\n")[-3:]) if zone.before else []
        near = "\n".join([*near_lines, typed_refs, zone.after.split("\n", 1)[0]])
        zone_text = zone.before + typed_refs + "\n" + zone.after
        candidates = self.retriever.candidates(
            path=cursor.path,
            language=cursor.language,
            zone_text=zone_text,
            near_text=near,
            typed_partial=partial_identifier(zone.typed),
            imports=imports,
            recent=recent,
            threshold=settings.related_threshold,
            text=cursor.text,
            cursor_line=cursor.line,
            cursor_text=typed_refs,
        )
        chosen = self.retriever.select(
            candidates,
            budget,
            self.counter.count,
            lambda source: self._cost(
                self._source_header("related", source, "From ", cursor.language)
            ),
        )
        items: list[LayerItem] = []
        current = None
        for pick in chosen:
            cand, text = pick.candidate, pick.text
            if cand.source != current:
                parts.related += self._source_header(
                    "related", cand.source, "From ", cursor.language
                )
                current = cand.source
            piece = self._piece("related", text)
            parts.related.append(piece)
            sym = cand.symbol
            items.append(
                LayerItem(
                    source=cand.source,
                    symbol=f"{sym.parent}.{sym.name}" if sym.parent else sym.name,
                    score=cand.score,
                    reason=cand.reason + pick.note,
                    tokens=len(piece.ids),
                    text=text,
                )
            )
        parts.items["related"] = items
        return [pick.candidate for pick in chosen]

    def _similar(
        self,
        cursor: Cursor,
        zone: Zone,
        recent: set[Path],
        related: list[Candidate],
        budget: int,
        settings: ContextSettings,
        parts: _Parts,
    ) -> None:
        files: list[tuple[Path, str]] = []
        for path in sorted(recent, key=str):
            if path == cursor.path or self.retriever.denied(path):
                continue
            text = self.retriever.text_of(path)
            if text:
                files.append((path, text))
        if not files:
            parts.items["similar"] = []
            return

        def exclude(path: Path, a: int, b: int) -> bool:
            return any(
                c.symbol.path == path and not (b < c.symbol.start_line or a > c.symbol.end_line)
                for c in related
            )

        hits = self.similar.search(
            zone.before + zone.after,
            files,
            threshold=settings.similar_threshold,
            relative=self.relative,
            exclude=exclude,
        )
        spent = 0
        kept = []
        for hit in hits:
            caption = (
                f"Similar code (lines {hit.chunk.start_line + 1}-{hit.chunk.end_line + 1}) in "
            )
            pieces = self._source_header("similar", hit.source, caption, cursor.language)
            pieces.append(self._piece("similar", hit.chunk.text + "\n"))
            cost = self._cost(pieces)
            if spent + cost <= budget:
                kept.append((hit, pieces))
                spent += cost
        kept.sort(key=lambda pair: (pair[0].source, pair[0].chunk.start_line))
        items = []
        for hit, pieces in kept:
            parts.similar += pieces
            items.append(
                LayerItem(
                    source=hit.source,
                    symbol=f"lines {hit.chunk.start_line + 1}-{hit.chunk.end_line + 1}",
                    score=hit.score,
                    reason="identifier overlap (Jaccard)",
                    tokens=self._cost(pieces),
                    text=hit.chunk.text,
                )
            )
        parts.items["similar"] = items

    def _file_summary(
        self,
        cursor: Cursor,
        tree: Tree | None,
        lines: list[str],
        zone: Zone,
        entry: FileEntry | None,
        budget: int,
        parts: _Parts,
        c: str,
        rel: str,
    ) -> None:
        entries = self._summary_entries(cursor, tree, lines, zone)
        fixed: list[_Piece] = []
        if not self.format.has_repo_tokens:
            fixed.append(self._piece("file_summary", f"{c} Outline of {rel} (bodies elided):\n"))
        purpose = entry.summary.strip().split("\n", 1)[0] if entry is not None else ""
        if purpose:
            fixed.append(self._piece("file_summary", f"{c} {purpose}\n"))
        closing = [self._piece("file_summary", f"{c} ...\n")]
        fixed_cost = self._cost(fixed) + self._cost(closing)
        if not entries or fixed_cost >= budget:
            parts.items["file_summary"] = []
            return
        # one chunk for the whole outline: sized with cheap estimates, then counted
        # exactly (a tokenizer call per entry is slow with large vocabularies)
        target = budget - fixed_cost
        span = (zone.start_line, zone.end_line)
        costs = [estimate_tokens(e.text) for e in entries]
        est_budget = target
        best: tuple[list[int], _Piece] | None = None
        for _ in range(4):
            keep = select_entries(entries, costs, span, est_budget)
            if not keep:
                break
            piece = self._piece("file_summary", "".join(entries[i].text for i in keep))
            exact = len(piece.ids)
            if exact <= target:
                if best is None or exact > len(best[1].ids):
                    best = (keep, piece)
                if exact >= target * 0.9 or len(keep) == len(entries):
                    break
            est_budget = max(1, int(est_budget * target / max(1, exact)) - (exact > target))
        if best is None:
            parts.items["file_summary"] = []
            return
        keep, piece = best
        parts.file_summary = [*fixed, piece, *closing]
        total_chars = max(1, len(piece.text))
        parts.items["file_summary"] = [
            LayerItem(
                source=rel,
                symbol=entries[i].symbol,
                reason=f"line {entries[i].start_line + 1}",
                tokens=round(len(piece.ids) * len(entries[i].text) / total_chars),
                text=entries[i].text,
            )
            for i in keep
            if not entries[i].closing
        ]

    def _project_summary(
        self, cursor: Cursor, imports: list[Import], budget: int, parts: _Parts, c: str
    ) -> None:
        files, _ = self.retriever.imported(cursor.path, imports)
        groups: list[tuple[str, list[Path]]] = [("imported", list(files))]
        try:
            groups.append(("imports this file", list(self.index.importers_of(cursor.path))))
        except IndexError_:
            log.debug("importers_of failed", exc_info=True)
        groups.append(("recently opened", [*self.recent_files(), *cursor.open_files]))
        seen: set[Path] = {cursor.path}
        lines: list[tuple[str, str]] = []
        for reason, paths in groups:
            for path in sorted(set(paths), key=lambda p: self.relative(p)):
                if path in seen or self.retriever.denied(path):
                    continue
                seen.add(path)
                rel = self.relative(path)
                lines.append((reason, project_line(rel, self._file_entry(path))))
                if len(lines) >= MAX_PROJECT_LINES:
                    break
        if not lines:
            parts.items["project_summary"] = []
            return
        header = self._piece("project_summary", f"{c} Related files:\n")
        spent = len(header.ids)
        chosen: list[tuple[str, str, _Piece]] = []
        for reason, text in lines:
            piece = self._piece("project_summary", f"{c} {text}\n")
            if spent + len(piece.ids) <= budget:
                chosen.append((reason, text, piece))
                spent += len(piece.ids)
        if not chosen:
            parts.items["project_summary"] = []
            return
        parts.project = [header] + [p for _, _, p in chosen]
        parts.items["project_summary"] = [
            LayerItem(
                source=text.split(":", 1)[0].split(" (", 1)[0],
                reason=reason,
                tokens=len(p.ids),
                text=text,
            )
            for reason, text, p in chosen
        ]

    # -- layout -----------------------------------------------------------------------

    def _order(self, parts: _Parts) -> list[_Piece]:
        fmt = self.format
        context = parts.project + parts.related + parts.similar
        if not fmt.is_fim:
            return (
                parts.head
                + context
                + parts.file_header
                + parts.file_summary
                + parts.before
                + parts.typed
            )
        if fmt.order == "spm":
            return (
                parts.head[:1]
                + parts.suf
                + parts.after
                + parts.pre
                + parts.head[1:]
                + context
                + parts.file_summary
                + parts.before
                + parts.typed
            )
        if fmt.has_repo_tokens:
            return (
                parts.head
                + context
                + parts.file_header
                + parts.pre
                + parts.file_summary
                + parts.before
                + parts.suf
                + parts.after
                + parts.mid
                + parts.typed
            )
        bos = parts.head[:1] if fmt.bos_id is not None else []
        rest = parts.head[1:] if fmt.bos_id is not None else parts.head
        return (
            bos
            + parts.pre
            + rest
            + context
            + parts.file_summary
            + parts.before
            + parts.suf
            + parts.after
            + parts.mid
            + parts.typed
        )

    def _assemble(
        self,
        cursor: Cursor,
        parts: _Parts,
        plan: BudgetPlan,
        strategy: str,
        total: int,
        zone: Zone | None,
    ) -> AssembledPrompt:
        pieces = self._order(parts)
        count = self._cost(pieces)
        # defensive: never exceed the budget, dropping the lowest priority first
        for layer in reversed(PRIORITY[1:]):
            if count <= total:
                break
            for attr in ("project", "file_summary", "similar", "related"):
                if getattr(parts, attr) and getattr(parts, attr)[0].layer == layer:
                    setattr(parts, attr, [])
            parts.items[layer] = []
            pieces = self._order(parts)
            count = self._cost(pieces)
        if count > total:
            raise ContextError(f"prompt of {count} tokens does not fit the budget of {total}")
        tokens: list[int] = []
        text_parts: list[str] = []
        stable = 0
        by_layer: dict[str, list[_Piece]] = {}
        for piece in pieces:
            if not piece.volatile:
                stable = len(tokens) + len(piece.ids)
            tokens.extend(piece.ids)
            text_parts.append(piece.text)
            by_layer.setdefault(piece.layer, []).append(piece)
        if pieces and pieces[-1].volatile:
            stable = len(tokens) - len(pieces[-1].ids)
        names = (
            PROMPT_ORDER
            if strategy == "layered"
            else ("instructions", "open_files", "editing_zone")
        )
        layers = []
        for name in names:
            own = by_layer.get(name, [])
            layers.append(
                Layer(
                    name=name,
                    tokens=self._cost(own),
                    budget=max(0, plan.granted.get(name, 0)),
                    items=parts.items.get(name, []),
                    text="".join(p.text for p in own),
                )
            )
        lines = cursor.text.split("\n")
        line = max(0, min(cursor.line, len(lines) - 1))
        col = max(0, min(cursor.column, len(lines[line])))
        last = max(zone.end_line if zone is not None else line, line + 10)
        suffix = lines[line][col:] + "".join(f"\n{x}" for x in lines[line + 1 : last + 1])
        return AssembledPrompt(
            strategy=strategy,
            budget=total,
            format=self.format.name,
            layers=layers,
            tokens=tokens,
            prompt="".join(text_parts),
            stable_prefix_len=stable,
            suffix=suffix,
        )

    # -- baseline --------------------------------------------------------------------

    def _baseline_budget(self, budget: int | None) -> int:
        if budget:
            return budget
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

    def _baseline(self, cursor: Cursor, budget: int | None) -> AssembledPrompt:
        fmt = self.format
        total = self._baseline_budget(budget)
        rel = self.relative(cursor.path)
        lines = cursor.text.split("\n")
        line = max(0, min(cursor.line, len(lines) - 1))
        col = max(0, min(cursor.column, len(lines[line])))
        plan = BudgetPlan(total=total, shares={"instructions": 0, "editing_zone": total})
        parts, overhead = self._format_parts(cursor, rel, total)
        plan.spend("instructions", overhead)
        left = total - overhead
        typed = lines[line][:col]
        typed_piece = self._piece("editing_zone", typed) if typed else None
        if typed_piece is not None:
            typed_piece.volatile = True
            left -= len(typed_piece.ids)
        before_lines = lines[:line]
        after_text = ""
        if fmt.is_fim:
            after_text = lines[line][col:] + "".join(f"\n{x}" for x in lines[line + 1 :])
            after_text = self._head_fit(after_text, max(0, left // 4))
        after_piece = self._piece("editing_zone", after_text) if after_text else None
        if after_piece is not None:
            left -= len(after_piece.ids)
        before = self._tail_fit(before_lines, max(0, left))
        before_piece = self._piece("editing_zone", before) if before else None
        if before_piece is not None:
            left -= len(before_piece.ids)
        parts.before = [before_piece] if before_piece else []
        parts.after = [after_piece] if after_piece else []
        parts.typed = [typed_piece] if typed_piece else []
        zone_cost = self._cost(parts.before + parts.after + parts.typed)
        parts.items["editing_zone"] = [
            LayerItem(source=rel, reason="current file", tokens=zone_cost)
        ]
        # other open files, most recently used first, whole while they fit
        items: list[LayerItem] = []
        for path in cursor.open_files:
            if path == cursor.path or self.retriever.denied(path) or left <= 0:
                continue
            text = self.index.text_of(path)
            if not text:
                continue
            src = self.relative(path)
            hdr = self._source_header("open_files", src, "", cursor.language)
            room = left - self._cost(hdr)
            if room <= 8:
                break
            body = self._head_fit(text if text.endswith("\n") else text + "\n", room)
            if not body:
                continue
            piece = self._piece("open_files", body)
            parts.related += [*hdr, piece]
            cost = self._cost(hdr) + len(piece.ids)
            left -= cost
            items.append(LayerItem(source=src, reason="open file", tokens=cost))
        parts.items["open_files"] = items
        parts.items["instructions"] = [
            LayerItem(source=rel, symbol=fmt.family, reason=f"{fmt.name} format", tokens=overhead)
        ]
        plan.granted = {"instructions": overhead, "open_files": total, "editing_zone": total}
        return self._assemble(cursor, parts, plan, "baseline", total, None)


def explain(prompt: AssembledPrompt) -> str:
    """Return a human-readable, layer-by-layer account of an assembled prompt."""
    out = [
        f"strategy {prompt.strategy}, format {prompt.format}, "
        f"{prompt.total_tokens}/{prompt.budget} tokens, "
        f"{prompt.stable_prefix_len} stable, built in {prompt.build_ms:.1f} ms",
    ]
    for layer in prompt.layers:
        out.append("")
        out.append(f"== {layer.name}: {layer.tokens} tokens (grant {layer.budget}) ==")
        for item in layer.items:
            what = f"{item.source}"
            if item.symbol:
                what += f" {item.symbol}"
            out.append(f"  - {what} [score {item.score:.2f}; {item.reason}; {item.tokens} tok]")
        if layer.text:
            out.append(layer.text.rstrip("\n"))
    return "\n".join(out) + "\n"
