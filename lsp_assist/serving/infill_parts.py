"""A built prompt's parts for a server that assembles its own FIM prompt (``/infill``).

llama-server's ``/infill`` takes the prompt in pieces (the code before the cursor line,
the text after the cursor, the typed part of the line, other files' chunks) and builds
the FIM prompt with the model's own tokens. :func:`infill_parts` reads those pieces off
an :class:`~lsp_assist.context.AssembledPrompt` and the snapshot it was built from, so
the server gets what the context engine chose (its editing zone, its related
definitions and similar chunks) and nothing is re-parsed out of the prompt text.
"""

from __future__ import annotations

from itertools import groupby
from operator import attrgetter

from lsp_assist.backends import InfillParts
from lsp_assist.context import AssembledPrompt
from lsp_assist.documents import DocumentSnapshot

EXTRA_LAYERS = ("related", "similar")
"""The layers whose items go to the server as extra files, in prompt order."""


def zone_start(zone_text: str, snapshot: DocumentSnapshot, line: int) -> int:
    """Return where the longest run of whole lines above ``line`` found in ``zone_text`` starts.

    The editing zone's layer holds the zone's lines before the cursor line as one piece,
    whatever the format's order; the run found is that piece (``line`` when none is).
    """
    start, block = line, ""
    while start > 0:
        grown = snapshot.line(start - 1) + "\n" + block
        if grown not in zone_text:
            break
        start, block = start - 1, grown
    return start


def infill_parts(
    prompt: AssembledPrompt, snapshot: DocumentSnapshot, line: int, column: int
) -> InfillParts:
    """Return the parts of ``prompt`` built at (``line``, ``column``) of ``snapshot``."""
    zone_text = "".join(layer.text for layer in prompt.layers if layer.name == "editing_zone")
    start = zone_start(zone_text, snapshot, line)
    prefix = "".join(snapshot.line(i) + "\n" for i in range(start, line))
    # one chunk per run of a layer's items from one file, as the local prompt has one
    # header per run: the server writes <|file_sep|>name before each chunk
    extra = tuple(
        (source, "".join(item.text for item in run))
        for layer in prompt.layers
        if layer.name in EXTRA_LAYERS
        for source, run in groupby(
            (item for item in layer.items if item.text), key=attrgetter("source")
        )
    )
    return InfillParts(
        prefix=prefix,
        suffix=prompt.suffix,
        typed=snapshot.line(line)[:column],
        extra=extra,
    )
