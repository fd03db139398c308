"""Backends: the model that turns prompt tokens into text (in-process llama.cpp or remote).

The public API is the contract in ``base`` and the factory; the implementations
(``llama.LocalBackend``, ``remote.RemoteBackend``) are imported on demand because
loading llama.cpp is not free.
"""

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
)
from lsp_assist.backends.factory import create_backend, resolve_model_path
from lsp_assist.backends.models import embedded_model_path, small_model_path

__all__ = [
    "Backend",
    "CancelToken",
    "GenerationRequest",
    "GenerationResult",
    "ModelInfo",
    "create_backend",
    "embedded_model_path",
    "resolve_model_path",
    "small_model_path",
]
