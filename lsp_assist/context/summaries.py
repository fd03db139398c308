"""File and project summaries: the current file as a symbol map, related files as one line.

The file summary is read from the current buffer's own syntax tree (never a stale
index entry): imports, class and function signatures with elided bodies, and short
top-level constants and declarations, in file order, leaving out what the editing
zone already shows. Each entry is one chunk; the budget keeps the entries nearest
the zone and drops the farthest. The project summary is one line per related file
from the index (its one-line purpose and the names it exposes). :class:`FileOutline`
and :func:`project_summary_layer` render them as the prompt's ``file_summary`` and
``project_summary`` layers.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

from tree_sitter import Node, Tree

from lsp_assist.config import Bounded
from lsp_assist.context.budget import estimate_tokens
from lsp_assist.context.formats import comment_prefix
from lsp_assist.context.layout import Piece, PieceMaker, Rendered, cost
from lsp_assist.context.model import Cursor, LayerItem
from lsp_assist.context.retrieval import Retriever
from lsp_assist.context.zone import Zone, node_lines
from lsp_assist.errors import IndexError_
from lsp_assist.index.model import FileEntry, Import

log = logging.getLogger(__name__)

MAX_PROJECT_LINES = 12
"""Related files named per group of the project summary."""

_IMPORTS = frozenset(
    {
        "import_statement",
        "import_from_statement",
        "future_import_statement",
        "import_declaration",
        "package_clause",
        "package_declaration",
        "use_declaration",
        "extern_crate_declaration",
        "preproc_include",
        "using_declaration",
    }
)

_CONTAINERS = frozenset(
    {
        "class_definition",
        "class_declaration",
        "abstract_class_declaration",
        "class",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "impl_item",
        "trait_item",
        "mod_item",
        "class_specifier",
        "struct_specifier",
        "namespace_definition",
        "struct_item",
        "enum_item",
        "union_item",
        "linkage_specification",
    }
)

_WRAPPERS = frozenset(
    {
        "decorated_definition",
        "export_statement",
        "template_declaration",
        "ambient_declaration",
        "lexical_declaration",
        "variable_declaration",
        "variable_declarator",
    }
)

_TRANSPARENT = frozenset({"preproc_ifdef", "preproc_if", "preproc_else", "preproc_elif"})

_BODY_TYPES = frozenset(
    {
        "block",
        "statement_block",
        "compound_statement",
        "class_body",
        "interface_body",
        "enum_body",
        "declaration_list",
        "field_declaration_list",
        "constructor_body",
    }
)

_SKIP = frozenset(
    {
        "comment",
        "line_comment",
        "block_comment",
        "if_statement",
        "for_statement",
        "while_statement",
        "try_statement",
        "with_statement",
        "expression_statement",
        "ERROR",
    }
)

_DECLARATION_SUFFIXES = (
    "declaration",
    "definition",
    "_item",
    "_def",
    "_spec",
    "signature",
    "_specifier",
)

_UPPER = re.compile(r"^\s*(?:export\s+)?(?:pub\s+)?(?:const\s+|static\s+)?[A-Z_][A-Z0-9_]{2,}\b")
MAX_SIGNATURE_LINES = 6
MAX_LINE = 160


@dataclass(slots=True)
class SummaryEntry:
    """One line (or a few) of the file summary."""

    start_line: int
    text: str
    symbol: str = ""
    parent: int | None = None
    """Index of the container entry this one belongs to (it must be kept with it)."""
    closing: bool = False
    """A container's closing line, kept exactly when its header is."""


def _line_start_text(lines: list[str], row: int, col_bytes: int) -> str:
    line = lines[row] if row < len(lines) else ""
    prefix = line.encode("utf-8")[:col_bytes].decode("utf-8", errors="ignore")
    return prefix if not prefix.strip() else ""


def _clip(text: str) -> str:
    out = []
    for raw in text.split("\n")[:MAX_SIGNATURE_LINES]:
        out.append(raw if len(raw) <= MAX_LINE else raw[: MAX_LINE - 4] + " ...")
    return "\n".join(out).rstrip()


def _name_of(node: Node, data: bytes) -> str:
    name = node.child_by_field_name("name")
    if name is None:
        for child in node.named_children:
            if child.type in ("identifier", "type_identifier", "field_identifier"):
                name = child
                break
    if name is None:
        return ""
    return data[name.start_byte : name.end_byte].decode("utf-8", errors="replace")


def _find_body(node: Node) -> Node | None:
    body = node.child_by_field_name("body")
    if body is not None and body.type in _BODY_TYPES:
        return body
    if body is not None and body.named_child_count > 0 and body.type not in ("expression",):
        return body
    return None


class _Builder:
    def __init__(self, data: bytes, lines: list[str], zone: tuple[int, int], python: bool) -> None:
        self.data = data
        self.lines = lines
        self.zone = zone
        self.python = python
        self.entries: list[SummaryEntry] = []

    def text(self, a: int, b: int) -> str:
        return self.data[a:b].decode("utf-8", errors="replace")

    def starts_in_zone(self, node: Node) -> bool:
        """True when the zone shows the node's first line (it is left to the zone)."""
        return self.zone[0] <= int(node.start_point[0]) <= self.zone[1]

    def add(self, outer: Node, text: str, symbol: str, parent: int | None) -> int:
        indent = _line_start_text(self.lines, outer.start_point[0], outer.start_point[1])
        self.entries.append(
            SummaryEntry(
                start_line=int(outer.start_point[0]),
                text=_clip(indent + text) + "\n",
                symbol=symbol,
                parent=parent,
            )
        )
        return len(self.entries) - 1

    def walk(self, nodes: list[Node], parent: int | None) -> None:
        for node in nodes:
            if node.type in _TRANSPARENT:
                self.walk(list(node.children), parent)
            elif node.is_named and node.type not in _SKIP:
                self.visit(node, node, parent)

    def visit(self, outer: Node, node: Node, parent: int | None) -> None:
        if self.starts_in_zone(outer):
            return
        kind = node.type
        if kind in _IMPORTS:
            self.add(outer, self.text(outer.start_byte, outer.end_byte), "", parent)
            return
        body = _find_body(node)
        if body is None and kind in _WRAPPERS:
            inner = node.child_by_field_name("definition") or node.child_by_field_name(
                "declaration"
            )
            if inner is None:
                candidates = [c for c in node.named_children if _find_body(c) is not None]
                if not candidates:
                    for c in node.named_children:
                        if c.type in _WRAPPERS:
                            candidates = [c]
                            break
                inner = candidates[-1] if candidates else None
            if inner is not None:
                self.visit(outer, inner, parent)
                return
        if body is not None:
            head = self.text(outer.start_byte, body.start_byte).rstrip()
            if self.python:
                # comments before the first statement are not part of the block
                head_lines = head.split("\n")
                while len(head_lines) > 1 and head_lines[-1].lstrip().startswith("#"):
                    head_lines.pop()
                head = "\n".join(head_lines).rstrip()
            name = _name_of(node, self.data)
            if kind in _CONTAINERS or node.type.endswith("class_declaration"):
                if self.python:
                    idx = self.add(outer, head, name, parent)
                    self.walk(list(body.children), idx)
                else:
                    idx = self.add(outer, head + " {", name, parent)
                    self.walk(list(body.children), idx)
                    indent = _line_start_text(
                        self.lines, outer.start_point[0], outer.start_point[1]
                    )
                    close = self.text(body.end_byte - 1, outer.end_byte).strip() or "}"
                    self.entries.append(
                        SummaryEntry(
                            start_line=node_lines(outer)[1],
                            text=indent + close + "\n",
                            parent=idx,
                            closing=True,
                        )
                    )
                return
            elided = head + (" ..." if self.python else " { ... }")
            self.add(outer, elided, name, parent)
            return
        # declarations, constants, prototypes, fields: short ones verbatim
        if self.python or not (
            kind.endswith(_DECLARATION_SUFFIXES) or outer.type.endswith(_DECLARATION_SUFFIXES)
        ):
            return
        s, e = node_lines(outer)
        text = self.text(outer.start_byte, outer.end_byte)
        if e - s > 2:
            first = text.split("\n", 1)[0].rstrip()
            text = first + " ..."
        self.add(outer, text, _name_of(node, self.data), parent)


def file_summary(
    tree: Tree | None, text: str, lines: list[str], language: str, zone: tuple[int, int]
) -> list[SummaryEntry]:
    """Return the symbol map of a file outside the editing zone ``zone`` (inclusive lines)."""
    if tree is None:
        return []
    data = text.encode("utf-8")
    builder = _Builder(data, lines, zone, language == "python")
    for node in tree.root_node.named_children:
        if node.type in _TRANSPARENT:
            builder.walk(list(node.children), None)
            continue
        if node.type == "expression_statement" and language == "python":
            src = builder.text(node.start_byte, node.end_byte)
            if _UPPER.match(src) and not builder.starts_in_zone(node):
                s, e = node_lines(node)
                if e - s > 2:
                    src = src.split("\n", 1)[0].rstrip() + " ..."
                builder.add(node, src, src.split("=", 1)[0].strip(), None)
            continue
        if node.type in _SKIP:
            continue
        builder.visit(node, node, None)
    return builder.entries


def select_entries(
    entries: list[SummaryEntry], costs: list[int], zone: tuple[int, int], budget: int
) -> list[int]:
    """Return indexes of entries to keep (file order), nearest the zone first, within budget."""

    def distance(i: int) -> int:
        line = entries[i].start_line
        if line < zone[0]:
            return zone[0] - line
        return max(0, line - zone[1])

    chosen: set[int] = set()
    spent = 0
    order = sorted(
        (i for i, e in enumerate(entries) if not e.closing), key=lambda i: (distance(i), i)
    )
    closers: dict[int, int] = {
        e.parent: i for i, e in enumerate(entries) if e.closing and e.parent is not None
    }
    for i in order:
        need: list[int] = []
        j: int | None = i
        while j is not None and j not in chosen:
            need.append(j)
            if j in closers:
                need.append(closers[j])
            j = entries[j].parent
        cost = sum(costs[k] for k in need)
        if spent + cost <= budget:
            chosen.update(need)
            spent += cost
    return sorted(chosen)


def project_line(rel: str, entry: FileEntry | None, *, max_names: int = 6) -> str:
    """Return the one-line project summary of a file: purpose and the names it exposes."""
    parts = [rel]
    if entry is not None:
        purpose = entry.summary.strip().split("\n", 1)[0]
        names: list[str] = []
        for sym in entry.symbols:
            if sym.parent is None and not sym.name.startswith("_") and sym.name not in names:
                names.append(sym.name)
            if len(names) >= max_names:
                break
        text = rel + (f": {purpose}" if purpose else "")
        if names:
            text += f" (exposes {', '.join(names)})"
        parts = [text]
    line = parts[0]
    if len(line) > MAX_LINE:
        line = line[: MAX_LINE - 4] + " ..."
    return line


OUTLINE_FILES = 64
"""Files whose last file summary is memoised (emptied when full)."""


class FileOutline:
    """The ``file_summary`` layer: the buffer's symbol map outside the zone, memoised per file."""

    def __init__(self) -> None:
        self._memo: dict[Path, tuple[tuple[int, int], int, list[SummaryEntry]]] = {}

    def bounds(self) -> dict[str, Bounded]:
        """The memoised summaries against ``OUTLINE_FILES``."""
        return {
            "outline.files": Bounded(
                len(self._memo), OUTLINE_FILES, "files", "context/summaries.py OUTLINE_FILES"
            )
        }

    def entries(
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
        memo = self._memo.get(cursor.path)
        if memo is not None and memo[0] == key and memo[1] == outside:
            return memo[2]
        entries = file_summary(tree, cursor.text, lines, cursor.language, key)
        if len(self._memo) >= OUTLINE_FILES and cursor.path not in self._memo:
            self._memo.clear()
        self._memo[cursor.path] = (key, outside, entries)
        return entries

    def layer(
        self,
        maker: PieceMaker,
        cursor: Cursor,
        tree: Tree | None,
        lines: list[str],
        zone: Zone,
        entry: FileEntry | None,
        budget: int,
        rel: str,
    ) -> Rendered:
        """Return the outline of the file within ``budget`` tokens, nearest the zone first."""
        c = comment_prefix(cursor.language)
        entries = self.entries(cursor, tree, lines, zone)
        fixed: list[Piece] = []
        if not maker.format.has_repo_tokens:
            fixed.append(maker.piece("file_summary", f"{c} Outline of {rel} (bodies elided):\n"))
        purpose = entry.summary.strip().split("\n", 1)[0] if entry is not None else ""
        if purpose:
            fixed.append(maker.piece("file_summary", f"{c} {purpose}\n"))
        closing = [maker.piece("file_summary", f"{c} ...\n")]
        fixed_cost = cost(fixed) + cost(closing)
        if not entries or fixed_cost >= budget:
            return Rendered()
        # one chunk for the whole outline: sized with cheap estimates, then counted
        # exactly (a tokenizer call per entry is slow with large vocabularies)
        target = budget - fixed_cost
        span = (zone.start_line, zone.end_line)
        costs = [estimate_tokens(e.text) for e in entries]
        est_budget = target
        best: tuple[list[int], Piece] | None = None
        for _ in range(4):
            keep = select_entries(entries, costs, span, est_budget)
            if not keep:
                break
            piece = maker.piece("file_summary", "".join(entries[i].text for i in keep))
            exact = len(piece.ids)
            if exact <= target:
                if best is None or exact > len(best[1].ids):
                    best = (keep, piece)
                if exact >= target * 0.9 or len(keep) == len(entries):
                    break
            est_budget = max(1, int(est_budget * target / max(1, exact)) - (exact > target))
        if best is None:
            return Rendered()
        keep, piece = best
        total_chars = max(1, len(piece.text))
        items = [
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
        return Rendered(pieces=[*fixed, piece, *closing], items=items)


def project_summary_layer(
    retriever: Retriever,
    maker: PieceMaker,
    cursor: Cursor,
    imports: list[Import],
    recent: list[Path],
    budget: int,
) -> Rendered:
    """Return one line per related file (imported, importing, ``recent``) within ``budget``."""
    c = comment_prefix(cursor.language)
    files, _ = retriever.imported(cursor.path, imports)
    groups: list[tuple[str, list[Path]]] = [("imported", list(files))]
    try:
        groups.append(("imports this file", list(retriever.index.importers_of(cursor.path))))
    except IndexError_:
        log.debug("importers_of failed", exc_info=True)
    groups.append(("recently opened", [*recent, *cursor.open_files]))
    seen: set[Path] = {cursor.path}
    lines: list[tuple[str, str]] = []
    for reason, paths in groups:
        for path in sorted(set(paths), key=retriever.relative):
            if path in seen or retriever.denied(path):
                continue
            seen.add(path)
            rel = retriever.relative(path)
            lines.append((reason, project_line(rel, retriever.entry(path))))
            if len(lines) >= MAX_PROJECT_LINES:
                break
    if not lines:
        return Rendered()
    header = maker.piece("project_summary", f"{c} Related files:\n")
    spent = len(header.ids)
    chosen: list[tuple[str, str, Piece]] = []
    for reason, text in lines:
        piece = maker.piece("project_summary", f"{c} {text}\n")
        if spent + len(piece.ids) <= budget:
            chosen.append((reason, text, piece))
            spent += len(piece.ids)
    if not chosen:
        return Rendered()
    items = [
        LayerItem(
            source=text.split(":", 1)[0].split(" (", 1)[0],
            reason=reason,
            tokens=len(p.ids),
            text=text,
        )
        for reason, text, p in chosen
    ]
    return Rendered(pieces=[header] + [p for _, _, p in chosen], items=items)
