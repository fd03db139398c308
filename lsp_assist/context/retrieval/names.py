"""Names in code text: the identifiers, attribute chains and references retrieval looks up.

Owns the patterns (``IDENT``, ``ATTRIBUTE``, ``BARE``, ``REFERENCE``), ``KEYWORDS`` (the
words never looked up) and :func:`identifiers`, :func:`subwords`,
:func:`partial_identifier`; no index, no scoring.
"""

from __future__ import annotations

import re

IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# overlapping: ``a.b.c`` gives (a, b) and (b, c)
ATTRIBUTE = re.compile(
    r"(?<![A-Za-z0-9_])(?=([A-Za-z_][A-Za-z0-9_]*)\s*(?:\.|::|->)\s*([A-Za-z_][A-Za-z0-9_]*))"
)
"""An (object, attribute) pair (``a.b``, ``a::b``, ``a->b``), overlapping along a chain."""
BARE = re.compile(r"(?<![.\w>:])\s*([A-Za-z_][A-Za-z0-9_]*)")
"""A name not reached through an object (no ``.``, ``::`` or ``->`` before it)."""
REFERENCE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\s*(?:\(|\.|::|->)(?:\s*[A-Za-z_][A-Za-z0-9_]*)?")
"""A finished call or attribute chain (``name(``, ``name.``, ``name::``, ``name->``)."""

KEYWORDS = frozenset(
    """
    and as assert async await break case catch class const continue def default defer del
    delete do elif else enum except export extends false finally fn for from func function
    global go goto if impl import in instanceof interface is lambda let loop match mod
    module mut new nil none None not null or package pass pub raise return self Self static
    struct super switch this throw throws true True False try type typeof union unsafe use
    using var void where while with yield int float str bool char double long short
    unsigned signed auto bytes dict list set tuple print len range isinstance object string
    boolean number any undefined include define ifdef ifndef endif namespace template
    typename public private protected final abstract override virtual extern inline sizeof
    crate where dyn ref move chan map make append error println printf std err ok Ok Err
    Some Option Result Vec String Box main init __init__ cls args kwargs
    """.split()  # noqa: SIM905
)


def identifiers(text: str) -> list[str]:
    """Return the identifiers of ``text`` that are worth looking up, in order of appearance."""
    seen: dict[str, None] = {}
    for name in IDENT.findall(text):
        if len(name) > 1 and name not in KEYWORDS:
            seen.setdefault(name, None)
    return list(seen)


_WORD_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def subwords(name: str) -> set[str]:
    """Return the lower-case words of an identifier (snake_case and camelCase), 3+ letters."""
    return {w.lower() for w in _WORD_PARTS.findall(name) if len(w) >= 3}


def partial_identifier(typed: str) -> str:
    """Return the identifier being typed at the end of ``typed`` ('' when none)."""
    match = re.search(r"[A-Za-z_][A-Za-z0-9_]*$", typed)
    return match.group(0) if match else ""
