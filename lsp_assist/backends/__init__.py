"""Backends: the model that turns prompt tokens into text (in-process llama.cpp or remote).

The public API is the contract in ``base``, the vocabulary reader (``vocab``: its
llama_cpp import happens on first use, not on import) and the factory; the
implementations (``llama.LocalBackend``, ``remote.RemoteBackend``) are imported on
demand because loading llama.cpp is not free.
"""

from lsp_assist.backends.base import (
    BACKEND_FIELDS,
    USAGE_FIELDS,
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    StopRule,
    Usage,
)
from lsp_assist.backends.embedding import MAX_TOKENS as EMBEDDING_MAX_TOKENS
from lsp_assist.backends.embedding import Embedder, minilm_gguf_path
from lsp_assist.backends.factory import create_backend, resolve_model_path
from lsp_assist.backends.models import embedded_model_path, small_model_path
from lsp_assist.backends.vocab import Vocabulary, read_model_info

__all__ = [
    "BACKEND_FIELDS",
    "EMBEDDING_MAX_TOKENS",
    "USAGE_FIELDS",
    "Backend",
    "CancelToken",
    "Embedder",
    "GenerationRequest",
    "GenerationResult",
    "ModelInfo",
    "StopRule",
    "Usage",
    "Vocabulary",
    "create_backend",
    "embedded_model_path",
    "minilm_gguf_path",
    "read_model_info",
    "resolve_model_path",
    "small_model_path",
]
