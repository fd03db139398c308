"""The ``related`` layer: the retriever's choice rendered as prompt pieces.

Owns :func:`related_layer`: the zone's text as the retriever's query (on the cursor line
only finished calls and attribute chains count), the candidates, the selection within
the layer's budget, and the pieces (a header per source file, one piece per definition)
with their explain items.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from lsp_assist.context.layout import PieceMaker, Rendered, cost
from lsp_assist.context.model import Cursor, LayerItem
from lsp_assist.context.retrieval.names import REFERENCE, partial_identifier
from lsp_assist.context.retrieval.retriever import Retriever
from lsp_assist.context.retrieval.scoring import Candidate
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
) -> tuple[Rendered, list[Candidate]]:
    """Return the ``related`` layer within ``budget`` tokens and the candidates it holds.

    Definitions in a file ``skip`` answers true for are left out.
    """
    # On the cursor line only finished calls and attribute chains count (``name(``,
    # ``name.``): every other word being typed would reshuffle the layer.
    typed_refs = " ".join(REFERENCE.findall(zone.typed))
    near_lines = (zone.before.split("\n")[-3:]) if zone.before else []
    near = "\n".join([*near_lines, typed_refs, zone.after.split("\n", 1)[0]])
    zone_text = zone.before + typed_refs + "\n" + zone.after
    candidates = retriever.candidates(
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
    if skip is not None:
        candidates = [cand for cand in candidates if not skip(cand.symbol.path)]
    chosen = retriever.select(
        candidates,
        budget,
        maker.counter.count,
        lambda source: cost(maker.source_header("related", source, "From ", cursor.language)),
    )
    out = Rendered()
    current = None
    for pick in chosen:
        cand, text = pick.candidate, pick.text
        if cand.source != current:
            out.pieces += maker.source_header("related", cand.source, "From ", cursor.language)
            current = cand.source
        piece = maker.piece("related", text)
        out.pieces.append(piece)
        sym = cand.symbol
        out.items.append(
            LayerItem(
                source=cand.source,
                symbol=f"{sym.parent}.{sym.name}" if sym.parent else sym.name,
                score=cand.score,
                reason=cand.reason + pick.note,
                tokens=len(piece.ids),
                text=text,
            )
        )
    return out, [pick.candidate for pick in chosen]
