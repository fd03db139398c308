"""The ``related`` layer: the retriever's choice rendered as prompt pieces.

Owns :func:`related_layer`: the zone's text as the retriever's query (on the cursor line
only finished calls and attribute chains count), the candidates, what the line asks for
(``demand.py``: pins, the line's names, the receiver's class) ahead of them, the
selection within the layer's budget, and the pieces (a header per source file, one
piece per definition) with their explain items.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from lsp_assist.context.layout import PieceMaker, Rendered, cost
from lsp_assist.context.model import Cursor, LayerItem
from lsp_assist.context.retrieval.names import REFERENCE, partial_identifier
from lsp_assist.context.retrieval.retriever import Retriever
from lsp_assist.context.retrieval.scoring import Candidate
from lsp_assist.context.retrieval.selection import Chosen
from lsp_assist.context.zone import Zone
from lsp_assist.index.model import Import


def related_layer(
    retriever: Retriever,
    maker: PieceMaker,
    cursor: Cursor,
    zone: Zone,
    imports: list[Import],
    recent: set[Path],
    budget: int,
    threshold: float,
    *,
    skip: Callable[[Path], bool] | None = None,
    demand: Sequence[Candidate] = (),
    only_demand: bool = False,
) -> tuple[Rendered, list[Candidate]]:
    """Return the ``related`` layer within ``budget`` tokens and the candidates it holds.

    Definitions in a file ``skip`` answers true for are left out. ``demand`` (what the
    line asks for) goes first; with ``only_demand`` nothing else is looked for.
    """
    candidates = (
        [] if only_demand else _candidates(retriever, cursor, zone, imports, recent, threshold)
    )
    if skip is not None:
        candidates = [cand for cand in candidates if not skip(cand.symbol.path)]
    first = {cand.key for cand in demand}
    candidates = [*demand, *(cand for cand in candidates if cand.key not in first)]
    chosen = retriever.select(
        candidates,
        budget,
        maker.counter.count,
        lambda source: cost(maker.source_header("related", source, "From ", cursor.language)),
    )
    return _rendered(maker, cursor, chosen), [pick.candidate for pick in chosen]


def _candidates(
    retriever: Retriever,
    cursor: Cursor,
    zone: Zone,
    imports: list[Import],
    recent: set[Path],
    threshold: float,
) -> list[Candidate]:
    """Return the retriever's candidates for the zone, best first."""
    # On the cursor line only finished calls and attribute chains count (``name(``,
    # ``name.``): every other word being typed would reshuffle the layer.
    typed_refs = " ".join(REFERENCE.findall(zone.typed))
    near_lines = (zone.before.split("\n")[-3:]) if zone.before else []
    near = "\n".join([*near_lines, typed_refs, zone.after.split("\n", 1)[0]])
    zone_text = zone.before + typed_refs + "\n" + zone.after
    return retriever.candidates(
        path=cursor.path,
        language=cursor.language,
        zone_text=zone_text,
        near_text=near,
        typed_partial=partial_identifier(zone.typed),
        imports=imports,
        recent=recent,
        threshold=threshold,
        text=cursor.text,
        cursor_line=cursor.line,
        cursor_text=typed_refs,
    )


def _rendered(maker: PieceMaker, cursor: Cursor, chosen: Sequence[Chosen]) -> Rendered:
    """Return the pieces of the chosen definitions, a header before each file's first."""
    out = Rendered()
    current = None
    for pick in chosen:
        cand, text = pick.candidate, pick.text
        if cand.source != current:
            out.pieces += maker.source_header("related", cand.source, "From ", cursor.language)
            current = cand.source
        piece = maker.piece("related", text)
        out.pieces.append(piece)
        out.items.append(
            LayerItem(
                source=cand.source,
                symbol=cand.label,
                score=cand.score,
                reason=cand.reason + pick.note,
                tokens=len(piece.ids),
                text=text,
            )
        )
    return out
