"""Incremental reparsing of open buffers: ``Tree.edit`` + reparse, then splice the symbols.

Owns :class:`Buffer` (an open buffer's text, bytes, tree and last extraction) and
:func:`edited`, which applies one :class:`~lsp_assist.documents.document.ByteEdit`:
the previous tree is edited with the old byte offsets and reparsed; the changed region
(the edit plus ``changed_ranges``) is narrowed to the innermost definition body that
holds it, widened to whole sibling nodes plus one neighbour on each side (and across
adjacent comments: a doc comment belongs to the next node), re-extracted on that byte
range only and spliced into the previous symbols, shifting the later lines.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tree_sitter import Node, Tree

from lsp_assist.documents.document import ByteEdit
from lsp_assist.index.extract import Extraction, extract, python_doc
from lsp_assist.index.languages import parse
from lsp_assist.index.model import Import, Symbol

FRESH_PARSE_ON_ERROR_BYTES = 32 * 1024
"""After an edit that leaves syntax errors, files up to this size are parsed afresh."""

_T = TypeVar("_T")

_CONTAINER_TYPES = frozenset(
    {
        "class_definition",
        "function_definition",
        "class_declaration",
        "abstract_class_declaration",
        "interface_declaration",
        "enum_declaration",
        "record_declaration",
        "internal_module",
        "function_declaration",
        "method_definition",
        "method_declaration",
        "constructor_declaration",
        "impl_item",
        "trait_item",
        "mod_item",
        "function_item",
        "namespace_definition",
        "class_specifier",
        "struct_specifier",
    }
)
_WRAPPER_FIELDS = {"decorated_definition": "definition", "export_statement": "declaration"}
_DESCEND_KINDS = frozenset({"class", "interface", "struct", "enum", "module", "function", "method"})
_ATTACHED = frozenset({"attribute_item", "decorator", "annotation", "inner_attribute_item"})

Chain = list[tuple[Node, str, str]]
"""The definitions (node, name, kind) around an edit, outermost first."""


@dataclass(slots=True)
class Buffer:
    """An open buffer as the index last parsed it."""

    language: str
    text: str
    src: bytes
    tree: Tree
    ext: Extraction


def new_buffer(path: Path, language: str, text: str) -> Buffer:
    """Parse and extract a buffer's whole text."""
    src = text.encode("utf-8", "surrogatepass")
    tree = parse(language, src)
    return Buffer(language, text, src, tree, extract(language, tree, src, path))


def edited(buf: Buffer, path: Path, text: str, edit: ByteEdit) -> Buffer:
    """Return ``buf`` after one edit; ``text`` is the full new text (``buf`` is unchanged)."""
    src = text.encode("utf-8", "surrogatepass")
    # edit a copy: the previous tree may be in use by a reader (tree_of)
    old_tree = buf.tree.copy()
    old_tree.edit(
        start_byte=edit.start_byte,
        old_end_byte=edit.old_end_byte,
        new_end_byte=edit.new_end_byte,
        start_point=edit.start_point,
        old_end_point=edit.old_end_point,
        new_end_point=edit.new_end_point,
    )
    tree = parse(buf.language, src, old_tree)
    if tree.root_node.has_error and len(src) <= FRESH_PARSE_ON_ERROR_BYTES:
        # Error recovery after an incremental parse can group nodes differently from a
        # fresh parse of the same text; small files pay for a canonical tree.
        tree = parse(buf.language, src)
        return Buffer(buf.language, text, src, tree, extract(buf.language, tree, src, path))
    lo = edit.start_byte
    hi = edit.new_end_byte
    for rng in old_tree.changed_ranges(tree):
        lo = min(lo, rng.start_byte)
        hi = max(hi, rng.end_byte)
    parent, chain = _descend(buf.ext, tree.root_node, lo, hi)
    r0, r1 = _region(parent, lo, hi, len(src), nested=bool(chain))
    delta = edit.new_end_byte - edit.old_end_byte
    row_delta = edit.new_end_point[0] - edit.old_end_point[0]
    old_r1 = r1 - delta
    ancestors = [(node.end_byte, name, kind) for node, name, kind in chain]
    fresh = extract(buf.language, tree, src, path, start_byte=r0, end_byte=r1, ancestors=ancestors)
    ext = _splice(buf.ext, fresh, r0, old_r1, delta, row_delta)
    if chain:
        _refresh_ancestors(ext, chain, src, buf.language == "python")
    return Buffer(buf.language, text, src, tree, ext)


def _first_named_child_for_byte(node: Node, byte: int) -> Node | None:
    """Return the first named child of ``node`` ending after ``byte`` (binary search).

    tree-sitter 0.26.1's ``Node.first_named_child_for_byte`` can crash the interpreter and
    ``TreeCursor.goto_first_child_for_byte`` can skip children on error trees."""
    lo, hi = 0, node.named_child_count
    while lo < hi:
        mid = (lo + hi) // 2
        child = node.named_child(mid)
        if child is not None and child.end_byte > byte:
            hi = mid
        else:
            lo = mid + 1
    if lo >= node.named_child_count:
        return None
    return node.named_child(lo)


def _child_containing(node: Node, lo: int, hi: int) -> Node | None:
    child = _first_named_child_for_byte(node, lo)
    if child is None or child.start_byte > lo or hi > child.end_byte:
        return None
    return child


def _descend(ext: Extraction, root: Node, lo: int, hi: int) -> tuple[Node, Chain]:
    """Return the innermost definition body holding the whole change, and the chain of
    definitions (node, name, kind) around it, outermost first (empty: the root)."""
    parent = root
    chain: Chain = []
    while True:
        child = _child_containing(parent, lo, hi)
        if child is None:
            break
        field = _WRAPPER_FIELDS.get(child.type)
        if field is not None:
            inner = child.child_by_field_name(field)
            if inner is None:
                break
            child = inner
        if child.type not in _CONTAINER_TYPES:
            break
        body = child.child_by_field_name("body")
        if body is None or not (body.start_byte < lo and hi < body.end_byte):
            break
        info = _known_definition(ext, child)
        if info is None:
            break
        chain.append((child, info[0], info[1]))
        parent = body
    return parent, chain


def _known_definition(ext: Extraction, node: Node) -> tuple[str, str] | None:
    """Return (name, kind) of the symbol made from ``node`` by the last extraction."""
    start = node.start_byte
    index = bisect.bisect_left(ext.starts, start)
    while index < len(ext.starts) and ext.starts[index] == start:
        sym = ext.symbols[index]
        if ext.node_types[index] == node.type and sym.kind in _DESCEND_KINDS:
            return sym.name, sym.kind
        index += 1
    if node.type == "impl_item":
        index = bisect.bisect_left(ext.scope_starts, start)
        if index < len(ext.scope_starts) and ext.scope_starts[index] == start:
            return ext.scopes[index], "scope"
    return None


def _copy_symbol(sym: Symbol, **changes: object) -> Symbol:
    """Return ``sym`` with some fields replaced (without the dataclass ``__init__``: hot path)."""
    new = Symbol.__new__(Symbol)
    for slot in Symbol.__slots__:
        object.__setattr__(new, slot, changes[slot] if slot in changes else getattr(sym, slot))
    return new


def _refresh_ancestors(ext: Extraction, chain: Chain, src: bytes, python: bool) -> None:
    """Update the end line (and Python docstring) of the definitions around an edit."""
    for node, name, kind in chain:
        if kind == "scope":
            continue
        index = bisect.bisect_left(ext.starts, node.start_byte)
        while index < len(ext.starts) and ext.starts[index] == node.start_byte:
            sym = ext.symbols[index]
            if sym.name == name and sym.kind == kind and ext.node_types[index] == node.type:
                if python:
                    new = _copy_symbol(sym, end_line=node.end_point[0], doc=python_doc(node, src))
                else:
                    new = _copy_symbol(sym, end_line=node.end_point[0])
                ext.symbols[index] = new
                break
            index += 1


def _region(root: Node, lo: int, hi: int, size: int, *, nested: bool = False) -> tuple[int, int]:
    """Return the byte range of the children of ``root`` covering [lo, hi], widened by one
    node on each side and across adjacent comments (doc comments belong to the next node).
    ``nested``: ``root`` is a definition's body, so the range stays inside it."""
    floor = root.start_byte if nested else 0
    ceiling = root.end_byte if nested else size + 1
    first = _first_named_child_for_byte(root, lo)
    if first is None:
        count = root.named_child_count
        first = root.named_child(count - 1) if count else None
        if first is None:
            return floor, ceiling
    start_node = first
    prev = first.prev_named_sibling
    while prev is not None:
        start_node = prev
        if "comment" not in prev.type and prev.type not in _ATTACHED:
            break
        prev = prev.prev_named_sibling
    r0 = floor if start_node.prev_named_sibling is None else start_node.start_byte
    node: Node | None = first
    last = first
    while node is not None and node.start_byte < hi:
        last = node
        node = node.next_named_sibling
    while node is not None:  # one more node, and the comments before it
        last = node
        if "comment" not in node.type and node.type not in _ATTACHED:
            break
        node = node.next_named_sibling
    if node is None or last.next_named_sibling is None:
        return r0, ceiling
    return r0, last.end_byte


def _splice(
    old: Extraction, fresh: Extraction, r0: int, old_r1: int, delta: int, row_delta: int
) -> Extraction:
    """Return ``old`` with its symbols/imports/scopes in [r0, old_r1) replaced by ``fresh``."""
    lo, hi = _span(old.starts, r0, old_r1)
    ilo, ihi = _span(old.import_starts, r0, old_r1)
    slo, shi = _span(old.scope_starts, r0, old_r1)
    return Extraction(
        symbols=_spliced(old.symbols, fresh.symbols, lo, hi, _shift_symbol, row_delta),
        starts=_spliced_starts(old.starts, fresh.starts, lo, hi, delta),
        node_types=_spliced(old.node_types, fresh.node_types, lo, hi, None, row_delta),
        imports=_spliced(old.imports, fresh.imports, ilo, ihi, _shift_import, row_delta),
        import_starts=_spliced_starts(old.import_starts, fresh.import_starts, ilo, ihi, delta),
        scopes=_spliced(old.scopes, fresh.scopes, slo, shi, None, row_delta),
        scope_starts=_spliced_starts(old.scope_starts, fresh.scope_starts, slo, shi, delta),
    )


def _span(starts: list[int], r0: int, old_r1: int) -> tuple[int, int]:
    """Return the index range of the items starting in [r0, old_r1)."""
    return bisect.bisect_left(starts, r0), bisect.bisect_left(starts, old_r1)


def _spliced_starts(old: list[int], fresh: list[int], lo: int, hi: int, delta: int) -> list[int]:
    return [*old[:lo], *fresh, *(s + delta for s in old[hi:])]


def _spliced(
    old: list[_T],
    fresh: list[_T],
    lo: int,
    hi: int,
    shift: Callable[[_T, int], _T] | None,
    row_delta: int,
) -> list[_T]:
    """Return ``old`` with items [lo, hi) replaced by ``fresh``, later ones moved ``row_delta``
    lines down."""
    tail = old[hi:]
    if row_delta and shift is not None:
        tail = [shift(item, row_delta) for item in tail]
    return [*old[:lo], *fresh, *tail]


def _shift_symbol(sym: Symbol, rows: int) -> Symbol:
    return _copy_symbol(sym, start_line=sym.start_line + rows, end_line=sym.end_line + rows)


def _shift_import(imp: Import, rows: int) -> Import:
    return Import(module=imp.module, names=imp.names, line=imp.line + rows, level=imp.level)
