"""lsp-assist: AI code completions from an in-process GGUF model, served over LSP.

The pipeline is a plain Python API (no pygls): documents -> index -> context ->
backends -> serving, with telemetry around it. ``lsp_assist.lsp`` and
``lsp_assist.cli`` are thin layers on top.
"""

from lsp_assist._native import load_llama_first

load_llama_first()  # before anything imports numpy: a CUDA build crashes otherwise

from lsp_assist.config import Settings, parse_settings  # noqa: E402
from lsp_assist.errors import (  # noqa: E402
    BackendError,
    ConfigError,
    ContextError,
    LspAssistError,
    ModelLoadError,
)

__version__ = "0.1.0"

__all__ = [
    "BackendError",
    "ConfigError",
    "ContextError",
    "LspAssistError",
    "ModelLoadError",
    "Settings",
    "__version__",
    "parse_settings",
]
