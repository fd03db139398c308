"""The vector index's wiring: which embedding model a workspace's vectors use, and where.

Owns :func:`embedding_model_path` (the ``vectorModel`` setting, default the packaged
MiniLM), :func:`open_workspace_vectors` (a :class:`~lsp_assist.index.VectorIndex` over a
workspace index with the embedding model as its factory, its vectors in the
workspace's cache database when the index persists) and
:func:`start_workspace_vectors` (the same, started behind the index's scan; None when
no model can be had). The index package only receives the factory: loading a model is
this layer's business. The model itself is loaded on the vector worker's thread.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from lsp_assist.backends import EMBEDDING_MAX_TOKENS, Embedder, minilm_gguf_path
from lsp_assist.config import Settings, workspace_cache_dir
from lsp_assist.errors import IndexError_, LspAssistError
from lsp_assist.index import Embedding, VectorIndex, VectorSource

logger = logging.getLogger(__name__)


def embedding_model_path(settings: Settings) -> Path:
    """Return the embedding GGUF the settings name (default: the packaged MiniLM)."""
    given = settings.context.vector_model
    return Path(given).expanduser() if given else minilm_gguf_path()


def open_workspace_vectors(
    source: VectorSource, settings: Settings, workspace: Path | None
) -> VectorIndex:
    """Return the vector index of a workspace, not started (raises when no model can be had).

    Its vectors are kept in the workspace's cache database when the index persists; it
    follows the source's changes and yields to its foreground gate."""
    path = embedding_model_path(settings)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise IndexError_(f"cannot read the embedding model {path}: {exc}") from exc

    def load() -> Embedding:
        return Embedder(path, threads=1)

    cache_dir = (
        workspace_cache_dir(settings, workspace)
        if workspace is not None and settings.index.persist
        else None
    )
    model_id = f"{path.name}:{size}:{EMBEDDING_MAX_TOKENS}:chunks-v1"
    return VectorIndex(source, load, model_id=model_id, cache_dir=cache_dir)


def start_workspace_vectors(
    source: VectorSource,
    settings: Settings,
    workspace: Path | None,
    *,
    after: threading.Thread | None = None,
) -> VectorIndex | None:
    """Start the background vector index of a workspace (None when no model can be had).

    The worker starts after ``after`` (the index's background scan)."""
    try:
        vectors = open_workspace_vectors(source, settings, workspace)
    except LspAssistError as exc:
        logger.warning("vector retrieval off: %s", exc)
        return None
    vectors.start(after=after)
    return vectors
