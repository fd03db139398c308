"""Extraction: symbols, imports and the one-line summary of one parsed file.

Owns the translation of the ``grammars/<lang>/tags.scm`` captures into
:class:`~lsp_assist.index.model.Symbol` and :class:`~lsp_assist.index.model.Import`
values: kinds, parents (by containment), signatures, first doc lines, and the file
summary. :func:`extract` runs the query over the whole tree or over a byte range
(the incremental path re-extracts only the top-level nodes an edit touched).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tree_sitter

from lsp_assist.index.languages import get_query
from lsp_assist.index.model import Import, Symbol, SymbolKind

_KINDS: dict[str, SymbolKind] = {
    "function": "function",
    "method": "method",
    "class": "class",
    "interface": "interface",
    "struct": "struct",
    "enum": "enum",
    "constant": "constant",
    "variable": "variable",
    "type": "type",
    "module": "module",
    "macro": "function",
}
_CONTAINERS = frozenset({"class", "interface", "struct", "enum", "scope"})
_WEAK_KINDS = frozenset({"type", "variable"})
_FUNCTION_VALUES = frozenset(
    {"arrow_function", "function_expression", "function", "generator_function"}
)
_CONST_NAME = re.compile(r"^_*[A-Z][A-Z0-9_]*$")
_GO_RECEIVER = re.compile(r"\(\s*(?:\w+\s+)?\*?\s*(\w+)")
_WORD = re.compile(r"[A-Za-z_]\w*")
_DOC_STRIP = re.compile(r"^\s*(?:/\*+!?|\*+/?|//+[!/]?|#+!?)\s?")
_NOT_SUMMARY = re.compile(r"copyright|licen[cs]e|spdx|-\*-|^!|^\s*$|^[-=*#/\s]+$", re.IGNORECASE)
_WRAPPERS = frozenset(
    {
        "export_statement",
        "type_declaration",
        "template_declaration",
        "decorated_definition",
        "ambient_declaration",
        "lexical_declaration",
        "variable_declaration",
        "const_declaration",
        "var_declaration",
        "var_spec_list",
    }
)
SYMBOL_SETTERS: tuple[Callable[[Symbol, Any], None], ...] = tuple(
    Symbol.__dict__[slot].__set__
    for slot in ("name", "kind", "path", "start_line", "end_line", "parent", "signature", "doc")
)
"""Slot setters: build a frozen Symbol without its dataclass __init__ (hot path)."""
SIGNATURE_MAX = 240
SUMMARY_MAX = 160


@dataclass(slots=True)
class Extraction:
    """Symbols (with their start bytes, for incremental updates) and imports of a range."""

    symbols: list[Symbol] = field(default_factory=list)
    starts: list[int] = field(default_factory=list)
    node_types: list[str] = field(default_factory=list)
    """The syntax node type each symbol was made from (parallel to ``symbols``)."""
    imports: list[Import] = field(default_factory=list)
    import_starts: list[int] = field(default_factory=list)
    scopes: list[str] = field(default_factory=list)
    """Names of the non-symbol parents (Rust impl blocks), with their start bytes below."""
    scope_starts: list[int] = field(default_factory=list)


def _text(src: bytes, start: int, end: int) -> str:
    return src[start:end].decode("utf-8", "replace")


def _signature(node: tree_sitter.Node, src: bytes, body: tree_sitter.Node | None) -> str:
    start = node.start_byte
    if body is not None and body.start_byte > start:
        end = body.start_byte
    else:
        end = src.find(b"\n", start, node.end_byte)
        if end < 0:
            end = node.end_byte
    if end - start > SIGNATURE_MAX * 4:
        end = start + SIGNATURE_MAX * 4
    sig = " ".join(_text(src, start, end).split())
    if len(sig) > SIGNATURE_MAX:
        sig = sig[: SIGNATURE_MAX - 3] + "..."
    return sig


def _first_doc_line(text: str) -> str:
    """Return the first meaningful line of a comment or docstring."""
    for raw in text.splitlines():
        line = _DOC_STRIP.sub("", raw).strip()
        line = line.removesuffix("*/").strip()
        if line and not line.strip("-=*#/ "):
            continue
        if line:
            return line
    return ""


def _string_doc(text: str) -> str:
    body = text.lstrip("rRbBuUfF")
    for quote in ('"""', "'''", '"', "'"):
        if body.startswith(quote):
            body = body[len(quote) :]
            if body.endswith(quote):
                body = body[: -len(quote)]
            break
    for line in body.splitlines():
        if line.strip():
            return line.strip()
    return ""


def python_doc(node: tree_sitter.Node, src: bytes) -> str:
    """Return the first docstring line of a Python class or function node."""
    return _python_doc(node, src)


def _python_doc(node: tree_sitter.Node, src: bytes, body: tree_sitter.Node | None = None) -> str:
    if body is None:
        body = node.child_by_field_name("body")
    if body is None or body.named_child_count == 0:
        return ""
    first = body.named_children[0]
    if first.type == "expression_statement" and first.named_child_count:
        string = first.named_children[0]
        if string.type == "string":
            return _string_doc(_text(src, string.start_byte, string.end_byte))
    return ""


def _is_comment(node: tree_sitter.Node) -> bool:
    return "comment" in node.type


def _comment_doc(node: tree_sitter.Node, src: bytes) -> str:
    target = node
    prev = target.prev_named_sibling
    depth = 0
    while prev is None and depth < 3:
        parent = target.parent
        if parent is None or parent.type not in _WRAPPERS:
            return ""
        target = parent
        prev = target.prev_named_sibling
        depth += 1
    while prev is not None and prev.type in ("attribute_item", "decorator", "annotation"):
        target = prev
        prev = prev.prev_named_sibling
    if prev is None or not _is_comment(prev) or _is_inner_doc(prev, src):
        return ""
    if prev.end_point[0] < target.start_point[0] - 1:
        return ""
    top = prev
    while True:
        before = top.prev_named_sibling
        if before is None or not _is_comment(before):
            break
        if before.end_point[0] < top.start_point[0] - 1:
            break
        top = before
    node_iter: tree_sitter.Node | None = top
    while node_iter is not None and node_iter.start_byte <= prev.start_byte:
        line = _first_doc_line(_text(src, node_iter.start_byte, node_iter.end_byte))
        if line:
            return line
        node_iter = node_iter.next_named_sibling
    return ""


def _is_inner_doc(node: tree_sitter.Node, src: bytes) -> bool:
    """True for Rust inner doc comments (``//!``, ``/*!``), which document the file."""
    head = src[node.start_byte : node.start_byte + 3]
    return head in (b"//!", b"/*!")


def _parent_name(text: str) -> str:
    words = _WORD.findall(text.split("<", 1)[0])
    return words[-1] if words else text


def extract(
    lang: str,
    tree: tree_sitter.Tree,
    src: bytes,
    path: Path,
    *,
    start_byte: int | None = None,
    end_byte: int | None = None,
    ancestors: list[tuple[int, str, str]] | None = None,
) -> Extraction:
    """Return the symbols and imports defined in ``[start_byte, end_byte)`` (default: all).

    ``ancestors`` are the enclosing definitions of the range as (end byte, name, kind),
    outermost first, when the range lies inside a definition's body.
    """
    cursor = tree_sitter.QueryCursor(get_query(lang))
    lo = 0 if start_byte is None else start_byte
    hi = len(src) + 1 if end_byte is None else end_byte
    if start_byte is not None or end_byte is not None:
        cursor.set_byte_range(lo, max(lo, hi))
    defs: dict[tuple[int, int, int], tuple[str, tree_sitter.Node, tree_sitter.Node]] = {}
    scopes: list[tuple[int, int, str]] = []
    import_nodes: list[tree_sitter.Node] = []
    roles = _PATTERN_ROLES.setdefault(lang, {})
    for pattern, caps in cursor.matches(tree.root_node):
        role = roles.get(pattern)
        if role is None:
            role = _role_of(caps)
            roles[pattern] = role
        kind, key = role
        if not key:
            continue
        node: tree_sitter.Node | None = caps[key][0]
        if node is None or not lo <= node.start_byte < hi:
            continue
        if kind == "import":
            import_nodes.append(node)
            continue
        name_nodes = caps.get("scope.name" if kind == "scope" else "name")
        if not name_nodes:
            continue
        name_node = name_nodes[0]
        if kind == "scope":
            scopes.append(
                (
                    node.start_byte,
                    node.end_byte,
                    _parent_name(_text(src, name_node.start_byte, name_node.end_byte)),
                )
            )
            continue
        if kind not in _KINDS:
            continue
        key3 = (node.start_byte, node.end_byte, name_node.start_byte)
        old = defs.get(key3)
        if old is None or (old[0] in _WEAK_KINDS and kind not in _WEAK_KINDS):
            defs[key3] = (kind, node, name_node)
    out = Extraction()
    if defs or scopes:
        _build_symbols(lang, src, path, defs, scopes, out, ancestors or [])
    if import_nodes:
        import_nodes.sort(key=lambda n: n.start_byte)
        for inode in import_nodes:
            for imp in _imports_of(lang, inode, src):
                out.imports.append(imp)
                out.import_starts.append(inode.start_byte)
    return out


_PATTERN_ROLES: dict[str, dict[int, tuple[str, str]]] = {}
"""Per language, pattern index -> (kind, capture) learnt from the pattern's first match."""


def _role_of(caps: dict[str, list[tree_sitter.Node]]) -> tuple[str, str]:
    for key in caps:
        if key.startswith("definition."):
            return key[11:], key
        if key in ("import", "scope"):
            return key, key
    return "", ""


def _build_symbols(
    lang: str,
    src: bytes,
    path: Path,
    defs: dict[tuple[int, int, int], tuple[str, tree_sitter.Node, tree_sitter.Node]],
    scopes: list[tuple[int, int, str]],
    out: Extraction,
    ancestors: list[tuple[int, str, str]],
) -> None:
    # (start, -end, order, kind, name, node or None)
    items: list[tuple[int, int, int, str, str, tree_sitter.Node | None, tree_sitter.Node | None]]
    items = []
    for (start, end, name_start), (def_kind, def_node, def_name) in defs.items():
        items.append((start, -end, name_start, def_kind, "", def_node, def_name))
    for start, end, name in scopes:
        items.append((start, -end, -1, "scope", name, None, None))
    items.sort(key=lambda it: (it[0], it[1], it[2]))
    stack: list[tuple[int, str, str]] = list(ancestors)  # (end, name, kind)
    python = lang == "python"
    new_symbol = Symbol.__new__
    set_name, set_kind, set_path, set_start, set_end, set_parent, set_sig, set_doc = SYMBOL_SETTERS
    symbols = out.symbols
    starts = out.starts
    for start, neg_end, _ns, kind, scope_name, node, name_node in items:
        end = -neg_end
        while stack and stack[-1][0] <= start:
            stack.pop()
        parent = stack[-1][1] if stack else None
        parent_kind = stack[-1][2] if stack else ""
        if node is None or name_node is None:
            stack.append((end, scope_name, "scope"))
            out.scopes.append(scope_name)
            out.scope_starts.append(start)
            continue
        name = _text(src, name_node.start_byte, name_node.end_byte)
        if "::" in name:
            parts = [p for p in name.split("::") if p]
            if len(parts) >= 2:
                parent = _parent_name(parts[-2])
                if kind == "function":
                    kind = "method"
            name = parts[-1] if parts else name
        if kind == "method" and lang == "go":
            receiver = node.child_by_field_name("receiver")
            if receiver is not None:
                match = _GO_RECEIVER.match(_text(src, receiver.start_byte, receiver.end_byte))
                if match:
                    parent = match.group(1)
        elif kind == "variable":
            value = node.child_by_field_name("value")
            if value is not None and value.type in _FUNCTION_VALUES:
                kind = "function"
            elif _CONST_NAME.match(name):
                kind = "constant"
        if kind == "function" and parent_kind in _CONTAINERS:
            kind = "method"
        body = node.child_by_field_name("body")
        sym = new_symbol(Symbol)
        set_name(sym, name)
        set_kind(sym, _KINDS[kind])
        set_path(sym, path)
        set_start(sym, node.start_point[0])
        set_end(sym, node.end_point[0])
        set_parent(sym, parent)
        set_sig(sym, _signature(node, src, body))
        set_doc(sym, _python_doc(node, src, body) if python else _comment_doc(node, src))
        symbols.append(sym)
        starts.append(start)
        out.node_types.append(node.type)
        if kind in _CONTAINERS or kind in ("function", "method", "module"):
            stack.append((end, name, kind))


def _unquote(text: str) -> str:
    return text.strip().strip("\"'`")


def _imports_of(lang: str, node: tree_sitter.Node, src: bytes) -> list[Import]:
    line = node.start_point[0]

    def text(n: tree_sitter.Node) -> str:
        return _text(src, n.start_byte, n.end_byte)

    if lang == "python":
        if node.type == "import_statement":
            found = []
            for child in node.children_by_field_name("name"):
                target = (
                    child.child_by_field_name("name") if child.type == "aliased_import" else child
                )
                if target is not None:
                    found.append(Import(module=text(target), line=line))
            return found
        if node.type == "future_import_statement":
            return [Import(module="__future__", line=line)]
        module_node = node.child_by_field_name("module_name")
        module = text(module_node) if module_node is not None else ""
        level = len(module) - len(module.lstrip("."))
        names: list[str] = []
        for child in node.children_by_field_name("name"):
            target = child.child_by_field_name("name") if child.type == "aliased_import" else child
            if target is not None:
                names.append(text(target))
        if not names and any(c.type == "wildcard_import" for c in node.children):
            names.append("*")
        return [Import(module=module.lstrip("."), names=tuple(names), line=line, level=level)]
    if lang in ("javascript", "typescript", "tsx"):
        if node.type == "call_expression":
            args = node.child_by_field_name("arguments")
            if args is None or args.named_child_count == 0:
                return []
            return [Import(module=_unquote(text(args.named_children[0])), line=line)]
        source = node.child_by_field_name("source")
        if source is None:
            return []
        names = []
        for child in node.named_children:
            if child.type == "import_clause":
                names.extend(_js_clause_names(child, src))
            elif child.type == "export_clause":
                for spec in child.named_children:
                    name_node = spec.child_by_field_name("name")
                    if name_node is not None:
                        names.append(text(name_node))
        return [Import(module=_unquote(text(source)), names=tuple(names), line=line)]
    if lang == "go":
        found = []
        stack = [node]
        while stack:
            cur = stack.pop()
            if cur.type == "import_spec":
                path_node = cur.child_by_field_name("path")
                if path_node is not None:
                    found.append(Import(module=text(path_node).strip(), line=cur.start_point[0]))
            else:
                stack.extend(reversed(cur.named_children))
        return found
    if lang == "rust":
        if node.type == "mod_item":
            name_node = node.child_by_field_name("name")
            return (
                [] if name_node is None else [Import(module=f"self::{text(name_node)}", line=line)]
            )
        if node.type == "extern_crate_declaration":
            name_node = node.child_by_field_name("name")
            return [] if name_node is None else [Import(module=text(name_node), line=line)]
        arg = node.child_by_field_name("argument")
        return [] if arg is None else [_rust_use(arg, src, line)]
    if lang == "java":
        body = text(node).removeprefix("import").strip().rstrip(";").strip()
        body = body.removeprefix("static").strip()
        body = "".join(body.split())
        if body.endswith(".*"):
            return [Import(module=body[:-2], names=("*",), line=line)]
        return [Import(module=body, line=line)]
    if lang in ("c", "cpp"):
        path_node = node.child_by_field_name("path")
        return [] if path_node is None else [Import(module=text(path_node).strip(), line=line)]
    return []


def _js_clause_names(clause: tree_sitter.Node, src: bytes) -> list[str]:
    names: list[str] = []
    for child in clause.named_children:
        if child.type == "identifier":
            names.append(_text(src, child.start_byte, child.end_byte))
        elif child.type == "namespace_import":
            names.append("*")
        elif child.type == "named_imports":
            for spec in child.named_children:
                name_node = spec.child_by_field_name("name")
                if name_node is not None:
                    names.append(_text(src, name_node.start_byte, name_node.end_byte))
    return names


def _rust_use(arg: tree_sitter.Node, src: bytes, line: int) -> Import:
    def text(n: tree_sitter.Node) -> str:
        return "".join(_text(src, n.start_byte, n.end_byte).split())

    if arg.type == "use_as_clause":
        inner = arg.child_by_field_name("path")
        if inner is not None:
            return _rust_use(inner, src, line)
    if arg.type == "scoped_use_list":
        path_node = arg.child_by_field_name("path")
        list_node = arg.child_by_field_name("list")
        names: tuple[str, ...] = ()
        if list_node is not None:
            names = tuple(
                text(c.child_by_field_name("path") or c) if c.type == "use_as_clause" else text(c)
                for c in list_node.named_children
            )
        return Import(module=text(path_node) if path_node else "", names=names, line=line)
    if arg.type == "use_wildcard":
        return Import(module=text(arg).removesuffix("::*"), names=("*",), line=line)
    if arg.type == "scoped_identifier":
        path_node = arg.child_by_field_name("path")
        name_node = arg.child_by_field_name("name")
        if path_node is not None and name_node is not None:
            return Import(module=text(path_node), names=(text(name_node),), line=line)
    return Import(module=text(arg), line=line)


def summarize(
    lang: str,
    tree: tree_sitter.Tree,
    src: bytes,
    symbols: list[Symbol],
    imports: list[Import] | None = None,
) -> str:
    """Return one line saying what the file is for: its top doc, else from its symbols."""
    root = tree.root_node
    fallback = ""
    for count, child in enumerate(root.named_children):
        if count >= 4:
            break
        if lang == "python" and child.type == "expression_statement":
            if child.named_child_count and child.named_children[0].type == "string":
                string = child.named_children[0]
                doc = _string_doc(_text(src, string.start_byte, string.end_byte))
                if doc:
                    return doc[:SUMMARY_MAX]
            break
        if _is_comment(child):
            if not fallback:
                for raw in _text(src, child.start_byte, child.end_byte).splitlines():
                    line = _DOC_STRIP.sub("", raw).strip().removesuffix("*/").strip()
                    if line and not _NOT_SUMMARY.search(line):
                        fallback = line[:SUMMARY_MAX]
                        break
            if fallback and lang != "python":
                return fallback
            continue
        if child.type in ("package_clause", "package_declaration", "preproc_include"):
            continue
        break
    if fallback:
        return fallback
    return _derived_summary(symbols, imports or [])


def _derived_summary(symbols: list[Symbol], imports: list[Import]) -> str:
    groups: dict[str, list[str]] = {}
    for sym in symbols:
        if sym.parent is not None or sym.kind in ("variable", "method"):
            continue
        label = {"function": "functions", "constant": "constants", "module": "modules"}.get(
            sym.kind, "types"
        )
        names = groups.setdefault(label, [])
        if sym.name not in names:
            names.append(sym.name)
    parts = []
    for label in ("types", "functions", "constants", "modules"):
        group = groups.get(label)
        if not group:
            continue
        shown = ", ".join(group[:4])
        more = f" (+{len(group) - 4})" if len(group) > 4 else ""
        parts.append(f"{label} {shown}{more}")
    if not parts:
        modules: list[str] = []
        for imp in imports:
            shown_module = "." * imp.level + imp.module
            if shown_module and shown_module not in modules:
                modules.append(shown_module)
        if not modules:
            return ""
        more = f" (+{len(modules) - 4})" if len(modules) > 4 else ""
        return f"Uses {', '.join(modules[:4])}{more}"[:SUMMARY_MAX]
    return ("Defines " + "; ".join(parts))[:SUMMARY_MAX]
