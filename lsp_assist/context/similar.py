"""Similar code: chunks of recently opened and edited files that look like the editing zone.

A secondary, lexical retriever: each recent file is cut into overlapping windows of
lines, each window keeps its set of identifiers, and a window is scored by the
Jaccard similarity of that set with the editing zone's. Windows under the threshold
are dropped; the rest compete for what the related definitions left of their share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.context.retrieval import identifiers

WINDOW = 12
STRIDE = 6
MAX_CHUNKS = 3


@dataclass(frozen=True, slots=True)
class Chunk:
    """A window of lines of another file."""

    path: Path
    start_line: int
    end_line: int
    text: str
    idents: frozenset[str]


@dataclass(slots=True)
class SimilarHit:
    """A chunk that passed the threshold, with its score."""

    chunk: Chunk
    source: str
    score: float


class SimilarCode:
    """Jaccard search over identifier sets of windows of recent files (cached per text)."""

    def __init__(self) -> None:
        self._chunks: dict[Path, tuple[str, list[Chunk]]] = {}

    def chunks(self, path: Path, text: str) -> list[Chunk]:
        """Return the windows of ``path`` (cached until its text changes)."""
        found = self._chunks.get(path)
        if found is not None and (found[0] is text or found[0] == text):
            return found[1]
        lines = text.split("\n")
        out: list[Chunk] = []
        start = 0
        while start < len(lines):
            end = min(len(lines), start + WINDOW) - 1
            block = lines[start : end + 1]
            body = "\n".join(block).strip("\n")
            if body.strip():
                out.append(
                    Chunk(
                        path=path,
                        start_line=start,
                        end_line=end,
                        text=body + "\n",
                        idents=frozenset(identifiers(body)),
                    )
                )
            if end + 1 >= len(lines):
                break
            start += STRIDE
        if len(self._chunks) > 256:
            self._chunks.clear()
        self._chunks[path] = (text, out)
        return out

    def search(
        self,
        query: str,
        files: Iterable[tuple[Path, str]],
        *,
        threshold: float,
        relative: Callable[[Path], str],
        exclude: Callable[[Path, int, int], bool],
        limit: int = MAX_CHUNKS,
    ) -> list[SimilarHit]:
        """Return up to ``limit`` non-overlapping windows scoring >= ``threshold``, best first."""
        q = frozenset(identifiers(query))
        if len(q) < 3:
            return []
        scored: list[tuple[float, str, int, Chunk]] = []
        for path, text in files:
            rel = relative(path)
            for chunk in self.chunks(path, text):
                if not chunk.idents:
                    continue
                inter = len(q & chunk.idents)
                if not inter:
                    continue
                score = inter / len(q | chunk.idents)
                if score >= threshold and not exclude(path, chunk.start_line, chunk.end_line):
                    scored.append((score, rel, chunk.start_line, chunk))
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        hits: list[SimilarHit] = []
        for score, rel, _, chunk in scored:
            if any(
                h.chunk.path == chunk.path
                and not (chunk.end_line < h.chunk.start_line or chunk.start_line > h.chunk.end_line)
                for h in hits
            ):
                continue
            hits.append(SimilarHit(chunk=chunk, source=rel, score=score))
            if len(hits) >= limit:
                break
        return hits
