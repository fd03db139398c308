"""The status command's JSON: what a session and its engine are doing, in one object.

Owns :func:`status_json`, the answer of ``lspAssist.status`` (model, index progress,
budget, open documents, the last latencies, the type-through counters, the last
outcome, the last prefill). It only reads: every value is taken once from the session
and the engine, whose state other threads replace whole.
"""

from __future__ import annotations

from typing import Any

from lsp_assist.serving.adaptive_budget import choose
from lsp_assist.serving.engine import CompletionEngine

__all__ = ["status_json"]


def status_json(engine: CompletionEngine) -> dict[str, Any]:
    """Return model, index and latency state for the status command."""
    session = engine.session
    settings = session.settings
    backend = session.backend
    info = backend.info if backend is not None else None
    index = session.index
    index_done, index_total = index.progress if index is not None else (0, 0)
    outcomes = engine.last_outcomes
    recent = [o for o in outcomes if not o.skipped][-5:]
    typethrough = engine.typethrough
    return {
        "model": {
            "loaded": backend is not None,
            "path": info.path if info else settings.model.model_path,
            "architecture": info.architecture if info else "",
            "error": session.model_error,
            "refused": session.model_refused,
            "backend": settings.model.backend,
            "stats": backend.stats() if backend is not None else {},
        },
        "index": {"files_done": index_done, "files_total": index_total},
        "budget": choose(settings, session.adaptive).to_json(),
        "documents": len(session.buffers),
        "last_latencies_ms": [round(o.latency_ms, 1) for o in recent],
        "last_ttft_ms": [round(o.ttft_ms, 1) for o in recent],
        "typethrough": {"hits": typethrough.hits, "misses": typethrough.misses},
        "last": outcomes[-1].to_json() if outcomes else {},
        "last_prefill": prefill.to_json() if (prefill := engine.last_prefill) else {},
    }
