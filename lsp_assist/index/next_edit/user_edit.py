"""The user's latest edit, read from the syntax tree: what a next edit follows from.

Owns :func:`classify` (one burst of typing, read against the tree of the text after
it: a renamed definition, method, parameter, local or global, a parameter added to or
removed from a ``def``, an argument added to or removed from one call) and its value,
:class:`UserEdit`. No model; a regular expression finds the candidate bytes and the tree
decides (under the scope rules of ``scopes``), so a file of thousands of lines answers
in milliseconds. Languages other than Python get no edit (``classify`` returns None).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from tree_sitter import Node, Tree

from lsp_assist.index.languages import parse
from lsp_assist.index.next_edit.scopes import (
    Resolver,
    binding_kind,
    byte_span,
    enclosing,
    identifiers,
    is_field,
    node_text,
    scope_of,
)

__all__ = ["EditKind", "UserEdit", "classify"]

EditKind = Literal[
    "rename", "parameter-added", "parameter-removed", "argument-added", "argument-removed"
]
"""What the user's edit was, and so what kind of follow-up it asks for."""

_WORD = re.compile(rb"[A-Za-z0-9_]*")


@dataclass(frozen=True, slots=True)
class UserEdit:
    """The user's latest edit, as the tree reads it."""

    kind: EditKind
    old: str
    """The old name (a rename) or the function's name (a parameter or argument change)."""
    new: str
    """The new name, or the parameter / argument text added ('' when one was removed)."""
    what: str
    """What was edited: 'function', 'class', 'method', 'parameter', 'local variable',
    'global name', 'call'."""
    scope: tuple[int, int]
    """Byte span of the scope the name is bound in (renames) or of the whole file."""
    site: tuple[int, int]
    """Byte span of the edited name, parameter list or argument list."""
    index: int = 0
    """The position of the added or removed parameter / argument."""
    count: int = 0
    """How many positional arguments a call had before the change (calls to update)."""
    line: int = 0
    """The row of the edit, for the reasons."""
    module_level: bool = True
    """True when other files can refer to it (a module-level name, or a call change)."""


def _items(language: str, wrapper: tuple[bytes, bytes], inner: bytes, list_type: str) -> list[str]:
    """The comma-separated items of a parameter or argument list's text, parsed alone."""
    tree = parse(language, wrapper[0] + inner + wrapper[1])
    found = _first_of(tree.root_node, list_type)
    if found is None:
        return []
    return [node_text(c) for c in found.named_children if c.type != "comment"]


def _first_of(node: Node, kind: str) -> Node | None:
    if node.type == kind:
        return node
    for child in node.named_children:
        hit = _first_of(child, kind)
        if hit is not None:
            return hit
    return None


def _one_difference(old: list[str], new: list[str]) -> tuple[int, str] | None:
    """Where one item was inserted into (or removed from) ``old``: (index, item)."""
    longer, shorter = (new, old) if len(new) > len(old) else (old, new)
    if len(longer) != len(shorter) + 1:
        return None
    for index, item in enumerate(longer):
        if longer[:index] + longer[index + 1 :] == shorter:
            return index, item
    return None


def _old_slice(src: bytes, span: tuple[int, int], at: int, removed: bytes, inserted: int) -> bytes:
    """The bytes of ``span`` before ``inserted`` bytes at ``at`` replaced ``removed``."""
    return src[span[0] : at] + removed + src[at + inserted : span[1]]


def classify(
    language: str, src: bytes, tree: Tree | None, start: int, removed: bytes, inserted: bytes
) -> UserEdit | None:
    """Read the user's edit (``removed`` at byte ``start`` became ``inserted``) from the tree.

    ``tree`` is the tree of ``src`` (None: parsed here); None for other languages.
    """
    if language != "python":
        return None
    root = (tree or parse(language, src)).root_node
    end = start + len(inserted)
    if _WORD.fullmatch(removed) and _WORD.fullmatch(inserted):
        found = _rename(root, src, start, end, removed, inserted)
        if found is not None:
            return found
    node = root.named_descendant_for_byte_range(start, end)
    params = enclosing(node, ("parameters",))
    if params is not None and params.start_byte <= start and end <= params.end_byte:
        return _parameters_changed(language, src, params, start, removed, len(inserted))
    arguments = enclosing(node, ("argument_list",))
    while arguments is not None:
        if arguments.start_byte < start and end < arguments.end_byte:
            found = _arguments_changed(language, src, arguments, start, removed, len(inserted))
            if found is not None:
                return found
        arguments = enclosing(arguments.parent, ("argument_list",))
    return None


def _rename(
    root: Node, src: bytes, start: int, end: int, removed: bytes, inserted: bytes
) -> UserEdit | None:
    lo, hi = start, end
    while lo > 0 and (src[lo - 1 : lo].isalnum() or src[lo - 1 : lo] == b"_"):
        lo -= 1
    while hi < len(src) and (src[hi : hi + 1].isalnum() or src[hi : hi + 1] == b"_"):
        hi += 1
    new = src[lo:hi].decode("utf-8", "replace")
    old = (src[lo:start] + removed + src[end:hi]).decode("utf-8", "replace")
    if old == new or not old.isidentifier() or not new.isidentifier():
        return None
    site = root.named_descendant_for_byte_range(lo, hi)
    if site is None or site.type != "identifier" or byte_span(site) != (lo, hi):
        return None
    parent = site.parent
    row = site.start_point[0]
    binding = binding_kind(site)
    if parent is not None and parent.type == "attribute" and is_field(site, parent, "attribute"):
        return _method_renamed(root, src, site, parent, old, new)
    if binding and not _bound_elsewhere(root, src, site, new):
        scope = scope_of(site)
    elif binding and Resolver(root, src, old, None).resolve(site) is not None:
        return None  # the new name is bound here already and the old one too: a switch
    elif binding:
        # the new name is bound here already and the old one no longer is: an accepted
        # follow-up at a rebinding (`count += value` after `count = 0`), the rename goes on
        scope = scope_of(site)
    else:
        old_scope = Resolver(root, src, old, None).resolve(site)
        new_scope = Resolver(root, src, new, None).resolve(site)
        if old_scope is not None and new_scope is None:
            scope = old_scope  # one use renamed: the binding and the other uses follow
        elif old_scope is None and new_scope is not None:
            scope = new_scope  # the binding was renamed already: the rename goes on
        else:
            return None  # unknown, or a name that exists: the user switched to it
    if binding in ("function", "class"):
        what = "method" if scope.type == "class_definition" else binding
    elif binding == "parameter":
        what = "parameter"
    elif scope.type == "module":
        what = "global name"
    elif scope.type == "class_definition":
        what = "class attribute"
    else:
        what = "parameter" if _is_parameter_of(root, src, old, scope) else "local variable"
    return UserEdit(
        "rename",
        old,
        new,
        what,
        byte_span(scope),
        (lo, hi),
        line=row,
        module_level=scope.type == "module",
    )


def _bound_elsewhere(root: Node, src: bytes, site: Node, name: str) -> bool:
    """True when ``name`` is bound in ``site``'s scope other than at ``site``."""
    scope = byte_span(scope_of(site))
    for other in identifiers(root, src, name, scope):
        if (
            byte_span(other) != byte_span(site)
            and binding_kind(other)
            and byte_span(scope_of(other)) == scope
        ):
            return True
    return False


def _method_renamed(
    root: Node, src: bytes, site: Node, attribute: Node, old: str, new: str
) -> UserEdit | None:
    """``self.old`` became ``self.new`` in a class that defines a method ``new``, not ``old``."""
    obj = attribute.child_by_field_name("object")
    cls = enclosing(site, ("class_definition",))
    if obj is None or node_text(obj) not in ("self", "cls") or cls is None:
        return None
    body = cls.child_by_field_name("body")
    if body is None:
        return None
    methods = {
        node_text(name)
        for child in body.named_children
        for definition in [child.child_by_field_name("definition") or child]
        if definition.type == "function_definition"
        for name in [definition.child_by_field_name("name")]
        if name is not None
    }
    if new not in methods or old in methods:
        return None
    row = site.start_point[0]
    return UserEdit(
        "rename", old, new, "method", byte_span(cls), byte_span(site), line=row, module_level=False
    )


def _is_parameter_of(root: Node, src: bytes, name: str, scope: Node) -> bool:
    params = scope.child_by_field_name("parameters")
    if params is None:
        return False
    return any(
        binding_kind(n) == "parameter" for n in identifiers(root, src, name, byte_span(params))
    )


def _parameters_changed(
    language: str, src: bytes, params: Node, start: int, removed: bytes, inserted: int
) -> UserEdit | None:
    function = params.parent
    if function is None or function.type != "function_definition":
        return None
    name_node = function.child_by_field_name("name")
    if name_node is None:
        return None
    old_text = _old_slice(src, byte_span(params), start, removed, inserted)
    old = _items(language, (b"def _", b": pass\n"), old_text, "parameters")
    new = [node_text(c) for c in params.named_children if c.type != "comment"]
    change = _one_difference(old, new)
    if change is None:
        return None
    index, item = change
    method = scope_of(name_node).type == "class_definition"
    offset = 1 if method and (old[:1] in (["self"], ["cls"])) else 0
    if index < offset:
        return None
    positional = [p for p in old if "=" not in p and not p.startswith("*")]
    added = len(new) > len(old)
    if added and ("=" in item or item.startswith("*")):
        return None  # a default or a splat: the calls stay valid
    param = item.split(":")[0].strip()
    return UserEdit(
        "parameter-added" if added else "parameter-removed",
        node_text(name_node),
        param if added else "",
        "method" if method else "function",
        (0, len(src)),
        byte_span(params),
        index=index - offset,
        count=len(positional) - offset,
        line=params.start_point[0],
    )


def _call_name(arguments: Node) -> tuple[str, bool] | None:
    call = arguments.parent
    if call is None or call.type != "call":
        return None
    function = call.child_by_field_name("function")
    if function is None:
        return None
    if function.type == "identifier":
        return node_text(function), False
    if function.type == "attribute":
        attr = function.child_by_field_name("attribute")
        if attr is not None:
            return node_text(attr), True
    return None


def _arguments_changed(
    language: str, src: bytes, arguments: Node, start: int, removed: bytes, inserted: int
) -> UserEdit | None:
    named = _call_name(arguments)
    if named is None:
        return None
    name, method = named
    old_text = _old_slice(src, byte_span(arguments), start, removed, inserted)
    old = _items(language, (b"_", b"\n"), old_text, "argument_list")
    new = [node_text(c) for c in arguments.named_children if c.type != "comment"]
    change = _one_difference(old, new)
    if change is None:
        return None
    index, item = change
    if "=" in item.split("(")[0] or item.startswith("*"):
        return None
    positional = [a for a in old if not _is_keyword_arg(a) and not a.startswith("*")]
    dropped = len(new) < len(old)
    if dropped:
        # one call brought in line with a definition that lost a parameter (an accepted
        # follow-up of the removal, or the user's own): the other calls are next
        fits = index < len(positional) and _defined_exactly(src, name, len(positional) - 1)
    else:
        fits = index <= len(positional) and _defined_with(src, name, len(positional) + 1)
    if not fits:
        return None
    return UserEdit(
        "argument-removed" if dropped else "argument-added",
        name,
        "" if dropped else item,
        "method" if method else "function",
        (0, len(src)),
        byte_span(arguments),
        index=index,
        count=len(positional),
        line=arguments.start_point[0],
    )


def _is_keyword_arg(text: str) -> bool:
    head = text.split("=", 1)
    return len(head) == 2 and head[0].strip().isidentifier() and not head[1].startswith("=")


def _definition_arities(src: bytes, name: str) -> list[tuple[int, bool]]:
    """Each ``def name(...)`` of the file: its plain parameter count, whether it splats."""
    pattern = re.compile(rb"def\s+" + re.escape(name.encode()) + rb"\s*\(([^)]*)\)")
    found = []
    for match in pattern.finditer(src):
        params = [p.strip() for p in match.group(1).split(b",") if p.strip()]
        plain = [p for p in params if p not in (b"self", b"cls", b"/", b"*")]
        found.append((len(plain), any(p.startswith(b"*") for p in plain)))
    return found


def _defined_exactly(src: bytes, name: str, arity: int) -> bool:
    """True when the file defines ``name`` with exactly ``arity`` parameters and no splat."""
    return any(n == arity and not splat for n, splat in _definition_arities(src, name))


def _defined_with(src: bytes, name: str, arity: int) -> bool:
    """True when the file defines ``name`` taking ``arity`` positional arguments (or more)."""
    return any(splat or n >= arity for n, splat in _definition_arities(src, name))
