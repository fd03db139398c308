"""Backends: the model that turns prompt tokens into text (in-process llama.cpp or remote).

The public API is the contract in ``base``, the vocabulary reader (``vocab``: its
llama_cpp import happens on first use, not on import; ``VocabularyBackend``, a backend
that only tokenizes), ``LlamaEngine`` (a llama.cpp context over a vocabulary, whose
import loads no llama_cpp either) and the factory; the
implementations (``llama.LocalBackend``, ``remote.RemoteBackend``) are imported on
demand because loading llama.cpp is not free.
"""

from lsp_assist.backends.base import (
    BACKEND_USAGE_FIELDS,
    Backend,
    BackendUsage,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    InfillParts,
    ModelInfo,
    StopRule,
    time_caps,
)
from lsp_assist.backends.embedding import MAX_TOKENS as EMBEDDING_MAX_TOKENS
from lsp_assist.backends.embedding import Embedder, minilm_gguf_path
from lsp_assist.backends.factory import (
    create_backend,
    memory_plan,
    resolve_model_path,
    resolve_model_settings,
)
from lsp_assist.backends.llama_engine import LlamaEngine
from lsp_assist.backends.models import (
    DEFAULT_PRESET,
    PRESETS,
    ModelPreset,
    default_model_path,
    embedded_model_path,
    preset_assembled,
    preset_installed,
    preset_path,
    small_model_path,
)
from lsp_assist.backends.vocab import Vocabulary, VocabularyBackend, llama_cpp_lib, read_model_info

__all__ = [
    "BACKEND_USAGE_FIELDS",
    "DEFAULT_PRESET",
    "EMBEDDING_MAX_TOKENS",
    "PRESETS",
    "Backend",
    "BackendUsage",
    "CancelToken",
    "Embedder",
    "GenerationRequest",
    "GenerationResult",
    "InfillParts",
    "LlamaEngine",
    "ModelInfo",
    "ModelPreset",
    "StopRule",
    "Vocabulary",
    "VocabularyBackend",
    "create_backend",
    "default_model_path",
    "embedded_model_path",
    "llama_cpp_lib",
    "memory_plan",
    "minilm_gguf_path",
    "preset_assembled",
    "preset_installed",
    "preset_path",
    "read_model_info",
    "resolve_model_path",
    "resolve_model_settings",
    "small_model_path",
    "time_caps",
]
