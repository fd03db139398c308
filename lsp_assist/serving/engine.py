"""The completion engine: the whole pipeline as one plain Python object (no pygls).

documents -> index -> context -> backend -> post-processing, with telemetry around it.
The LSP handlers and the CLI both call this class; the scheduler runs its blocking
``complete`` on the model's own single-thread executor. Around it: the request and
outcome types (``model``), the trigger rules (``triggers``), the
metrics record (``records``), the prompt budget (``adaptive_budget``).

The engine sees only snapshots. Edits change the live :class:`Document` on the event
loop while the model thread works, so a request carries a :class:`DocumentSnapshot`
taken when it arrived (``CompletionQuery.snapshot``), and everything done for it (skip
rules, the syntax tree, the prompt, post-processing, the type-through cache entry)
reads that snapshot. Of the live buffer the model thread reads only the version, to
learn that a request is outdated. State that the other thread may replace (the
context engine, the settings, the metrics log) is read once into a local.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tree_sitter import Tree

from lsp_assist.backends import (
    Backend,
    CancelToken,
    GenerationRequest,
    create_backend,
    memory_plan,
)
from lsp_assist.config import Settings, workspace_cache_dir
from lsp_assist.context import AssembledPrompt, ContextEngine, Cursor, attach_vectors
from lsp_assist.documents import (
    ByteEdit,
    Document,
    DocumentSnapshot,
    DocumentStore,
    Position,
    TextView,
    language_for_path,
    uri_to_path,
)
from lsp_assist.errors import BackendError, GenerationCancelled, LspAssistError, ModelLoadError
from lsp_assist.index import EmptyIndex, VectorIndex, WorkspaceIndex
from lsp_assist.serving.adaptive_budget import (
    AdaptiveBudget,
    budget_for,
    calibrate,
    choose,
    is_explicit,
)
from lsp_assist.serving.alternatives import distinct, wanted
from lsp_assist.serving.early import EarlyAnswer
from lsp_assist.serving.model import Change, CompletionOutcome, CompletionQuery
from lsp_assist.serving.postprocess import decide_multiline, postprocess
from lsp_assist.serving.records import metrics_record
from lsp_assist.serving.stoprules import make_stop_rule, stop_strings
from lsp_assist.serving.triggers import oversized_reason, skip_reason
from lsp_assist.serving.typethrough import TypeThroughCache
from lsp_assist.serving.vectors_wiring import start_workspace_vectors
from lsp_assist.telemetry import MetricsLog, metrics_dir

__all__ = ["BackendFactory", "CompletionEngine"]

logger = logging.getLogger(__name__)

BackendFactory = Callable[[Settings], Backend]


def _default_backend_factory(settings: Settings) -> Backend:
    return create_backend(settings.model)


class CompletionEngine:
    """Owns the documents, index, context engine, backend, caches and metrics log."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        workspace: Path | None = None,
        backend_factory: BackendFactory | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.workspace = workspace.resolve() if workspace else None
        self.documents = DocumentStore()
        self._backend_factory = backend_factory or _default_backend_factory
        self.backend: Backend | None = None
        self.model_error = ""
        self.model_refused = ""
        """Why the last new model settings were refused (their KV cache would not fit)."""
        self._backend_lock = threading.Lock()
        self.adaptive = AdaptiveBudget()
        """The measured prompt speed and the budget it implies (replaced at each load)."""
        self._context: ContextEngine | None = None
        self._recent: tuple[Path, ...] = ()
        """Recently opened files, newest first; replaced whole, never changed in place."""
        self._oversized: set[str] = set()
        """URIs of open documents too big for model work (see ``oversized``)."""
        self.index: WorkspaceIndex | None = None
        self.vectors: VectorIndex | None = None
        """Vector retrieval's index of the workspace (``layerVector``; started with indexing)."""
        self._build_index()
        self.typethrough = TypeThroughCache(self.settings.completion.cache_entries)
        self.metrics: MetricsLog | None = None
        self._open_metrics()
        self.last_outcomes: tuple[CompletionOutcome, ...] = ()
        """The last 20 outcomes, oldest first; replaced whole under ``_outcomes_lock``."""
        self._outcomes_lock = threading.Lock()

    # -- set-up -------------------------------------------------------------------

    def _build_index(self) -> None:
        if self.workspace is None:
            return
        try:
            cache_dir = (
                workspace_cache_dir(self.settings, self.workspace)
                if self.settings.index.persist
                else None
            )
            self.index = WorkspaceIndex([self.workspace], self.settings.index, cache_dir=cache_dir)
        except (LspAssistError, OSError) as exc:
            logger.error("workspace index unavailable: %s", exc)
            self.index = None

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

    def _foreground(self) -> contextlib.AbstractContextManager[None]:
        """The index's foreground gate (the scan waits between files), or nothing to hold."""
        return self.index.foreground() if self.index is not None else contextlib.nullcontext()

    def load_backend(self) -> Backend | None:
        """Load the model (once); on failure remember the error and return None."""
        with self._backend_lock:
            if self.backend is not None:
                return self.backend
            # The scan waits between files while the model loads and its speed is timed:
            # sharing the CPU (and the GIL) with it made the load take as long as the scan
            # and the calibration choose a budget for a busy machine.
            gate = self._foreground()
            with gate:
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
                    calibrate(backend, self.adaptive)  # before the model counts as loaded
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

    def _drop_context(self) -> None:
        """Forget the context engine (built for another model) and stop its vector layer."""
        context, self._context = self._context, None
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
        for path in reversed(self._recent):
            context.note_opened(path)
        attach_vectors(context, self.vectors, index)
        self._context = context
        return context

    def start_indexing(
        self, progress: Callable[[int, int], None] | None = None
    ) -> threading.Thread | None:
        """Start the background index scan and the file watcher; return the scan thread."""
        if self.index is None:
            return None
        thread = self.index.start_background_scan(progress)
        if self.settings.index.watch:
            self.index.start_watching()
        if self.settings.context.layer_vector and self.vectors is None:
            self.vectors = start_workspace_vectors(
                self.index, self.settings, self.workspace, after=thread
            )
            if self._context is not None:
                attach_vectors(self._context, self.vectors, self.index)
        return thread

    def close(self) -> None:
        """Stop the watcher, the vector threads and the metrics writer; release the model."""
        self._drop_context()
        if self.metrics is not None:
            self.metrics.close()
        if self.index is not None:
            self.index.stop()
        if self.vectors is not None:
            self.vectors.stop()
        if self.backend is not None:
            self.backend.close()
            self.backend = None

    # -- documents ----------------------------------------------------------------

    def oversized(self, doc: TextView) -> str:
        """Return why a document is too big for model work and parsing ('' = it is not)."""
        return oversized_reason(doc, self.settings)

    def _note_oversized(self, doc: Document, reason: str) -> None:
        if reason and doc.uri not in self._oversized:
            logger.warning("%s: no completions and no parsing: %s", doc.uri, reason)
        if reason:
            self._oversized.add(doc.uri)
        else:
            self._oversized.discard(doc.uri)

    def open_document(
        self, uri: str, text: str, *, version: int = 0, language_id: str = ""
    ) -> Document:
        """Open a buffer; the index then knows its text instead of the disk's."""
        doc = self.documents.open(uri, text, version=version, language_id=language_id)
        self._note_recent(doc.path)
        reason = self.oversized(doc)
        self._note_oversized(doc, reason)
        if self.index is not None and doc.language_id and not reason:
            self.index.open_buffer(doc.path, doc.text)
        return doc

    def change_document(self, uri: str, version: int, changes: list[Change]) -> Document | None:
        """Apply content changes in order; each reaches the index as an incremental edit."""
        doc = self.documents.get(uri)
        if doc is None:
            logger.warning("didChange for a document that is not open: %s", uri)
            return None
        was_oversized = uri in self._oversized
        for start, end, new_text in changes:
            edit: ByteEdit = doc.apply_change(start, end, new_text)
            if self.index is not None and doc.language_id and not was_oversized:
                self.index.edit_buffer(doc.path, doc.text, edit)
        doc.version = version
        reason = self.oversized(doc)
        self._note_oversized(doc, reason)
        if self.index is not None and doc.language_id and bool(reason) != was_oversized:
            # Crossed the size limit: the index drops the buffer or parses it afresh.
            if reason:
                self.index.close_buffer(doc.path)
            else:
                self.index.open_buffer(doc.path, doc.text)
        context = self._context
        if context is not None:
            context.note_edited(doc.path)
        return doc

    def close_document(self, uri: str) -> None:
        """Close a buffer; the index goes back to the file on disk."""
        doc = self.documents.close(uri)
        oversized = uri in self._oversized
        self._oversized.discard(uri)
        if doc is not None and self.index is not None and doc.language_id and not oversized:
            self.index.close_buffer(doc.path)

    def _note_recent(self, path: Path) -> None:
        recent = (path, *(p for p in self._recent if p != path))
        self._recent = recent[: self.settings.context.recent_files]
        context = self._context
        if context is not None:
            context.note_opened(path)

    def snapshot(self, uri: str) -> DocumentSnapshot | None:
        """Return the buffer of ``uri`` frozen as it is now (the file on disk if not open).

        Call it on the thread that applies the edits (the event loop in the server).
        """
        doc = self.documents.get(uri)
        if doc is not None:
            return doc.snapshot()
        path = uri_to_path(uri)
        if self.index is not None and self.index.is_denied(path):
            return None
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return Document(uri, text).snapshot()

    def stale(self, query: CompletionQuery) -> bool:
        """True when the open buffer has moved past the version the query was made for."""
        expected = query.expected_version
        doc = self.documents.get(query.uri)
        return expected is not None and doc is not None and doc.version != expected

    def _tree(self, doc: DocumentSnapshot) -> Tree | None:
        """The index's syntax tree of the snapshot's text (None when it has moved on)."""
        if self.index is None or not doc.language_id:
            return None
        return self.index.tree_for(doc.path, doc.text)

    # -- completions --------------------------------------------------------------

    def cached(self, query: CompletionQuery) -> CompletionOutcome | None:
        """Serve a query from the type-through cache when the user typed into a suggestion.

        Runs on the event loop; reads the query's snapshot (or the open buffer as it is).
        """
        started = time.perf_counter()
        doc = query.snapshot
        if doc is None:
            live = self.documents.get(query.uri)
            doc = live.snapshot() if live is not None else None
        if doc is None:
            return None
        pos = doc.clamp(query.line, query.column)
        offset = doc.offset_at(pos)
        remainder = self.typethrough.get(query.uri, doc.text[:offset], doc.text[offset:])
        if not remainder:
            return None
        outcome = CompletionOutcome(
            request_id=query.request_id,
            text=remainder,
            line=pos.line,
            column=pos.column,
            version=doc.version,
            multiline="\n" in remainder,
            cache_hit=True,
            strategy="typethrough",
        )
        done = time.perf_counter()
        outcome.engine_ms = (done - started) * 1000
        outcome.latency_ms = outcome.ttft_ms = (done - query.received_at) * 1000
        outcome.whole_ms = outcome.latency_ms
        self._finish(outcome, query, doc, "typethrough", None)
        return outcome

    def build_prompt(
        self,
        doc: DocumentSnapshot,
        pos: Position,
        *,
        strategy: str | None = None,
        budget: int | None = None,
    ) -> AssembledPrompt:
        """Assemble the prompt for a position (raises BackendError when there is no model)."""
        engine = self.context_engine() if self.load_backend() is not None else None
        if engine is None:
            raise ModelLoadError(self.model_error or "no model loaded")
        cursor = Cursor(
            path=doc.path,
            language=doc.language_id or language_for_path(doc.path) or "",
            text=doc.text,
            line=pos.line,
            column=pos.column,
            open_files=tuple(p for p in self._recent if p != doc.path),
        )
        decision = budget_for(self.settings, self.adaptive, strategy) if budget is None else None
        if decision is not None:
            budget = decision.tokens
        prompt = engine.build(cursor, strategy=strategy, budget=budget)
        prompt.budget_reason = decision.reason if decision is not None else ""
        return prompt

    def complete(self, query: CompletionQuery) -> CompletionOutcome:
        """Produce a suggestion for the query's snapshot; blocking (run on the model executor)."""
        started = time.perf_counter()
        settings = self.settings
        outcome = CompletionOutcome(request_id=query.request_id, line=query.line)
        doc = query.snapshot or self.snapshot(query.uri)
        if doc is None:
            outcome.skipped = "document not open"
            return outcome
        pos = doc.clamp(query.line, query.column)
        outcome.line, outcome.column, outcome.version = pos.line, pos.column, doc.version
        queued = query.queued_at if query.queued_at is not None else started
        outcome.debounce_ms = max(0.0, queued - query.received_at) * 1000
        outcome.queue_ms = max(0.0, started - queued) * 1000
        if self.stale(query):
            outcome.skipped = "stale version"
            return outcome
        too_big = self.oversized(doc)
        if too_big:
            outcome.skipped = too_big
            return outcome
        tree = self._tree(doc)
        reason = skip_reason(doc, pos, query.trigger, settings.completion, tree)
        if reason:
            outcome.skipped = reason
            return outcome
        # The type-through cache is consulted by the scheduler before the debounce.
        if query.cancel.cancelled:
            outcome.cancelled = True
            return outcome
        backend = self.load_backend()
        if backend is None:
            outcome.error = self.model_error or "no model loaded"
            outcome.skipped = "no model"
            return outcome
        prompt: AssembledPrompt | None = None
        # A running index scan waits between files while the prompt is built and decoded.
        gate = self._foreground()
        try:
            with gate:
                prompt = self.build_prompt(doc, pos, strategy=query.strategy)
                self._generate(query, doc, pos, tree, prompt, backend, settings, outcome, started)
        except GenerationCancelled:
            # Superseded or cancelled while the prompt was built (a remote tokenizer call).
            outcome.cancelled = True
        except LspAssistError as exc:
            logger.error("completion failed: %s", exc)
            outcome.error = str(exc)
        done = time.perf_counter()
        if prompt is None:
            outcome.context_ms = (done - started) * 1000
        outcome.engine_ms = (done - started) * 1000
        outcome.whole_ms = (done - query.received_at) * 1000
        if not outcome.answered_early:
            outcome.latency_ms = outcome.whole_ms
        self._finish(outcome, query, doc, query.trigger, prompt)
        return outcome

    def _generate(
        self,
        query: CompletionQuery,
        doc: DocumentSnapshot,
        pos: Position,
        tree: Tree | None,
        prompt: AssembledPrompt,
        backend: Backend,
        settings: Settings,
        outcome: CompletionOutcome,
        started: float,
    ) -> None:
        completion = settings.completion
        line_text = doc.line(pos.line)
        prefix, suffix = line_text[: pos.column], line_text[pos.column :]
        if completion.multiline == "auto":
            multiline = decide_multiline(tree, doc.text, pos.line, pos.column, doc.language_id)
        else:
            multiline = completion.multiline == "always"
        outcome.strategy = prompt.strategy
        outcome.layer_tokens = prompt.layer_tokens()
        outcome.prompt_tokens = prompt.total_tokens
        indent = len(prefix) - len(prefix.lstrip()) if prefix.strip() else len(prefix)
        offset = doc.offset_at(pos)

        def clean(raw: str) -> str:
            if prefix[-1:] in (" ", "\t"):
                # The prompt ends in whitespace the model tends to repeat: "x = " + " y".
                raw = raw.lstrip(" \t")
            return postprocess(
                raw,
                line_prefix=prefix,
                line_suffix=suffix,
                following_text=doc.text[offset:],
                multiline=multiline,
                max_lines=completion.max_lines,
                language=doc.language_id,
            )

        alternatives = wanted(query, completion)
        # keyed by the text the suggestion was made for, not the buffer as it is now
        entry = self.typethrough.key(doc.uri, doc.text[:offset], doc.text[offset:])
        early: EarlyAnswer | None = None
        if query.on_answer is not None and completion.answer_after_ms > 0 and alternatives == 1:
            early = EarlyAnswer(
                query,
                outcome,
                after_s=completion.answer_after_ms / 1000,
                clean=clean,
                cache=self.typethrough,
                cache_key=entry,
            )
        # token healing: the model writes the typed tail cut from the prompt; a backend
        # that cannot be constrained gets it back as prompt tokens
        prompt_tokens, forced = list(prompt.tokens), prompt.healed
        if forced and not backend.heals_tokens:
            prompt_tokens += backend.tokenize(forced)
            forced = ""
        request = GenerationRequest(
            prompt_tokens=prompt_tokens,
            forced_prefix=forced,
            max_tokens=completion.max_tokens,
            stop=stop_strings(doc.language_id),
            stop_rule=make_stop_rule(
                multiline=multiline,
                cursor_indent=indent,
                line_prefix=prefix,
                max_lines=completion.max_lines,
            ),
            cache_key=query.uri,
            stable_prefix_len=prompt.stable_prefix_len,
            task_type=query.task_type,
            cancel=query.cancel,
            prompt_timeout_s=settings.model.prompt_timeout_ms / 1000,
            generation_timeout_s=settings.model.generation_timeout_ms / 1000,
            alternatives=alternatives,
            on_text=early,
        )
        called = time.perf_counter()
        outcome.context_ms = (called - started) * 1000
        result = backend.generate(request)
        if result.ttft_ms > 0:  # the prompt was evaluated whole (not cancelled within)
            self.adaptive.observe(
                result.prompt_tokens - result.reused_tokens, result.prefill_ms / 1000
            )
        result.copy_usage(outcome)
        # the request's own view: the prompt the context built (a healed tail a backend got
        # back as tokens is not counted) and times from arrival (latency_ms when it ends)
        outcome.prompt_tokens = prompt.total_tokens
        outcome.output_tokens = len(result.tokens)
        outcome.ttft_ms = 0.0
        if result.tokens:
            # the backend counts from its own start; the user's clock started at arrival
            outcome.ttft_ms = (called - query.received_at) * 1000 + result.ttft_ms
        text = clean(result.text)
        outcome.multiline = multiline
        # A generation time cap keeps what was generated; a cancel (superseded, client
        # cancel) or a prompt time cap has nothing worth showing, unless the editor already
        # has the suggestion's start (an early answer): that start is what it keeps.
        partial_ok = result.stop_reason == "timeout" and bool(result.tokens)
        if early is not None and early.answered_at is not None:
            outcome.answered_early = True
            outcome.latency_ms = (early.answered_at - query.received_at) * 1000
            if result.cancelled and not partial_ok:
                text, partial_ok = early.shown, True
        outcome.cancelled = result.cancelled and not partial_ok
        outcome.text = "" if outcome.cancelled else text
        if result.alternatives and not outcome.cancelled:
            branches = [clean(branch.text) for branch in result.alternatives if branch.complete]
            outcome.text, outcome.alternatives = distinct(text, branches)
        self.typethrough.put_at(entry, outcome.text)

    def prefill(
        self,
        target: str | DocumentSnapshot,
        line: int = 0,
        column: int = 0,
        *,
        cancel: CancelToken | None = None,
    ) -> int:
        """Evaluate a document's stable prompt prefix ahead of time; return tokens evaluated.

        ``target`` is a snapshot (the scheduler takes it on the event loop) or an open
        document's URI. ``cancel`` lets a completion that arrives meanwhile stop the
        prefill at once.
        """
        if isinstance(target, str):
            live = self.documents.get(target)
            doc = live.snapshot() if live is not None else None
        else:
            doc = target
        if doc is None or self.oversized(doc):
            return 0
        backend = self.load_backend()
        if backend is None:
            return 0
        try:
            prompt = self.build_prompt(doc, doc.clamp(line, column))
        except LspAssistError as exc:
            logger.debug("prefill skipped: %s", exc)
            return 0
        stable = prompt.tokens[: prompt.stable_prefix_len]
        if not stable or (cancel is not None and cancel.cancelled):
            return 0
        gate = self._foreground()
        with gate:  # the scan waits meanwhile, as for a completion
            began = time.perf_counter()
            evaluated = backend.prefill(stable, cache_key=doc.uri, cancel=cancel)
            self.adaptive.observe(evaluated, time.perf_counter() - began)
        return evaluated

    def explain(
        self,
        target: str | DocumentSnapshot,
        line: int,
        column: int,
        *,
        strategy: str | None = None,
    ) -> AssembledPrompt:
        """Return the prompt the engine would build at a position (for explain commands).

        ``target`` is a snapshot (what the LSP command takes on the event loop) or a URI.
        """
        doc = self.snapshot(target) if isinstance(target, str) else target
        if doc is None:
            raise LspAssistError(f"cannot read {target}")
        return self.build_prompt(doc, doc.clamp(line, column), strategy=strategy)

    def accept(self, request_id: str) -> bool:
        """Record that the user took the suggestion of ``request_id``."""
        metrics = self.metrics
        if metrics is None:
            return False
        metrics.mark_accepted(request_id)
        return True

    def status(self) -> dict[str, Any]:
        """Return model, index and latency state for the status command."""
        backend = self.backend
        info = backend.info if backend is not None else None
        index_done, index_total = self.index.progress if self.index is not None else (0, 0)
        outcomes = self.last_outcomes
        recent = [o for o in outcomes if not o.skipped][-5:]
        return {
            "model": {
                "loaded": backend is not None,
                "path": info.path if info else self.settings.model.model_path,
                "architecture": info.architecture if info else "",
                "error": self.model_error,
                "refused": self.model_refused,
                "backend": self.settings.model.backend,
                "stats": backend.stats() if backend is not None else {},
            },
            "index": {"files_done": index_done, "files_total": index_total},
            "budget": choose(self.settings, self.adaptive).to_json(),
            "documents": len(self.documents),
            "last_latencies_ms": [round(o.latency_ms, 1) for o in recent],
            "last_ttft_ms": [round(o.ttft_ms, 1) for o in recent],
            "typethrough": {"hits": self.typethrough.hits, "misses": self.typethrough.misses},
            "last": outcomes[-1].to_json() if outcomes else {},
        }

    def _finish(
        self,
        outcome: CompletionOutcome,
        query: CompletionQuery,
        doc: DocumentSnapshot,
        trigger: str,
        prompt: AssembledPrompt | None,
    ) -> None:
        """Remember the outcome for status and write its metrics record."""
        with self._outcomes_lock:
            self.last_outcomes = (*self.last_outcomes[-19:], outcome)
        metrics = self.metrics
        if metrics is None:
            return
        record = metrics_record(
            outcome,
            query,
            language=doc.language_id,
            trigger=trigger,
            prompt=prompt,
            log_prompts=metrics.log_prompts,
        )
        try:
            metrics.record(record)
        except OSError as exc:
            logger.warning("could not write metrics: %s", exc)
