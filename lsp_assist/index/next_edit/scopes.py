"""Python's scope rules on a tree-sitter tree, for the symbolic next edits.

Owns which scope binds a name: :data:`SCOPES` (the node types that open one: module,
function, lambda, class body, comprehension), :func:`binding_kind` (how an identifier
binds its name: definition, parameter, local, import), :func:`is_reference` (an
identifier that reads a variable), :func:`identifiers` (the identifiers spelling a name
in a byte span, found by regular expression and confirmed by the tree) and
:class:`Resolver` (which scope each occurrence of one name refers to: class bodies
invisible from their methods, ``global``/``nonlocal``, shadowing by a nested binding).
Both halves of next edits read the tree through these: ``user_edit`` (what the user
did) and ``fixes`` (what it implies).
"""

from __future__ import annotations

import re

from tree_sitter import Node

__all__ = [
    "SCOPES",
    "Resolver",
    "binding_kind",
    "byte_span",
    "enclosing",
    "identifiers",
    "is_field",
    "is_reference",
    "node_text",
    "scope_of",
]

SCOPES = frozenset(
    {
        "module",
        "function_definition",
        "lambda",
        "class_definition",
        "list_comprehension",
        "set_comprehension",
        "dictionary_comprehension",
        "generator_expression",
    }
)
"""The node types that open a scope of their own."""
_PATTERNS = frozenset(
    {
        "pattern_list",
        "tuple_pattern",
        "list_pattern",
        "list_splat_pattern",
        "tuple",
        "list",
        "parenthesized_expression",
        "expression_list",
    }
)
_TARGET_OF = {
    "assignment": "left",
    "augmented_assignment": "left",
    "for_statement": "left",
    "for_in_clause": "left",
}
_PARAM_LISTS = frozenset({"parameters", "lambda_parameters"})


def node_text(node: Node) -> str:
    """The node's source text."""
    return (node.text or b"").decode("utf-8", "replace")


def byte_span(node: Node) -> tuple[int, int]:
    """The node's bytes, ``(start, end)``: how the analysis names a node or a scope."""
    return node.start_byte, node.end_byte


def is_field(node: Node, parent: Node, field: str) -> bool:
    """True when ``node`` is ``parent``'s child ``field`` (a def's name, a call's function)."""
    child = parent.child_by_field_name(field)
    return child is not None and byte_span(child) == byte_span(node)


def scope_of(node: Node) -> Node:
    """The scope a name at ``node`` is read in (a def's own name: the enclosing scope)."""
    parent = node.parent
    definition = parent is not None and parent.type in ("function_definition", "class_definition")
    if definition and parent is not None and is_field(node, parent, "name"):
        node = parent
    current = node.parent
    while current is not None:
        if current.type in SCOPES:
            return current
        current = current.parent
    return node  # the root itself


def binding_kind(node: Node) -> str:
    """How an identifier binds its name ('' when it only reads it)."""
    parent = node.parent
    if parent is None:
        return ""
    kind = parent.type
    if kind in ("function_definition", "class_definition") and is_field(node, parent, "name"):
        return "function" if kind == "function_definition" else "class"
    if kind in _PARAM_LISTS:
        return "parameter"
    if kind in ("typed_parameter", "list_splat_pattern", "dictionary_splat_pattern"):
        grand = parent.parent
        if grand is not None and grand.type in _PARAM_LISTS:
            return "parameter"
    if kind in ("default_parameter", "typed_default_parameter"):
        return "parameter" if is_field(node, parent, "name") else ""
    if kind == "as_pattern_target":
        return "local"
    if kind == "named_expression":
        return "local" if is_field(node, parent, "name") else ""
    if kind == "aliased_import":
        return "import" if is_field(node, parent, "alias") else ""
    if kind == "dotted_name" and parent.parent is not None:
        grand = parent.parent
        if grand.type == "import_statement" and parent.named_child_count == 1:
            return "import"
        if grand.type == "import_from_statement" and not is_field(parent, grand, "module_name"):
            return "import" if parent.named_child_count == 1 else ""
    child: Node = node
    current: Node | None = parent
    while current is not None and current.type in _PATTERNS:
        child, current = current, current.parent
    if current is not None and current.type in _TARGET_OF:
        return "local" if is_field(child, current, _TARGET_OF[current.type]) else ""
    return ""


def is_reference(node: Node) -> bool:
    """True for an identifier that names a variable (not an attribute nor a keyword)."""
    parent = node.parent
    if parent is None:
        return False
    if parent.type == "attribute" and is_field(node, parent, "attribute"):
        return False
    if parent.type == "keyword_argument" and is_field(node, parent, "name"):
        return False
    return parent.type not in ("global_statement", "nonlocal_statement")


def identifiers(root: Node, src: bytes, name: str, span: tuple[int, int]) -> list[Node]:
    """The identifier nodes spelling ``name`` in the byte span (found by regex)."""
    pattern = re.compile(rb"(?<![A-Za-z0-9_])" + re.escape(name.encode()) + rb"(?![A-Za-z0-9_])")
    found: list[Node] = []
    for match in pattern.finditer(src, span[0], span[1]):
        node = root.named_descendant_for_byte_range(match.start(), match.end())
        if node is not None and node.type == "identifier" and byte_span(node) == match.span():
            found.append(node)
    return found


class Resolver:
    """Which scope each occurrence of one name refers to (memoised per scope)."""

    def __init__(self, root: Node, src: bytes, name: str, assumed: tuple[int, int] | None) -> None:
        self.root = root
        self.src = src
        self.name = name
        self.assumed = assumed
        """A scope taken to bind the name even if the tree no longer shows it (a rename)."""
        self._binds: dict[tuple[int, int], bool] = {}
        self._declared: dict[tuple[int, int], bool] = {}

    def _scan(self, scope: Node) -> None:
        key = byte_span(scope)
        binds = declared = False
        for node in identifiers(self.root, self.src, self.name, key):
            parent = node.parent
            if parent is not None and parent.type in ("global_statement", "nonlocal_statement"):
                if byte_span(scope_of(node)) == key:
                    declared = True
            elif binding_kind(node) and byte_span(scope_of(node)) == key:
                binds = True
        self._binds[key] = binds
        self._declared[key] = declared

    def binds(self, scope: Node) -> bool:
        """True when ``scope`` binds the name itself (not through global/nonlocal)."""
        key = byte_span(scope)
        if key not in self._binds:
            self._scan(scope)
        if self._declared[key]:
            return False
        return key == self.assumed or self._binds[key]

    def resolve(self, node: Node) -> Node | None:
        """The scope that binds the name read at ``node`` (None: a builtin or unknown)."""
        scope: Node | None = scope_of(node)
        first = True
        while scope is not None:
            if (first or scope.type != "class_definition") and self.binds(scope):
                return scope
            first = False
            scope = scope.parent
            while scope is not None and scope.type not in SCOPES:
                scope = scope.parent
        return None


def enclosing(node: Node | None, kinds: frozenset[str] | tuple[str, ...]) -> Node | None:
    """``node`` or its nearest ancestor of one of ``kinds`` (None: none)."""
    while node is not None and node.type not in kinds:
        node = node.parent
    return node
