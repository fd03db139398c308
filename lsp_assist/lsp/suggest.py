"""A serving :class:`~lsp_assist.serving.Suggestion` in lsprotocol's types.

What the inline and completion handlers share: each item's accept command
(``lspAssist.accept`` with the item's id: the request id, then ``<request id>.1`` ...,
which the editor's ``didShowCompletion`` and accepts then name) and the suggestion's
position in the client's encoding. The suggestion itself, the snapshot taken as the
request arrives and the client's position converted once against it, comes from
``Service.suggest``.
"""

from __future__ import annotations

from lsprotocol import types

from lsp_assist.serving import Suggestion

ACCEPT_COMMAND = "lspAssist.accept"


def accept_command(item: str) -> types.Command:
    """The accept command of the item ``item`` (counts the acceptance)."""
    return types.Command(title="Accept suggestion", command=ACCEPT_COMMAND, arguments=[item])


def lsp_position(found: Suggestion) -> types.Position:
    """The suggestion's position in the client's encoding."""
    line, character = found.lsp_pos
    return types.Position(line=line, character=character)
