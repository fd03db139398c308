"""Choose and build the backend the settings ask for: which GGUF, which draft, which kind."""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from lsp_assist.backends.base import Backend
from lsp_assist.backends.models import preset_path, resolve_model
from lsp_assist.config import ModelSettings

logger = logging.getLogger(__name__)


def resolve_model_path(settings: ModelSettings) -> Path:
    """Return ``modelPath`` expanded when given, else the GGUF of ``model`` (preset or path)."""
    if settings.model_path.strip():
        return Path(settings.model_path).expanduser()
    return resolve_model(settings.model)[0]


def resolve_model_settings(settings: ModelSettings) -> ModelSettings:
    """Return ``settings`` with the model, its draft and the drafting mode made concrete.

    ``modelPath`` wins over ``model``; a preset brings its draft preset unless
    ``draftModelPath`` names one; ``draft: auto`` drafts with the model when there is a
    draft model and with prompt lookup otherwise.
    """
    draft_path = settings.draft_model_path.strip()
    if settings.model_path.strip():
        main = Path(settings.model_path).expanduser()
    else:
        main, preset = resolve_model(settings.model)
        wants_draft = settings.draft in ("auto", "model")
        if preset is not None and preset.draft and not draft_path and wants_draft:
            draft_path = str(preset_path(preset.draft))
    mode = settings.draft
    if mode == "auto":
        mode = "model" if draft_path else "prompt-lookup"
    return dataclasses.replace(
        settings, model_path=str(main), draft_model_path=draft_path, draft=mode
    )


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

    resolved = resolve_model_settings(settings)
    return LocalBackend(resolved, model_path=Path(resolved.model_path), kv_reuse=resolved.kv_reuse)
