"""Alternatives: how many suggestions a request asks for, and which of them are shown.

An explicit request from a client that cycles items (the LSP inline handler on
triggerKind Invoked) asks the backend for ``alternatives`` suggestions (the setting);
every other request, automatic triggers above all, asks for one: each further
suggestion is one more decode while the user waits. The backend returns the greedy
suggestion and branches that start with the next most likely first tokens; serving
post-processes each one like the first and shows them in that order, without the
empty ones and without repeats.
"""

from __future__ import annotations

from collections.abc import Iterable

from lsp_assist.config import MAX_ALTERNATIVES, CompletionSettings
from lsp_assist.serving.model import CompletionQuery


def wanted(query: CompletionQuery, settings: CompletionSettings) -> int:
    """Return how many suggestions to ask the backend for (1 unless explicitly wanted)."""
    if not query.want_alternatives or query.trigger == "automatic":
        return 1
    return max(1, min(settings.alternatives, MAX_ALTERNATIVES))


def distinct(first: str, others: Iterable[str]) -> tuple[str, tuple[str, ...]]:
    """Return the suggestion to show first and the rest, in order, none empty or repeated.

    ``first`` (the greedy suggestion) stays first; when it is empty the next one takes
    its place.
    """
    shown: list[str] = []
    for text in (first, *others):
        if text and text not in shown:
            shown.append(text)
    if not shown:
        return "", ()
    return shown[0], tuple(shown[1:])
