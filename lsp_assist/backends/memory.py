"""A local model's memory before it loads: the context it gets and whether its KV cache fits.

This module owns two decisions taken from the GGUF headers alone, before llama.cpp
allocates anything:

- **the context length**: ``contextLength`` is clamped to the model's trained context
  (``<arch>.context_length``) with a warning; a longer context only costs memory, and
  the model was never trained to read it;
- **the KV cache's memory**: ``n_layer x n_ctx x n_head_kv x (key + value head size)``
  elements of ``f16`` (llama.cpp's default K and V type) for the model and its draft
  model, compared with the memory available (psutil, else ``/proc/meminfo``) less
  :data:`MEMORY_MARGIN`. A cache that does not fit is refused with the figures, so a
  setting in range never makes the server allocate the machine's memory.

:func:`plan_memory` returns the :class:`MemoryPlan` (the settings with the context
clamped, the warnings, the refusal); ``backends.factory`` applies it before every local
load, and serving asks it before it closes a loaded model for new settings, so a
refused change keeps the model that runs.
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from pathlib import Path

from lsp_assist.backends.gguf_meta import GGUFHeader, read_gguf_header
from lsp_assist.config import ModelSettings

KV_BYTES_PER_ELEMENT = 2
"""llama.cpp's default K and V cache type is f16."""
MEMORY_MARGIN = 512 * 1024 * 1024
"""Memory left free besides the KV caches: compute buffers, the weights' working set,
the index and the server itself."""


@dataclass(frozen=True)
class ModelMemory:
    """One GGUF's context and KV cache as a load with these settings would allocate them."""

    path: Path
    n_ctx: int
    trained: int
    """``<arch>.context_length`` (0 when the GGUF does not say)."""
    kv_bytes: int
    """0 when the header does not describe attention (a recurrent model: no per-token KV)."""


@dataclass(frozen=True)
class MemoryPlan:
    """What a local load with some settings needs: the clamped settings, and whether it fits."""

    settings: ModelSettings
    """The settings with ``context_length`` clamped to the model's trained context."""
    models: tuple[ModelMemory, ...] = ()
    warnings: tuple[str, ...] = ()
    refusal: str = ""
    """Why the KV caches would not fit ('' when they do or nothing was checked)."""

    @property
    def kv_bytes(self) -> int:
        """The KV caches of the model and its draft model together."""
        return sum(m.kv_bytes for m in self.models)


def trained_context(header: GGUFHeader) -> int:
    """Return the context the model was trained on (``<arch>.context_length``; 0 unknown)."""
    return max(0, header.get_int(f"{header.architecture}.context_length") or 0)


def kv_bytes_per_token(header: GGUFHeader) -> int:
    """Return the K and V bytes one position takes in every layer (0 when unknown)."""
    arch = header.architecture
    n_layer = header.get_int(f"{arch}.block_count") or 0
    n_head = header.get_int(f"{arch}.attention.head_count") or 0
    if n_layer <= 0 or n_head <= 0:
        return 0
    # per-layer head counts are stored as an array (summarised by its length here):
    # the query heads are then the upper bound
    n_head_kv = header.get_int(f"{arch}.attention.head_count_kv") or n_head
    n_embd = header.get_int(f"{arch}.embedding_length") or 0
    key = header.get_int(f"{arch}.attention.key_length") or n_embd // n_head
    value = header.get_int(f"{arch}.attention.value_length") or n_embd // n_head
    return n_layer * n_head_kv * (key + value) * KV_BYTES_PER_ELEMENT


def kv_cache_bytes(header: GGUFHeader, n_ctx: int) -> int:
    """Return the bytes of a KV cache of ``n_ctx`` positions for this model (f16)."""
    return kv_bytes_per_token(header) * max(0, n_ctx)


def available_memory() -> int | None:
    """Return the bytes of memory available to a new allocation (None when unknown)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        pass
    else:
        return int(psutil.virtual_memory().available)
    try:  # pragma: no cover - without psutil
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):  # pragma: no cover
        pass
    return None  # pragma: no cover


def _on_host(settings: ModelSettings) -> bool:
    """True when the KV cache lives in host memory (no offload, or Apple's unified memory)."""
    return settings.gpu_layers == 0 or sys.platform == "darwin"


def _size(n: int) -> str:
    return f"{n / 1024**3:.1f} GiB" if n >= 1024**3 else f"{n // 1024**2} MiB"


def _paths(settings: ModelSettings) -> list[Path]:
    paths = [Path(settings.model_path).expanduser()]
    if settings.draft == "model" and settings.draft_model_path.strip():
        paths.append(Path(settings.draft_model_path).expanduser())
    return paths


def plan_memory(settings: ModelSettings, *, releasing: int = 0) -> MemoryPlan:
    """Return the context clamp and the memory check of a local load with ``settings``.

    ``settings`` name concrete files (``backends.factory.resolve_model_settings``);
    ``releasing`` is the KV memory a model about to be closed gives back. Raises
    ModelLoadError when a GGUF cannot be read (as the load itself would).
    """
    headers = [read_gguf_header(path) for path in _paths(settings)]
    warnings: list[str] = []
    n_ctx = settings.context_length
    trained = trained_context(headers[0])
    if 0 < trained < n_ctx:
        warnings.append(
            f"contextLength {n_ctx:,} is more than {headers[0].path.name} was trained on: "
            f"using its {trained:,} tokens"
        )
        n_ctx = trained
    fitted = dataclasses.replace(
        settings, context_length=n_ctx, batch_size=min(settings.batch_size, n_ctx)
    )
    models = tuple(
        ModelMemory(header.path, n_ctx, trained_context(header), kv_cache_bytes(header, n_ctx))
        for header in headers
    )
    plan = MemoryPlan(fitted, models, tuple(warnings))
    if not _on_host(settings):
        return plan
    available = available_memory()
    if available is None:  # pragma: no cover - neither psutil nor /proc
        return plan
    room = available + max(0, releasing) - MEMORY_MARGIN
    if plan.kv_bytes <= room:
        return plan
    each = " + ".join(f"{_size(m.kv_bytes)} ({m.path.name})" for m in models)
    largest = max(0, room) // max(1, sum(kv_bytes_per_token(h) for h in headers))
    fit = f"; at most {largest:,} tokens fit" if largest else ""
    refusal = (
        f"contextLength {n_ctx:,} needs a KV cache of {each} but only "
        f"{_size(max(0, room))} of memory is available (after a {_size(MEMORY_MARGIN)} "
        f"margin): not loaded with it{fit}"
    )
    return dataclasses.replace(plan, refusal=refusal)
