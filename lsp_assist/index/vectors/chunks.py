"""Chunks: what one embedded piece of the workspace is, and how a file is cut into them.

Owns :class:`ChunkSpan` (a definition's lines and label, keyed by the hash of the text
embedded for it), :class:`VectorHit` (a chunk a search found) and :func:`chunk_file`:
one chunk per definition from the syntax index (function, method, class header with its
docstring and member names), a long definition split into pieces of ``MAX_LINES``; the
embedded text starts with the file's path and the enclosing names
(``pkg/mod.py Class.method``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lsp_assist.index.model import Symbol

Matrix = npt.NDArray[np.float32]
"""A float32 vector or matrix (rows are L2-normalised embeddings)."""

CHUNK_KINDS = frozenset({"function", "method", "class", "interface", "struct", "enum", "type"})
CLASS_KINDS = frozenset({"class", "interface", "struct", "enum"})
MAX_LINES = 40
"""A definition longer than this is embedded as pieces of this many lines."""
HEADER_LINES = 20
"""A class's chunk: its header up to its first member, at most this many lines."""


@dataclass(frozen=True, slots=True)
class ChunkSpan:
    """One embedded piece of a definition: its lines (0-based, inclusive) and label."""

    start_line: int
    end_line: int
    label: str
    """The enclosing names and the definition's name, e.g. ``Parser.parse_args``."""
    kind: str
    key: str
    """Hash of the embedded text: the same text keeps its vector."""


@dataclass(frozen=True, slots=True)
class VectorHit:
    """A chunk that passed the threshold."""

    path: Path
    span: ChunkSpan
    score: float


def text_key(text: str) -> str:
    """Return the hash a chunk (or a file without a content hash) is known by."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=12).hexdigest()


def _label(sym: Symbol) -> str:
    return f"{sym.parent}.{sym.name}" if sym.parent else sym.name


def chunk_file(rel: str, symbols: Sequence[Symbol], text: str) -> list[tuple[ChunkSpan, str]]:
    """Return the chunks of one file with the text embedded for each (path and names first)."""
    lines = text.split("\n")
    out: list[tuple[ChunkSpan, str]] = []
    for sym in symbols:
        if sym.kind not in CHUNK_KINDS or sym.start_line >= len(lines):
            continue
        end = min(sym.end_line, len(lines) - 1)
        label = _label(sym)
        if sym.kind in CLASS_KINDS:
            members = [
                s for s in symbols if s.parent == sym.name and sym.start_line < s.start_line <= end
            ]
            # the header: docstring and attributes, up to the first member with a body
            stop = min(
                [end, sym.start_line + HEADER_LINES - 1]
                + [m.start_line - 1 for m in members if m.kind in CHUNK_KINDS]
            )
            stop = max(stop, sym.start_line)
            body = "\n".join(lines[sym.start_line : stop + 1])
            names = ", ".join(dict.fromkeys(m.name for m in members))
            embedded = f"{rel} {label}\n{body}" + (f"\nmembers: {names}" if names else "")
            out.append(
                (ChunkSpan(sym.start_line, stop, label, sym.kind, text_key(embedded)), embedded)
            )
            continue
        for part, start in enumerate(range(sym.start_line, end + 1, MAX_LINES)):
            stop = min(end, start + MAX_LINES - 1)
            body = "\n".join(lines[start : stop + 1])
            if not body.strip():
                continue
            shown = label if part == 0 else f"{label} (part {part + 1})"
            embedded = f"{rel} {shown}\n{body}"
            out.append((ChunkSpan(start, stop, shown, sym.kind, text_key(embedded)), embedded))
    return out
