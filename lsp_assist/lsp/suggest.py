"""Ask the engine for suggestions at an LSP position: what the completion handlers share.

The snapshot is taken here, as the request arrives, and the client's position is
converted against it once (``CompletionQuery.at``); the handlers get back a
:class:`Suggestion` with the position both ways, so none converts it again. Each item
gets its own id (``telemetry.item_id``: the request id, then ``<request id>.1`` ...) in
its accept command, and is offered to the session's shown-suggestion tracker, which the
editor's ``didShowCompletion`` and accepts then name.
"""

from __future__ import annotations

from dataclasses import dataclass

from lsprotocol import types

from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.lsp.server import LspAssistServer
from lsp_assist.serving import CompletionQuery
from lsp_assist.telemetry import OfferedItem, item_id, trigger_kind

ACCEPT_COMMAND = "lspAssist.accept"


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What an LSP handler shows: the texts at a position of the snapshot they were made for."""

    texts: tuple[str, ...]
    """One, or with alternatives asked for up to the ``alternatives`` setting, greedy first."""
    pos: Position
    """The cursor in code points (the snapshot's)."""
    lsp_pos: types.Position
    """The cursor in the client's encoding."""
    commands: tuple[types.Command, ...]
    """Each item's accept command (counts the acceptance; its argument is the item's id)."""
    snapshot: DocumentSnapshot
    """The buffer as it was when the request arrived."""

    @property
    def accept(self) -> types.Command:
        """The first item's accept command."""
        return self.commands[0]


async def suggest(
    ls: LspAssistServer,
    uri: str,
    position: types.Position,
    *,
    automatic: bool,
    alternatives: bool = False,
    early: bool = False,
) -> Suggestion | None:
    """Ask the engine for suggestions at an LSP position; None when there is nothing to show.

    With ``alternatives`` an explicit request asks for more than one. With ``early``
    (ghost text, which the type-through cache and ``lspAssist/suggestionReady``
    extend) the engine may answer with the suggestion's start (serving/early.py). The
    engine works on the snapshot taken here while edits go on.
    """
    buffers, scheduler = ls.buffers, ls.scheduler
    snapshot = buffers.snapshot(uri, disk=False) if buffers is not None else None
    if scheduler is None or snapshot is None:
        return None
    query = CompletionQuery.at(
        snapshot,
        position.line,
        position.character,
        ls.encoding,
        trigger="automatic" if automatic else "invoked",
        want_alternatives=alternatives and not automatic,
        answer_early=early,
    )
    outcome = await scheduler.complete(query)
    if not outcome.text:
        return None
    pos = snapshot.clamp(outcome.line, outcome.column)
    line, character = snapshot.to_lsp(pos, ls.encoding)
    ids = [item_id(outcome.request_id, i) for i in range(len(outcome.items))]
    session = ls.session
    if session is not None:
        line_text, model = snapshot.line(pos.line), session.model_name()
        for name, text in zip(ids, outcome.items, strict=True):
            offered = OfferedItem(
                item=name,
                request_id=outcome.request_id,
                uri=uri,
                line=pos.line,
                column=pos.column,
                before=line_text[: pos.column],
                text=text,
                after=line_text[pos.column :],
                trigger=trigger_kind(query.trigger),
                model=model,
                language=snapshot.language_id,
            )
            session.shown.offer(offered)
    commands = tuple(
        types.Command(title="Accept suggestion", command=ACCEPT_COMMAND, arguments=[name])
        for name in ids
    )
    return Suggestion(
        texts=outcome.items,
        pos=pos,
        lsp_pos=types.Position(line=line, character=character),
        commands=commands,
        snapshot=snapshot,
    )
