"""The exception tree of lsp-assist, documented in one place.

    LspAssistError                 base of everything this package raises
    ├── ConfigError                a setting that cannot be used (the caller falls back to defaults)
    ├── UsageError                 a command names what is not there (no such document)
    ├── DocumentError              an edit or position that does not fit the document
    ├── IndexError_                the workspace index cannot do what was asked
    ├── ContextError               the prompt cannot be assembled
    └── BackendError               anything the model side cannot do
        ├── ModelLoadError         the GGUF is missing, corrupt, or not a GGUF
        ├── DraftModelError        the draft model cannot be used with the main model
        ├── GenerationCancelled    generation was stopped by a cancel flag or a time cap
        └── RemoteBackendError     the remote server failed after retries
            └── CircuitOpenError   too many recent failures: calls are refused for a while

Third-party errors (llama_cpp, httpx, tree_sitter, sqlite3) are mapped to these at the
module boundary with ``raise ... from exc``.
"""

from __future__ import annotations


class LspAssistError(Exception):
    """Base class of every error lsp-assist raises on purpose."""


class ConfigError(LspAssistError):
    """A setting has a value that cannot be used."""


class UsageError(LspAssistError):
    """A request or command names what is not there (the LSP layer answers InvalidParams)."""


class DocumentError(LspAssistError):
    """An edit or a position does not fit the document it targets."""


class IndexError_(LspAssistError):
    """The workspace index cannot do what was asked."""


class ContextError(LspAssistError):
    """The prompt cannot be assembled."""


class BackendError(LspAssistError):
    """The model side failed."""


class ModelLoadError(BackendError):
    """The model file is missing, corrupt, or not a GGUF."""


class DraftModelError(BackendError):
    """The draft model cannot be used with the main model (e.g. another vocabulary)."""


class GenerationCancelled(BackendError):
    """Generation was stopped by a cancel flag, a superseding request, or a time cap."""


class RemoteBackendError(BackendError):
    """The remote inference server failed after the allowed retries."""


class CircuitOpenError(RemoteBackendError):
    """The circuit breaker is open after repeated failures; calls are refused for a while."""
