"""The follow-up edits of a user's edit: what else a rename or a signature change needs.

Owns :func:`follow_ups` (in the edit's own file: the remaining references of a renamed
name in its scope, the ``self.m``/``Class.m`` uses of a renamed method, or the calls a
parameter or argument change leaves behind), :func:`follow_ups_elsewhere` (the same in
another open file that imports the name) and their value, :class:`FollowUp`, each with
the reason it is proposed. What the user did is ``user_edit``'s :class:`UserEdit`; which
scope a name resolves to is ``scopes``'.
"""

from __future__ import annotations

from dataclasses import dataclass

from tree_sitter import Node, Tree

from lsp_assist.index.languages import parse
from lsp_assist.index.next_edit.scopes import (
    SCOPES,
    Resolver,
    byte_span,
    enclosing,
    identifiers,
    is_field,
    is_reference,
    node_text,
)
from lsp_assist.index.next_edit.user_edit import EditKind, UserEdit

__all__ = ["FollowUp", "follow_ups", "follow_ups_elsewhere"]


@dataclass(frozen=True, slots=True)
class FollowUp:
    """One proposed edit: replace the bytes ``start_byte:end_byte`` with ``text``."""

    start_byte: int
    end_byte: int
    start_point: tuple[int, int]
    end_point: tuple[int, int]
    text: str
    kind: EditKind
    reason: str


def follow_ups(edit: UserEdit, src: bytes, tree: Tree | None) -> list[FollowUp]:
    """The edits ``edit`` implies in its own file (the remaining references or calls)."""
    root = (tree or parse("python", src)).root_node
    if edit.kind == "rename":
        return _renames(edit, root, src)
    return _calls(edit, root, src, skip=edit.site, module="")


def follow_ups_elsewhere(
    edit: UserEdit, module: str, src: bytes, tree: Tree | None
) -> list[FollowUp]:
    """The edits ``edit`` (made in module ``module``) implies in another open Python file."""
    if not edit.module_level:
        return []
    root = (tree or parse("python", src)).root_node
    if edit.kind == "rename":
        if edit.what not in ("function", "class", "global name"):
            return []
        return _imported_renames(edit, module, root, src)
    if not _imports_name(root, src, module, edit.old):
        return []
    return _calls(edit, root, src, skip=None, module=module)


def _follow(node: Node, text: str, edit: UserEdit, reason: str) -> FollowUp:
    return FollowUp(
        node.start_byte,
        node.end_byte,
        node.start_point,
        node.end_point,
        text,
        edit.kind,
        reason,
    )


def _renames(edit: UserEdit, root: Node, src: bytes) -> list[FollowUp]:
    scope: Node | None = root
    if edit.scope != byte_span(root):
        scope = root.named_descendant_for_byte_range(*edit.scope)
    while scope is not None and (scope.type not in SCOPES or byte_span(scope) != edit.scope):
        scope = scope.parent
    if scope is None:
        return []
    resolver = Resolver(root, src, edit.old, edit.scope)
    found: list[FollowUp] = []
    reason = f"{edit.what} `{edit.old}` renamed to `{edit.new}` (line {edit.line + 1})"
    for node in identifiers(root, src, edit.old, edit.scope):
        if not is_reference(node):
            continue
        resolved = resolver.resolve(node)
        if resolved is not None and byte_span(resolved) == edit.scope:
            found.append(
                _follow(node, edit.new, edit, f"{reason}: this reference still says the old name")
            )
    if edit.what == "method" and scope.type == "class_definition":
        found += _method_uses(edit, root, src, scope, reason)
    return found


def _method_uses(edit: UserEdit, root: Node, src: bytes, cls: Node, reason: str) -> list[FollowUp]:
    """``self.name``/``cls.name`` in the class, ``Class.name`` anywhere in the file."""
    cls_name = cls.child_by_field_name("name")
    owner = node_text(cls_name) if cls_name is not None else ""
    found: list[FollowUp] = []
    for node in identifiers(root, src, edit.old, (0, len(src))):
        parent = node.parent
        if parent is None or parent.type != "attribute" or not is_field(node, parent, "attribute"):
            continue
        obj = parent.child_by_field_name("object")
        if obj is None or obj.type != "identifier":
            continue
        inside = cls.start_byte <= node.start_byte < cls.end_byte
        if (inside and node_text(obj) in ("self", "cls")) or node_text(obj) == owner:
            found.append(_follow(node, edit.new, edit, f"{reason}: `{node_text(parent)}` calls it"))
    return found


def _imports_name(root: Node, src: bytes, module: str, name: str) -> bool:
    for node in identifiers(root, src, name, (0, len(src))):
        statement = enclosing(node, ("import_from_statement",))
        if statement is None:
            continue
        source = statement.child_by_field_name("module_name")
        if source is not None and node_text(source).split(".")[-1] == module:
            return True
    return False


def _imported_renames(edit: UserEdit, module: str, root: Node, src: bytes) -> list[FollowUp]:
    found: list[FollowUp] = []
    reason = f"`{edit.old}` renamed to `{edit.new}` in {module}"
    if _imports_name(root, src, module, edit.old):
        resolver = Resolver(root, src, edit.old, None)
        for node in identifiers(root, src, edit.old, (0, len(src))):
            statement = enclosing(node, ("import_from_statement",))
            if statement is not None:
                source = statement.child_by_field_name("module_name")
                if source is not None and node_text(source).split(".")[-1] == module:
                    found.append(_follow(node, edit.new, edit, f"{reason}: imported here"))
                continue
            if not is_reference(node):
                continue
            resolved = resolver.resolve(node)
            if resolved is not None and resolved.type == "module":
                found.append(_follow(node, edit.new, edit, f"{reason}: used here"))
    for node in identifiers(root, src, edit.old, (0, len(src))):
        parent = node.parent
        if parent is None or parent.type != "attribute" or not is_field(node, parent, "attribute"):
            continue
        obj = parent.child_by_field_name("object")
        if obj is not None and node_text(obj).split(".")[-1] == module:
            found.append(_follow(node, edit.new, edit, f"{reason}: `{node_text(parent)}`"))
    return found


def _calls(
    edit: UserEdit, root: Node, src: bytes, *, skip: tuple[int, int] | None, module: str
) -> list[FollowUp]:
    """The calls of the function (bare, or ``module.f`` in another file) or method (``x.m``)."""
    found: list[FollowUp] = []
    for node in identifiers(root, src, edit.old, (0, len(src))):
        parent = node.parent
        if parent is None:
            continue
        call = parent
        if parent.type == "attribute" and is_field(node, parent, "attribute"):
            call = parent.parent if parent.parent is not None else parent
            if call.type != "call" or not is_field(parent, call, "function"):
                continue
            obj = parent.child_by_field_name("object")
            qualified = module and obj is not None and node_text(obj).split(".")[-1] == module
            if edit.what != "method" and not qualified:
                continue
        else:
            bare_call = parent.type == "call" and is_field(node, parent, "function")
            if edit.what == "method" or not bare_call:
                continue
        arguments = call.child_by_field_name("arguments")
        if arguments is None or arguments.type != "argument_list" or byte_span(arguments) == skip:
            continue
        fix = _fix_call(edit, arguments)
        if fix is not None:
            found.append(fix)
    return found


def _fix_call(edit: UserEdit, arguments: Node) -> FollowUp | None:
    args = [c for c in arguments.named_children if c.type != "comment"]
    if any(a.type in ("list_splat", "dictionary_splat") for a in args):
        return None
    positional = [a for a in args if a.type != "keyword_argument"]
    if len(positional) != edit.count or positional != args[: len(positional)]:
        return None
    where = f"`{edit.old}` at line {arguments.start_point[0] + 1}"
    if edit.kind in ("parameter-added", "argument-added"):
        if edit.kind == "parameter-added":
            reason = (
                f"parameter `{edit.new}` added to {edit.what} `{edit.old}` (line {edit.line + 1})"
            )
        else:
            reason = f"argument `{edit.new}` added to a call of `{edit.old}` (line {edit.line + 1})"
        reason += f": the call {where} passes {edit.count}"
        if edit.index < len(args):
            anchor = args[edit.index]
            return FollowUp(
                anchor.start_byte,
                anchor.start_byte,
                anchor.start_point,
                anchor.start_point,
                f"{edit.new}, ",
                edit.kind,
                reason,
            )
        if args:
            last = args[-1]
            return FollowUp(
                last.end_byte,
                last.end_byte,
                last.end_point,
                last.end_point,
                f", {edit.new}",
                edit.kind,
                reason,
            )
        inside = (arguments.start_point[0], arguments.start_point[1] + 1)
        start = arguments.start_byte + 1
        return FollowUp(start, start, inside, inside, edit.new, edit.kind, reason)
    if edit.index >= len(positional):
        return None
    if edit.kind == "argument-removed":
        reason = (
            f"argument {edit.index + 1} removed from a call of `{edit.old}` (line"
            f" {edit.line + 1}), as its definition takes {edit.count - 1}:"
            f" the call {where} still passes it"
        )
    else:
        reason = (
            f"parameter {edit.index + 1} removed from {edit.what} `{edit.old}`"
            f" (line {edit.line + 1}): the call {where} still passes it"
        )
    target = positional[edit.index]
    if edit.index + 1 < len(args):
        after = args[edit.index + 1]
        return FollowUp(
            target.start_byte,
            after.start_byte,
            target.start_point,
            after.start_point,
            "",
            edit.kind,
            reason,
        )
    if edit.index > 0:
        before = args[edit.index - 1]
        return FollowUp(
            before.end_byte,
            target.end_byte,
            before.end_point,
            target.end_point,
            "",
            edit.kind,
            reason,
        )
    return FollowUp(
        target.start_byte,
        target.end_byte,
        target.start_point,
        target.end_point,
        "",
        edit.kind,
        reason,
    )
