"""Spending the related layer's grant: which candidates go in, and in which form.

Owns :func:`select`: the definitions called at the cursor in full first, then a
compact signature of every other candidate, best first, then bodies (whole
definitions, else signature + doc) for the candidates that matter, while they fit;
and :class:`Chosen`, a candidate with the form it goes in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from lsp_assist.context.retrieval.scoring import Candidate
from lsp_assist.index.model import Symbol

AT_CURSOR = 0.95
"""Candidates scoring this much (named at the cursor, imported) get their body first."""

BODY_SCORE = 0.6
"""After every candidate has its signature, bodies go to those scoring at least this."""

AT_CURSOR_SHARE = 0.5
"""The body of a definition named at the cursor takes at most this share of the layer."""

BODY_SHARE = 0.25
"""Any other body takes at most this share of the layer."""


MAX_CONSIDERED = 48
"""At most this many candidates, best first, are rendered and counted for the layer."""

MIN_ITEM_TOKENS = 6
"""Below this many tokens left, no further signature is tried."""

SIGNATURE_ONLY = ", signature only"
"""What explain adds to the reason of a definition in its compact form."""

MAX_CHARS_PER_TOKEN = 8
"""A text longer than this many characters a token left is not tokenized to be tried."""


@dataclass(slots=True)
class Chosen:
    """A candidate selected for the layer, with the form it goes in."""

    candidate: Candidate
    text: str
    form: str
    """full (the whole definition), short (signature + doc + members) or signature."""
    tokens: int

    @property
    def note(self) -> str:
        """Return what explain adds to the reason for the form ('' when whole)."""
        return {"short": ", signature and doc", "signature": SIGNATURE_ONLY}.get(self.form, "")


def select(
    candidates: Sequence[Candidate],
    budget: int,
    count: Callable[[str], int],
    header_cost: Callable[[str], int],
    render: Callable[[Symbol, str], tuple[str, str, str] | None],
) -> list[Chosen]:
    """Return what goes into the layer within ``budget`` tokens, in prompt order.

    The definitions named at the cursor go in whole first (else as signature + doc; what
    the line asks for, ``Candidate.asked``, may take the whole layer so);
    then every other candidate, best first, gets its compact signature; then, best
    first, candidates scoring at least ``BODY_SCORE`` are enlarged to their whole
    definition (else signature + doc) while that fits. ``header_cost(source)`` is
    what the first definition from a file pays for the file's header; ``render`` gives a
    definition's (full, short, signature) texts.
    """
    chosen: dict[tuple[str, int], Chosen] = {}
    headers: set[str] = set()
    spent = 0

    def overlaps(cand: Candidate) -> bool:
        sym = cand.symbol
        return any(
            o.candidate.symbol.path == sym.path
            and not (
                sym.end_line < o.candidate.symbol.start_line
                or sym.start_line > o.candidate.symbol.end_line
            )
            for o in chosen.values()
        )

    rendered: dict[tuple[str, int], tuple[str, str, str] | None] = {}

    def forms(cand: Candidate) -> tuple[str, str, str] | None:
        if cand.key not in rendered:
            found = render(cand.symbol, cand.language)
            rendered[cand.key] = (
                None
                if found is None
                else (
                    found[0] + "\n",
                    found[1] + "\n",
                    found[2] + "\n",
                )
            )
        return rendered[cand.key]

    def add(cand: Candidate, options: list[tuple[str, str]]) -> None:
        nonlocal spent
        if cand.key in chosen or overlaps(cand):
            return
        header = 0 if cand.source in headers else header_cost(cand.source)
        for form, text in options:
            if len(text) // MAX_CHARS_PER_TOKEN > budget - spent - header:
                continue  # cannot fit: not worth tokenizing
            cost = count(text)
            if spent + cost + header <= budget:
                chosen[cand.key] = Chosen(cand, text, form, cost)
                spent += cost + header
                headers.add(cand.source)
                return

    ranked = list(candidates[:MAX_CONSIDERED])
    for cand in ranked:
        found = forms(cand) if cand.score >= AT_CURSOR else None
        if found is not None:
            options = [("full", found[0]), ("short", found[1])]
            share = 1.0 if cand.asked else AT_CURSOR_SHARE
            bodies = [(f, t) for f, t in options if count(t) <= budget * share]
            add(cand, [*bodies, ("signature", found[2])])
    for cand in ranked:
        if budget - spent < MIN_ITEM_TOKENS:
            break
        found = forms(cand)
        if found is not None:
            add(cand, [("signature", found[2])])
    for cand in ranked:
        item = chosen.get(cand.key)
        found = rendered.get(cand.key)
        if item is None or found is None or item.form != "signature":
            continue
        if cand.score < BODY_SCORE:
            continue
        for form, text in (("full", found[0]), ("short", found[1])):
            if text == item.text or len(text) // MAX_CHARS_PER_TOKEN > budget - spent:
                continue
            cost = count(text)
            if cost <= budget * BODY_SHARE and spent - item.tokens + cost <= budget:
                spent += cost - item.tokens
                chosen[cand.key] = Chosen(cand, text, form, cost)
                break
    return sorted(chosen.values(), key=lambda c: c.candidate.key)
