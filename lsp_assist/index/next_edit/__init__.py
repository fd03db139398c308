"""Symbolic next edits: what a user's edit implies elsewhere, read from the syntax tree.

Three modules, one concept each: ``scopes`` (Python's scope rules on the tree: which
scope binds a name), ``user_edit`` (:func:`classify`: the user's latest edit as a
:class:`UserEdit`) and ``fixes`` (:func:`follow_ups`, :func:`follow_ups_elsewhere`: the
:class:`FollowUp` edits it implies, in its file and in the open files that import it).
They share public names only. No model: serving's ``NextEdits`` asks these, and the
model source (serving/next_edit_model.py) adds its rewrites beside them.
"""

from lsp_assist.index.next_edit.fixes import FollowUp, follow_ups, follow_ups_elsewhere
from lsp_assist.index.next_edit.user_edit import EditKind, UserEdit, classify

__all__ = ["EditKind", "FollowUp", "UserEdit", "classify", "follow_ups", "follow_ups_elsewhere"]
