"""Trigger rules: whether a request at a position is worth a model call at all.

Pure functions of a snapshot, a position and the settings (no engine state): a
document too big for model work, and the rules for automatic triggers (mid-word, text
right of the cursor, inside a comment or a string). An empty reason means go.
"""

from __future__ import annotations

from tree_sitter import Tree

from lsp_assist.config import CompletionSettings, Settings
from lsp_assist.documents import DocumentSnapshot, Position, TextView


def oversized_reason(doc: TextView, settings: Settings) -> str:
    """Return why a document is too big for model work and parsing ('' = it is not)."""
    limit = settings.index.max_file_bytes
    if len(doc.text) > limit:
        return f"document larger than maxFileBytes ({limit})"
    if doc.longest_line > settings.completion.max_line_chars:
        return f"a line longer than maxLineChars ({settings.completion.max_line_chars})"
    return ""


def skip_reason(
    doc: DocumentSnapshot,
    pos: Position,
    trigger: str,
    completion: CompletionSettings,
    tree: Tree | None,
) -> str:
    """Return why an automatic trigger should not call the model here ('' = go)."""
    if trigger != "automatic":
        return ""
    line = doc.line(pos.line)
    before, after = line[: pos.column], line[pos.column :]
    if before and (before[-1].isalnum() or before[-1] == "_") and after[:1].isalnum():
        return "mid-word"
    if len(after.strip()) > completion.max_chars_right_of_cursor:
        return "text right of cursor"
    if (completion.skip_in_comments or completion.skip_in_strings) and tree is not None:
        row, col = doc.point_at(pos)
        # A comment runs to the end of its line, so the character before the
        # cursor decides; a string must enclose the cursor itself.
        if completion.skip_in_comments and _inside(tree, (row, max(0, col - 1)), "comment"):
            return "inside a comment"
        if completion.skip_in_strings and _inside(tree, (row, col), "string"):
            return "inside a string"
    return ""


def _inside(tree: Tree, point: tuple[int, int], kind: str) -> bool:
    """True when the node at ``point`` or one of its near ancestors is a ``kind`` node."""
    node = tree.root_node.descendant_for_point_range(point, point)
    for _ in range(4):
        if node is None:
            return False
        if kind in node.type and "interpolation" not in node.type:
            return True
        node = node.parent
    return False
