"""The session: what one connection (or one CLI run) owns, built once and closed once.

Owns the composition of the stages for a workspace: the :class:`WorkspaceIndex`, the
vector index behind it (``layerVector``: wired by ``vectors_wiring``), the metrics log,
the backend slot (loaded lazily, swapped when the model settings change), the context
engine (built once the model's tokenizer is known, dropped with the model), the prompt
memory paired with it (what a completion or a prefill keeps for the next prompt of its
document, keyed by URI as the backend keys its KV state; dropped with the engine) and the
open buffers (:class:`~lsp_assist.serving.buffers.Buffers`). :meth:`Session.close`
stops every thread the session started: the watcher and scan, the vector worker, the
vector layer's query thread, the metrics writer (the shown suggestions still open
written first); and frees the model.

The pipeline over all of this is :class:`~lsp_assist.serving.engine.CompletionEngine`.
State another thread may replace (the context engine, the settings, the metrics log,
the backend) is replaced whole, so a reader takes it once into a local.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from lsp_assist.backends import Backend, create_backend, memory_plan
from lsp_assist.config import Bounded, Settings, workspace_cache_dir
from lsp_assist.context import ContextEngine, Cursor, PromptMemory, attach_vectors
from lsp_assist.documents import DocumentSnapshot, Position, language_for_path
from lsp_assist.errors import BackendError, LspAssistError, ModelLoadError
from lsp_assist.index import EmptyIndex, VectorIndex, WorkspaceIndex
from lsp_assist.serving.adaptive_budget import AdaptiveBudget, calibrate, is_explicit
from lsp_assist.serving.buffers import Buffers
from lsp_assist.serving.vectors_wiring import start_workspace_vectors
from lsp_assist.telemetry import MetricsLog, ShownSuggestions, TelemetryEvent, metrics_dir

__all__ = ["BackendFactory", "LoadProgress", "Session"]

logger = logging.getLogger(__name__)

BackendFactory = Callable[[Settings], Backend]
LoadProgress = Callable[[str, int], None]
"""Called on the loading thread with a phase's message and a percentage (0-100)."""


def _default_backend_factory(settings: Settings) -> Backend:
    return create_backend(settings.model)


class Session:
    """One workspace's index, vectors, metrics log, backend slot, context engine and buffers."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        workspace: Path | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.workspace = workspace.resolve() if workspace else None
        self._backend_factory = backend_factory or _default_backend_factory
        self.backend: Backend | None = None
        """The loaded model (None until :meth:`load_backend`); replaced whole."""
        self.model_error = ""
        """Why the last load failed ('' after a load that worked)."""
        self.model_refused = ""
        """Why the last new model settings were refused (their KV cache would not fit)."""
        self._backend_lock = threading.Lock()
        self.adaptive = AdaptiveBudget()
        """The measured prompt speed and the budget it implies (replaced at each load)."""
        self._context: ContextEngine | None = None
        self._memory: PromptMemory | None = None
        """What completions and prefills keep for the next prompt, paired with ``_context``."""
        self.index: WorkspaceIndex | None = self._build_index()
        self._vectors: VectorIndex | None = None
        self.metrics: MetricsLog | None = None
        self._open_metrics()
        self.buffers = Buffers(
            lambda: self.settings,
            self.index,
            on_opened=self._note_opened,
            on_edited=self._note_edited,
        )
        """The open documents (the engine's own copy of each editor buffer)."""
        self.shown = ShownSuggestions(self._record_shown, document_of=self.buffers.get)
        """What became of each suggestion the editor showed, what users kept of the ones
        they accepted, the keys with nothing shown (written to the metrics log)."""

    # -- set-up -------------------------------------------------------------------

    def _build_index(self) -> WorkspaceIndex | None:
        if self.workspace is None:
            return None
        try:
            cache_dir = (
                workspace_cache_dir(self.settings, self.workspace)
                if self.settings.index.persist
                else None
            )
            return WorkspaceIndex([self.workspace], self.settings.index, cache_dir=cache_dir)
        except (LspAssistError, OSError) as exc:
            logger.error("workspace index unavailable: %s", exc)
            return None

    def _open_metrics(self) -> None:
        if self.metrics is not None:
            self.metrics.close()  # its writer thread ends once what it holds is written
        if not self.settings.telemetry.metrics:
            self.metrics = None
            return
        try:
            directory = metrics_dir(self.settings, self.workspace)
            directory.mkdir(parents=True, exist_ok=True)
            self.metrics = MetricsLog(
                directory / "metrics.jsonl", log_prompts=self.settings.telemetry.log_prompts
            )
        except OSError as exc:
            logger.warning("metrics log unavailable: %s", exc)
            self.metrics = None

    @property
    def vectors(self) -> VectorIndex | None:
        """Vector retrieval's index of the workspace (``layerVector``; started with indexing)."""
        return self._vectors

    @property
    def loaded(self) -> bool:
        """True once a model is loaded (and not swapped out since)."""
        return self.backend is not None

    def foreground(self) -> contextlib.AbstractContextManager[None]:
        """The index's foreground gate (the scan waits between files), or nothing to hold."""
        return self.index.foreground() if self.index is not None else contextlib.nullcontext()

    def load_backend(self, progress: LoadProgress | None = None) -> Backend | None:
        """Load the model (once); on failure remember the error and return None.

        ``progress`` hears each phase as it starts: the weights (with their own checks
        of the model) at 5 %, the prompt-speed measurement at 50 % (skipped when the
        user gave ``contextBudget``), the backend's one-time work (the token-healing
        index) at 70 %, loaded at 85 %.
        """
        report = progress or (lambda _message, _percentage: None)
        with self._backend_lock:
            if self.backend is not None:
                return self.backend
            # The scan waits between files while the model loads and its speed is timed:
            # sharing the CPU (and the GIL) with it made the load take as long as the scan
            # and the calibration choose a budget for a busy machine.
            with self.foreground():
                report("loading weights", 5)
                try:
                    backend = self._backend_factory(self.settings)
                    self.model_error = ""
                except ModelLoadError as exc:
                    self.model_error = str(exc)
                    logger.error("model not loaded: %s", exc)
                    return None
                except BackendError as exc:
                    self.model_error = str(exc)
                    logger.error("backend not available: %s", exc)
                    return None
                self._drop_context()
                self.adaptive = AdaptiveBudget()
                if not is_explicit(self.settings):
                    report("measuring prompt speed", 50)
                    calibrate(backend, self.adaptive)  # before the model counts as loaded
                report("indexing the vocabulary", 70)
                backend.prepare()
            report("loaded", 85)
            self.backend = backend
            return self.backend

    def update_settings(self, settings: Settings) -> list[str]:
        """Apply new settings; reload the model if its settings changed; return warnings.

        Model settings whose KV cache would not fit are refused before the loaded model
        is closed: it keeps running with its settings, ``model_refused`` says why.
        """
        old = self.settings
        warnings: list[str] = []
        if old.model != settings.model:
            plan = memory_plan(settings.model, loaded=old.model if self.backend else None)
            warnings, self.model_refused = list(plan.warnings), plan.refusal
            if plan.refusal and self.backend is not None:
                settings = dataclasses.replace(settings, model=old.model)
        self.settings = settings
        context = self._context
        if old.model != settings.model:
            with self._backend_lock:
                if self.backend is not None:
                    self.backend.close()
                self.backend = None
                self.model_error = ""
            self._drop_context()
        elif context is not None:
            context.update_settings(settings.context)
        if old.telemetry != settings.telemetry:
            self._open_metrics()
        if old.index != settings.index:
            logger.warning("index settings take effect when the server restarts")
        return warnings

    # -- the context engine --------------------------------------------------------

    def _drop_context(self) -> None:
        """Forget the context engine (built for another model) and its prompt memory (token
        ids of that model) and stop its vector layer."""
        context, self._context = self._context, None
        self._memory = None
        if context is not None and context.vectors is not None:
            context.vectors.stop()

    def context_engine(self) -> ContextEngine | None:
        """Return the context engine (built lazily once the model's tokenizer is known)."""
        context = self._context
        if context is not None:
            return context
        backend = self.backend
        if backend is None:
            return None
        index = self.index if self.index is not None else EmptyIndex()
        relative = self.index.relative if self.index is not None else None
        context = ContextEngine(
            index, backend, backend.info, self.settings.context, relative=relative
        )
        for path in reversed(self.buffers.recent):
            context.note_opened(path)
        attach_vectors(context, self._vectors, index)
        self._memory = PromptMemory()  # before the engine: memory_for pairs the two
        self._context = context
        return context

    def memory_for(self, context: ContextEngine) -> PromptMemory | None:
        """Return the prompt memory paired with ``context`` (None once it was dropped).

        Its writers are a completion and a prefill (``CompletionEngine.build_prompt`` with
        ``keep``); every other reader of the context builds without it.
        """
        memory = self._memory
        return memory if self._context is context else None

    def _note_opened(self, path: Path) -> None:
        context = self._context
        if context is not None:
            context.note_opened(path)

    def _note_edited(self, path: Path) -> None:
        context = self._context
        if context is not None:
            context.note_edited(path)

    # -- background work -----------------------------------------------------------

    def start_indexing(
        self, progress: Callable[[int, int], None] | None = None
    ) -> threading.Thread | None:
        """Start the background index scan and the file watcher; return the scan thread."""
        if self.index is None:
            return None
        thread = self.index.start_background_scan(progress)
        if self.settings.index.watch:
            self.index.start_watching()
        if self.settings.context.layer_vector and self._vectors is None:
            vectors = start_workspace_vectors(
                self.index, self.settings, self.workspace, after=thread
            )
            if vectors is not None:
                self.use_vectors(vectors)
        return thread

    def use_vectors(self, vectors: VectorIndex) -> None:
        """Make ``vectors`` the session's vector index (stopped by :meth:`close`)."""
        old, self._vectors = self._vectors, vectors
        if old is not None and old is not vectors:
            old.stop()
        context = self._context
        if context is not None:
            attach_vectors(context, vectors, self.index if self.index is not None else EmptyIndex())

    def _record_shown(self, record: TelemetryEvent) -> None:
        metrics = self.metrics
        if metrics is not None:
            metrics.record_shown(record)

    def bounds(self) -> dict[str, Bounded]:
        """What the session's parts keep that grows with use, each against its bound
        (docs/configuration.md, "What grows with use"); parts not made yet list nothing."""
        documents = len(self.buffers)
        out = {
            **self.buffers.bounds(),
            **self.shown.bounds(documents=documents),
            **self.adaptive.bounds(),
        }
        if self.index is not None:
            out.update(self.index.bounds(documents=documents))
        if (metrics := self.metrics) is not None:
            out.update(metrics.bounds())
        if (backend := self.backend) is not None:
            out.update(backend.bounds())
        if (context := self._context) is not None:
            out.update(context.bounds())
        if (memory := self._memory) is not None:
            out.update(memory.bounds())
        return out

    def cursor_at(self, doc: DocumentSnapshot, pos: Position) -> Cursor:
        """The context engine's view of ``pos`` in ``doc``: its text, language, open files."""
        return Cursor(
            path=doc.path,
            language=doc.language_id or language_for_path(doc.path) or "",
            text=doc.text,
            line=pos.line,
            column=pos.column,
            open_files=tuple(p for p in self.buffers.recent if p != doc.path),
        )

    def model_name(self) -> str:
        """The model's file name (or the model setting, before a load): stats split by it."""
        backend = self.backend
        info = backend.info if backend is not None else None
        model = self.settings.model
        name = (info.path if info is not None else "") or model.model_path or model.model
        return Path(name).name or name

    def accept(self, request_id: str) -> bool:
        """Record that the user took the suggestion of ``request_id``."""
        metrics = self.metrics
        if metrics is None:
            return False
        metrics.mark_accepted(request_id)
        return True

    def close(self) -> None:
        """Stop the watcher, the vector threads and the metrics writer; release the model."""
        self._drop_context()
        self.shown.close()  # the open suggestions' lines, before the log closes
        if self.metrics is not None:
            self.metrics.close()
        if self.index is not None:
            self.index.stop()
        if self._vectors is not None:
            self._vectors.stop()
        if self.backend is not None:
            self.backend.close()
            self.backend = None
