"""Similar code: chunks of recently opened and edited files that look like the editing zone.

A secondary, lexical retriever: each recent file is cut into overlapping windows of
lines, each window keeps its set of identifiers, and a window is scored by the
Jaccard similarity of that set with the editing zone's. Windows under the threshold
are dropped; the rest compete for what the related definitions left of their share.

A window is two consecutive blocks of ``STRIDE`` lines, so a file is indexed once per
text as the identifier set of each block (one regex pass); a search intersects the
query with each block and scores only the windows that share something with it.
:func:`similar_layer` renders the hits as the prompt's ``similar`` layer.
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.config import Bounded
from lsp_assist.context.layout import PieceMaker, Rendered, cost
from lsp_assist.context.model import Cursor, LayerItem
from lsp_assist.context.retrieval import KEYWORDS, Candidate, Retriever, identifiers
from lsp_assist.context.zone import Zone

WINDOW = 12
STRIDE = 6
MAX_CHUNKS = 3
assert WINDOW == 2 * STRIDE, "a window is two consecutive blocks"


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
    reason: str = "identifier overlap (Jaccard)"


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]+")
"""The identifiers of :data:`IDENT` longer than one character (what ``identifiers`` keeps)."""


@dataclass(frozen=True, slots=True)
class _FileWindows:
    """The windows of one text, as the identifier sets of its blocks of ``STRIDE`` lines."""

    path: Path
    text: str
    lines: list[str]
    blocks: tuple[frozenset[str], ...]
    sizes: tuple[int, ...]
    """The identifier count of each window."""

    @property
    def n_windows(self) -> int:
        return len(self.sizes)

    def span(self, w: int) -> tuple[int, int]:
        start = w * STRIDE
        return start, min(len(self.lines), start + WINDOW) - 1

    def idents(self, w: int) -> frozenset[str]:
        if w + 1 < len(self.blocks):
            return self.blocks[w] | self.blocks[w + 1]
        return self.blocks[w]

    def chunk(self, w: int) -> Chunk:
        start, end = self.span(w)
        body = "\n".join(self.lines[start : end + 1]).strip("\n")
        return Chunk(
            path=self.path, start_line=start, end_line=end, text=body + "\n", idents=self.idents(w)
        )


def _index(path: Path, text: str) -> _FileWindows:
    lines = text.split("\n")
    blocks = tuple(
        frozenset(_NAME.findall("\n".join(lines[s : s + STRIDE]))) - KEYWORDS
        for s in range(0, len(lines), STRIDE)
    )
    n = len(lines)
    n_windows = 1 if n <= WINDOW else -(-(n - WINDOW) // STRIDE) + 1
    sizes = tuple(
        len(blocks[w] | blocks[w + 1]) if w + 1 < len(blocks) else len(blocks[w])
        for w in range(n_windows)
    )
    return _FileWindows(path, text, lines, blocks, sizes)


SIMILAR_FILES = 256
"""Files whose windows (text, lines and identifier sets: ~100 KB for a 30 KB file) are
kept, least recently used dropped. The layer searches the recent files (``recentFiles``)
and the open ones: past this many open files each build would split them again."""


class SimilarCode:
    """Jaccard search over identifier sets of windows of recent files (cached per text)."""

    def __init__(self) -> None:
        self._files: OrderedDict[Path, _FileWindows] = OrderedDict()

    def bounds(self) -> dict[str, Bounded]:
        """The files whose windows are kept, against ``SIMILAR_FILES``."""
        return {
            "similar.files": Bounded(
                len(self._files), SIMILAR_FILES, "files", "context/similar.py SIMILAR_FILES"
            )
        }

    def _windows(self, path: Path, text: str) -> _FileWindows:
        found = self._files.get(path)
        if found is not None and (found.text is text or found.text == text):
            self._files.move_to_end(path)
            return found
        made = _index(path, text)
        self._files[path] = made
        self._files.move_to_end(path)
        while len(self._files) > SIMILAR_FILES:
            self._files.popitem(last=False)
        return made

    def chunks(self, path: Path, text: str) -> list[Chunk]:
        """Return the windows of ``path`` that hold identifiers (cached until its text changes)."""
        fw = self._windows(path, text)
        return [fw.chunk(w) for w in range(fw.n_windows) if fw.sizes[w]]

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
        nq = len(q)
        scored: list[tuple[float, str, int, _FileWindows, int]] = []
        for path, text in files:
            fw = self._windows(path, text)
            shared = [q & names for names in fw.blocks]
            counts = list(map(len, shared))
            if not any(counts):
                continue
            last = len(shared) - 1
            sizes = fw.sizes
            rel = ""
            for w in range(len(sizes)):
                # a window is blocks w and w + 1; the score grows with the overlap: skip a
                # window whose largest possible overlap (both blocks' added) is nothing or
                # stays under the threshold
                most = counts[w] + counts[w + 1] if w < last else counts[w]
                if not most:
                    continue
                size = sizes[w]
                most = min(most, nq, size)
                if most / (nq + size - most) < threshold:
                    continue
                inter = len(shared[w] | shared[w + 1]) if w < last else counts[w]
                score = inter / (nq + size - inter)
                if score >= threshold:
                    start, end = fw.span(w)
                    if not exclude(path, start, end):
                        rel = rel or relative(path)
                        scored.append((score, rel, start, fw, w))
        scored.sort(key=lambda t: (-t[0], t[1], t[2]))
        hits: list[SimilarHit] = []
        for score, rel, start, fw, w in scored:
            end = fw.span(w)[1]
            if any(
                h.chunk.path == fw.path
                and not (end < h.chunk.start_line or start > h.chunk.end_line)
                for h in hits
            ):
                continue
            hits.append(SimilarHit(chunk=fw.chunk(w), source=rel, score=score))
            if len(hits) >= limit:
                break
        return hits


def similar_layer(
    similar: SimilarCode,
    retriever: Retriever,
    maker: PieceMaker,
    cursor: Cursor,
    zone: Zone,
    recent: set[Path],
    related: list[Candidate],
    budget: int,
    threshold: float,
    *,
    vectors: Callable[[list[SimilarHit], Callable[[Path, int, int], bool]], list[SimilarHit]]
    | None = None,
    skip: Callable[[Path], bool] | None = None,
) -> Rendered:
    """Return the ``similar`` layer: windows of ``recent`` files like the zone, within ``budget``.

    Windows overlapping a definition the related layer holds, and windows of files
    ``skip`` answers true for, are left out. ``vectors``
    (vector retrieval, ``context/vector_layer.py``) turns the windows and that exclusion into
    the fused list of windows and vector matches.
    """
    files: list[tuple[Path, str]] = []
    for path in sorted(recent, key=str):
        if path == cursor.path or retriever.denied(path) or (skip is not None and skip(path)):
            continue
        text = retriever.text_of(path)
        if text:
            files.append((path, text))
    out = Rendered()
    if not files and vectors is None:
        return out

    def exclude(path: Path, a: int, b: int) -> bool:
        return any(
            c.symbol.path == path and not (b < c.symbol.start_line or a > c.symbol.end_line)
            for c in related
        )

    hits = similar.search(
        zone.before + zone.after,
        files,
        threshold=threshold,
        relative=retriever.relative,
        exclude=exclude,
    )
    if vectors is not None:
        hits = vectors(hits, exclude)
        if skip is not None:
            hits = [hit for hit in hits if not skip(hit.chunk.path)]
    spent = 0
    kept = []
    for hit in hits:
        caption = f"Similar code (lines {hit.chunk.start_line + 1}-{hit.chunk.end_line + 1}) in "
        pieces = maker.source_header("similar", hit.source, caption, cursor.language)
        pieces.append(maker.piece("similar", hit.chunk.text + "\n"))
        tokens = cost(pieces)
        if spent + tokens <= budget:
            kept.append((hit, pieces))
            spent += tokens
    kept.sort(key=lambda pair: (pair[0].source, pair[0].chunk.start_line))
    for hit, pieces in kept:
        out.pieces += pieces
        out.items.append(
            LayerItem(
                source=hit.source,
                symbol=f"lines {hit.chunk.start_line + 1}-{hit.chunk.end_line + 1}",
                score=hit.score,
                reason=hit.reason,
                tokens=cost(pieces),
                text=hit.chunk.text,
            )
        )
    return out
