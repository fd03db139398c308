"""Choose and build the backend the settings ask for."""

from __future__ import annotations

import logging
from pathlib import Path

from lsp_assist.backends.base import Backend
from lsp_assist.backends.models import embedded_model_path
from lsp_assist.config import ModelSettings

logger = logging.getLogger(__name__)


def resolve_model_path(settings: ModelSettings) -> Path:
    """Return ``modelPath`` expanded, or the embedded model when it is empty."""
    if settings.model_path.strip():
        return Path(settings.model_path).expanduser()
    return embedded_model_path()


def create_backend(settings: ModelSettings) -> Backend:
    """Return a LocalBackend or RemoteBackend; raises BackendError subclasses on failure."""
    # the implementations are imported here, not at the top: this module is imported
    # with the package, and httpx / numpy need not load on every command's start
    if settings.backend == "remote":
        from lsp_assist.backends.remote import RemoteBackend

        # the remote model's tokenizer comes from modelPath only when one is given
        path = Path(settings.model_path).expanduser() if settings.model_path.strip() else None
        logger.info("remote backend at %s", settings.remote_url)
        return RemoteBackend(settings, model_path=path)
    from lsp_assist.backends.llama import LocalBackend

    return LocalBackend(
        settings, model_path=resolve_model_path(settings), kv_reuse=settings.kv_reuse
    )
