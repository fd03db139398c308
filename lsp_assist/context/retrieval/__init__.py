"""Related definitions: the symbols the editing zone uses or the next statement will use.

Candidates are the identifiers of the editing zone (calls, attribute chains, type
names; the identifier being typed is left out until it is complete), the names the
current file imports, and the ``module.name`` attributes the file reaches through
imported modules. Each is looked up in the index and scored by the rules of
``scoring``; those below the relevance threshold are dropped, never added to fill
space. Definitions in the current file are left to the file summary, so nothing
duplicates the editing zone.

The modules, lowest first: ``names`` (identifiers in text), ``render`` (a definition's
whole, short and compact forms), ``scoring`` (:class:`Candidate` and the rules),
``selection`` (spending the layer's grant), ``retriever`` (:class:`Retriever`: the
memoised index reads and the candidates), ``demand`` (what the line being written asks
for: pins, its names the zone lacks, the receiver's class; off unless its setting is
on), ``layer`` (:func:`related_layer`, the prompt's ``related`` layer).
"""

from lsp_assist.context.retrieval.demand import CLASS_KINDS, demanded, parse_pin
from lsp_assist.context.retrieval.layer import related_layer
from lsp_assist.context.retrieval.names import (
    IDENT,
    KEYWORDS,
    identifiers,
    partial_identifier,
    subwords,
)
from lsp_assist.context.retrieval.retriever import Retriever
from lsp_assist.context.retrieval.scoring import Candidate
from lsp_assist.context.retrieval.selection import SIGNATURE_ONLY, Chosen

__all__ = [
    "CLASS_KINDS",
    "IDENT",
    "KEYWORDS",
    "SIGNATURE_ONLY",
    "Candidate",
    "Chosen",
    "Retriever",
    "demanded",
    "identifiers",
    "parse_pin",
    "partial_identifier",
    "related_layer",
    "subwords",
]
