"""Vector retrieval for the prompt: the query embedded off the request path, hybrid merge.

This module owns:

- :func:`query_text`: what is embedded for a cursor: the ``QUERY_LINES`` nearest
  non-blank lines before the cursor line, then the typed part of the line;
- :class:`VectorLayer`: one thread of its own that embeds the newest query (an LRU of
  recent query vectors), :meth:`VectorLayer.prefetch` (called when a build starts: the
  embedding overlaps the zone and related layers) and :meth:`VectorLayer.merge`, which
  waits at most ``vector_wait_ms`` for the query (not ready: the build goes on without
  vectors), searches the workspace's chunks (:class:`~lsp_assist.index.VectorIndex`),
  drops matches under ``vector_threshold`` and those overlapping related definitions,
  and fuses them with the lexical (Jaccard) windows of the similar layer by reciprocal
  rank, overlapping chunks merged into one item.

The vector index and its model belong to the index side; this module only reads them.
The layer's thread is its owner's to stop (:meth:`VectorLayer.stop`): serving stops it
when its engine closes or drops the context engine for another model.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lsp_assist.config import Bounded, ContextSettings
from lsp_assist.context.similar import Chunk, SimilarHit
from lsp_assist.errors import LspAssistError
from lsp_assist.index.vectors import ChunkSpan, Matrix, VectorIndex

log = logging.getLogger(__name__)

QUERY_LINES = 8
"""Non-blank lines before the cursor line that make the query (with the typed part)."""
MAX_HITS = 3
"""Vector matches offered to the similar layer (before the budget)."""
RRF_K = 60
"""Reciprocal-rank fusion constant: each list adds 1 / (RRF_K + rank)."""
CACHE = 64
"""Queries whose vectors are kept (least recently embedded dropped)."""
QUERY_FILES = 256
"""Files whose latest query is remembered (emptied when full)."""
WAITS = 1000
"""Waits for a query's vector that are kept for the figures (the older half dropped)."""


def query_text(lines: list[str], line: int, col: int, n_lines: int = QUERY_LINES) -> str:
    """Return the query for a cursor: the nearest non-blank lines before it, then the typed part."""
    picked: list[str] = []
    i = min(line, len(lines)) - 1
    while i >= 0 and len(picked) < n_lines:
        if lines[i].strip():
            picked.append(lines[i])
        i -= 1
    picked.reverse()
    typed = lines[line][:col] if 0 <= line < len(lines) else ""
    if typed.strip():
        picked.append(typed)
    return "\n".join(picked)


@dataclass(frozen=True, slots=True)
class _Ranked:
    path: Path
    start: int
    end: int
    hit: SimilarHit


class VectorLayer:
    """Query embeddings on a thread of their own, and the hybrid merge into the similar layer."""

    def __init__(
        self,
        vectors: VectorIndex,
        *,
        text_of: Callable[[Path], str | None],
        relative: Callable[[Path], str],
    ) -> None:
        self.vectors = vectors
        self._text_of = text_of
        self._relative = relative
        self._cond = threading.Condition()
        self._pending: str | None = None
        self._done: OrderedDict[str, Matrix | None] = OrderedDict()
        self._queries: dict[Path, str] = {}
        self._stopped = False
        self.waited_ms: list[float] = []
        """How long each merge waited for its query (the last 1,000; 0 when ready)."""
        self.misses = 0
        """Merges that went on without vectors (the query was not ready in time)."""
        self._thread = threading.Thread(target=self._run, name="lsp-assist-query", daemon=True)
        self._thread.start()

    # -- the query thread --------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while self._pending is None and not self._stopped:
                    self._cond.wait()
                if self._stopped or self._pending is None:
                    return
                text, self._pending = self._pending, None
            try:
                vector = self.vectors.embed_query(text)
            except LspAssistError as exc:
                log.debug("query embedding failed: %s", exc)
                vector = None
            with self._cond:
                self._done[text] = vector
                while len(self._done) > CACHE:
                    self._done.popitem(last=False)
                self._cond.notify_all()

    def prefetch(self, path: Path, text: str) -> None:
        """Start embedding ``text`` as the query of ``path`` (newest wins) unless it is known."""
        with self._cond:
            self._queries[path] = text
            if len(self._queries) > QUERY_FILES:
                self._queries.clear()
                self._queries[path] = text
            if text in self._done or not text.strip() or self.vectors.model is None:
                return
            self._pending = text
            self._cond.notify_all()

    def vector_for(self, text: str, wait_s: float) -> Matrix | None:
        """Return the query's vector if it is ready within ``wait_s`` (else None)."""
        started = time.perf_counter()
        deadline = time.monotonic() + max(0.0, wait_s)
        with self._cond:
            while text not in self._done:
                left = deadline - time.monotonic()
                if left <= 0 or self._stopped:
                    break
                self._cond.wait(left)
            found = self._done.get(text)
        self.waited_ms.append((time.perf_counter() - started) * 1000)
        if len(self.waited_ms) > WAITS:
            del self.waited_ms[: WAITS // 2]
        if found is None:
            self.misses += 1
        return found

    def bounds(self) -> dict[str, Bounded]:
        """The vectors, queries and waits kept against this module's constants."""
        where = "context/vector_layer.py {}"
        with self._cond:
            done, queries = len(self._done), len(self._queries)
        return {
            "vector.vectors": Bounded(done, CACHE, "queries", where.format("CACHE")),
            "vector.queries": Bounded(queries, QUERY_FILES, "files", where.format("QUERY_FILES")),
            "vector.waits": Bounded(len(self.waited_ms), WAITS, "waits", where.format("WAITS")),
        }

    def stop(self) -> None:
        """Stop the query thread."""
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._thread.join(timeout=5)

    # -- retrieval and the merge -------------------------------------------------------

    def search(
        self,
        path: Path,
        *,
        threshold: float,
        wait_ms: int,
        exclude: Callable[[Path, int, int], bool],
        limit: int = MAX_HITS,
    ) -> list[SimilarHit]:
        """Return the vector matches for ``path``'s last prefetched query, as similar hits."""
        text = self._queries.get(path)
        if not text:
            return []
        query = self.vector_for(text, wait_ms / 1000)
        if query is None:
            return []

        def skip(p: Path, span: ChunkSpan) -> bool:
            return p == path or exclude(p, span.start_line, span.end_line)

        out: list[SimilarHit] = []
        for hit in self.vectors.search(query, limit=limit, threshold=threshold, skip=skip):
            source = self._text_of(hit.path)
            if source is None:
                continue
            lines = source.split("\n")[hit.span.start_line : hit.span.end_line + 1]
            body = "\n".join(lines).strip("\n")
            if not body:
                continue
            chunk = Chunk(
                hit.path, hit.span.start_line, hit.span.end_line, body + "\n", frozenset()
            )
            reason = f"vector cosine {hit.score:.2f} ({hit.span.kind} {hit.span.label})"
            out.append(SimilarHit(chunk, self._relative(hit.path), hit.score, reason))
        return out

    def hybrid(
        self, path: Path, settings: ContextSettings
    ) -> Callable[[list[SimilarHit], Callable[[Path, int, int], bool]], list[SimilarHit]]:
        """Return what the similar layer calls: its windows fused with this path's matches."""

        def fuse(
            lexical: list[SimilarHit], exclude: Callable[[Path, int, int], bool]
        ) -> list[SimilarHit]:
            found = self.search(
                path,
                threshold=settings.vector_threshold,
                wait_ms=settings.vector_wait_ms,
                exclude=exclude,
            )
            return merge(lexical, found)

        return fuse


def merge(lexical: list[SimilarHit], vector: list[SimilarHit]) -> list[SimilarHit]:
    """Fuse two ranked lists by reciprocal rank; overlapping chunks of a file become one item.

    The item kept for two overlapping chunks is the first seen (the lexical window); its
    reason names both scores. The fused score is scaled so that rank 1 in both lists is 1.0.
    """
    fused: dict[int, float] = {}
    reasons: dict[int, list[str]] = {}
    items: list[_Ranked] = []
    for scored, hits in ((True, lexical), (False, vector)):
        for rank, hit in enumerate(hits):
            c = hit.chunk
            match = next(
                (
                    i
                    for i, it in enumerate(items)
                    if it.path == c.path and not (c.end_line < it.start or c.start_line > it.end)
                ),
                None,
            )
            gain = 1.0 / (RRF_K + rank + 1)
            if match is None:
                items.append(_Ranked(c.path, c.start_line, c.end_line, hit))
                match = len(items) - 1
                fused[match] = 0.0
                reasons[match] = []
            fused[match] += gain
            # a vector match's reason carries its cosine; a lexical one gets its score
            reasons[match].append(f"{hit.reason} {hit.score:.2f}" if scored else hit.reason)
    scale = (RRF_K + 1) / 2
    order = sorted(
        range(len(items)), key=lambda i: (-fused[i], items[i].hit.source, items[i].start)
    )
    out: list[SimilarHit] = []
    for i in order:
        hit = items[i].hit
        reason = " + ".join(reasons[i])
        if len(reasons[i]) > 1:
            reason = f"hybrid: {reason}"
        out.append(SimilarHit(hit.chunk, hit.source, fused[i] * scale, reason))
    return out


def attach_vectors(context: Any, vectors: VectorIndex | None, index: Any) -> None:
    """Give a context engine the vector layer over ``vectors`` (nothing when None).

    A layer it had before is stopped: its query thread is not left behind."""
    if vectors is None:
        return
    old = context.vectors
    context.vectors = VectorLayer(vectors, text_of=index.text_of, relative=index.relative)
    if old is not None:
        old.stop()
