"""Choose and build the backend the settings ask for: which GGUF, which draft, which kind.

A local load first goes through :func:`~lsp_assist.backends.memory.plan_memory` (the
context clamped to the model's trained one, the KV cache checked against the memory
available); :func:`memory_plan` is the same check for a caller that still holds a model
and wants to know before it closes it.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path

from lsp_assist.backends.base import Backend
from lsp_assist.backends.gguf_meta import read_gguf_header
from lsp_assist.backends.memory import MemoryPlan, plan_memory
from lsp_assist.backends.models import preset_path, resolve_model
from lsp_assist.backends.vocab import gpu_offload_available
from lsp_assist.config import ModelSettings
from lsp_assist.errors import LspAssistError, ModelLoadError

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
    draft model and with prompt lookup otherwise, and not at all when every layer runs
    on a GPU (measured slower there: docs/backends.md, "Drafting on a GPU").
    """
    draft_path = settings.draft_model_path.strip()
    preset = None
    if settings.model_path.strip():
        main = Path(settings.model_path).expanduser()
    else:
        main, preset = resolve_model(settings.model)
    if settings.draft == "auto" and all_layers_on_gpu(settings, main):
        settings = dataclasses.replace(settings, draft="off")
    wants_draft = settings.draft in ("auto", "model")
    if preset is not None and preset.draft and not draft_path and wants_draft:
        draft_path = str(preset_path(preset.draft))
    mode = settings.draft
    if mode == "auto":
        mode = "model" if draft_path else "prompt-lookup"
    return dataclasses.replace(
        settings, model_path=str(main), draft_model_path=draft_path, draft=mode
    )


def all_layers_on_gpu(settings: ModelSettings, model: Path) -> bool:
    """Return True when ``settings`` offload every layer of ``model`` and the build can.

    ``gpuLayers`` -1, or at least the model's block count (``--gpu-layers 99``).
    """
    if settings.backend != "local" or settings.gpu_layers == 0:
        return False
    if settings.gpu_layers > 0:
        try:
            header = read_gguf_header(model)
        except LspAssistError:
            return False
        blocks = header.get_int(f"{header.architecture}.block_count")
        if blocks is None or settings.gpu_layers < blocks:
            return False
    return gpu_offload_available()


def memory_plan(settings: ModelSettings, *, loaded: ModelSettings | None = None) -> MemoryPlan:
    """Return the memory check of loading ``settings`` in place of ``loaded`` (if any).

    The KV memory of ``loaded`` (a local model about to be closed) counts as available.
    A remote backend, or a model that cannot be read or resolved, gives an empty plan:
    the load itself then says what is wrong, as before.
    """
    if settings.backend != "local":
        return MemoryPlan(settings)
    releasing = 0
    try:
        if loaded is not None and loaded.backend == "local":
            releasing = plan_memory(resolve_model_settings(loaded)).kv_bytes
        return plan_memory(resolve_model_settings(settings), releasing=releasing)
    except LspAssistError:
        return MemoryPlan(settings)


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

    plan = plan_memory(resolve_model_settings(settings))
    for warning in plan.warnings:
        logger.warning("%s", warning)
    if plan.refusal:
        raise ModelLoadError(plan.refusal)
    resolved = plan.settings
    return LocalBackend(resolved, model_path=Path(resolved.model_path), kv_reuse=resolved.kv_reuse)
