"""The completion engine: the pipeline over a session's snapshots (no pygls).

documents -> index -> context -> backend -> post-processing, with telemetry around it.
:class:`CompletionEngine` owns the pipeline only: the type-through cache, ``complete``,
``prefill`` and ``explain`` over a snapshot, the request's timings and its metrics
record. What it runs over (index, vectors, metrics log, backend slot, context engine,
buffers) is the :class:`~lsp_assist.serving.session.Session`'s; the status command's
JSON is ``serving/status.py``'s. The scheduler runs the blocking ``complete`` on the
model's own single-thread executor. Around it: the request and outcome types
(``model``), the trigger rules (``triggers``), the metrics record (``records``), the
prompt budget (``adaptive_budget``).

The engine sees only snapshots. Edits change the live :class:`Document` on the event
loop while the model thread works, so a request carries a :class:`DocumentSnapshot`
taken when it arrived (``CompletionQuery.snapshot``, required), and everything done for it (skip
rules, the syntax tree, the prompt, post-processing, the type-through cache entry)
reads that snapshot. Of the live buffer the model thread reads only the version, to
learn that a request is outdated. State that the other thread may replace (the
context engine, the settings, the metrics log) is read once into a local.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from tree_sitter import Tree

from lsp_assist.backends import (
    Backend,
    CancelToken,
    GenerationRequest,
)
from lsp_assist.config import Settings
from lsp_assist.context import AssembledPrompt
from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.errors import GenerationCancelled, LspAssistError, ModelLoadError
from lsp_assist.serving.adaptive_budget import budget_for
from lsp_assist.serving.alternatives import wanted
from lsp_assist.serving.generation import plan, settle
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery, PrefillRecord
from lsp_assist.serving.records import metrics_record
from lsp_assist.serving.session import Session
from lsp_assist.serving.triage import Triage, Verdict
from lsp_assist.serving.triggers import oversized_reason, skip_reason
from lsp_assist.serving.typethrough import EntryKey, TypeThrough

__all__ = ["CompletionEngine"]

logger = logging.getLogger(__name__)


LAST_OUTCOMES = 20
"""Outcomes kept for the status command (``last_outcomes``), newest last."""


class CompletionEngine:
    """The pipeline over a session: complete, prefill and explain at a snapshot's position."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.typethrough = TypeThrough(session.settings.completion.cache_entries)
        """Suggestions by the text they were made for, served while the user types them,
        and those still being written (early answers)."""
        self.last_outcomes: tuple[CompletionOutcome, ...] = ()
        """The last outcomes (:data:`LAST_OUTCOMES`), oldest first; replaced whole under
        ``_outcomes_lock``."""
        self._outcomes_lock = threading.Lock()
        self.last_prefill: PrefillRecord | None = None
        """The last prefill that ran to its end (replaced whole on the model thread)."""

    @property
    def settings(self) -> Settings:
        """The session's settings as they are now (replaced whole by a settings change)."""
        return self.session.settings

    def stale(self, query: CompletionQuery) -> bool:
        """True when the open buffer has moved past the version the query was made for."""
        version = self.session.buffers.version(query.uri)
        return version is not None and version != query.version

    def _tree(self, doc: DocumentSnapshot) -> Tree | None:
        """The index's syntax tree of the snapshot's text (None when it has moved on)."""
        index = self.session.index
        if index is None or not doc.language_id:
            return None
        return index.tree_for(doc.path, doc.text)

    # -- completions --------------------------------------------------------------

    def cached(self, query: CompletionQuery) -> CompletionOutcome | None:
        """Serve a query from the type-through cache when the user typed into a suggestion.

        Runs on the event loop; reads the query's snapshot.
        """
        started = time.perf_counter()
        doc = query.snapshot
        pos = doc.clamp(query.line, query.column)
        remainder = self.typethrough.lookup(doc, pos)
        if remainder is None:
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

    def wait_for_more(self, key: EntryKey, timeout: float, typed: int) -> bool:
        """Block until the suggestion under ``key`` (being written) holds more than
        ``typed`` characters, or ``timeout`` seconds (a waiter thread of the scheduler's)."""
        return self.typethrough.wait_for_more(key, timeout, than=typed)

    def build_prompt(
        self,
        doc: DocumentSnapshot,
        pos: Position,
        *,
        strategy: str | None = None,
        budget: int | None = None,
        keep: bool = False,
    ) -> AssembledPrompt:
        """Assemble the prompt for a position (raises BackendError when there is no model).

        With ``keep`` (a completion, a prefill: the only ones) the build reads the session's
        prompt memory and leaves its note there for the document's next prompt; without,
        it is a pure query that changes nothing (an explain).
        """
        session = self.session
        engine = session.context_engine() if session.load_backend() is not None else None
        if engine is None:
            raise ModelLoadError(session.model_error or "no model loaded")
        settings = session.settings
        cursor = session.cursor_at(doc, pos)
        decision = budget_for(settings, session.adaptive, strategy) if budget is None else None
        if decision is not None:
            budget = decision.tokens
        memory = session.memory_for(engine) if keep else None
        prompt = engine.build(cursor, strategy=strategy, budget=budget, memory=memory, slot=doc.uri)
        if memory is not None:
            memory.remember(prompt.note)
        prompt.budget_reason = decision.reason if decision is not None else ""
        return prompt

    def triage(self, query: CompletionQuery, *, lookup: bool = True) -> Triage:
        """Decide once what the query needs (serving/triage.py): on the event loop.

        With ``lookup`` the type-through cache is asked first (served, or wait for the
        rest of a suggestion being written); a request for alternatives never is (the
        cache holds one suggestion). Then the skip rules, with the index's tree.
        """
        settings = self.session.settings
        doc = query.snapshot
        pos = doc.clamp(query.line, query.column)
        if lookup and wanted(query, settings.completion) == 1:
            hit = self.cached(query)
            if hit is not None:
                return Triage(Verdict.SERVED, outcome=hit)
            found = self.typethrough.typed_through(doc, pos)
            if found is not None:
                return Triage(Verdict.WAIT, key=found[0], typed=found[1])
        tree = self._tree(doc)
        reason = oversized_reason(doc, settings) or skip_reason(
            doc, pos, query.trigger, settings.completion, tree
        )
        if reason:
            outcome = CompletionOutcome(
                request_id=query.request_id,
                line=pos.line,
                column=pos.column,
                version=doc.version,
                skipped=reason,
            )
            outcome.latency_ms = outcome.whole_ms = (time.perf_counter() - query.received_at) * 1000
            self._remember(outcome)
            return Triage(Verdict.SKIPPED, outcome=outcome)
        return Triage(Verdict.MODEL, tree=tree)

    def complete(
        self,
        query: CompletionQuery,
        *,
        cancel: CancelToken | None = None,
        queued_at: float | None = None,
        on_answer: Callable[[CompletionOutcome], None] | None = None,
        triage: Triage | None = None,
    ) -> CompletionOutcome:
        """Produce a suggestion for the query's snapshot; blocking (run on the model executor).

        What the scheduler adds is passed beside the query: ``cancel`` (superseded, client
        cancel), ``queued_at`` (when it left the debounce for the model thread),
        ``on_answer``, called on the model thread with the suggestion's start once
        ``answerAfterMs`` has passed (the rest is then written on and returned later;
        None: no early answer) and its ``triage`` (None: triaged here, without the cache:
        the CLI). The snapshot is the query's: nothing is read from disk.
        """
        started = time.perf_counter()
        cancel = cancel if cancel is not None else CancelToken()
        session = self.session
        settings = session.settings
        doc = query.snapshot
        pos = doc.clamp(query.line, query.column)
        outcome = CompletionOutcome(
            request_id=query.request_id, line=pos.line, column=pos.column, version=doc.version
        )
        queued = queued_at if queued_at is not None else started
        outcome.debounce_ms = max(0.0, queued - query.received_at) * 1000
        outcome.queue_ms = max(0.0, started - queued) * 1000
        if self.stale(query):
            outcome.skipped = "stale version"
            return outcome
        if triage is None:
            triage = self.triage(query, lookup=False)
        if triage.outcome is not None:
            return triage.outcome
        tree = triage.tree
        if cancel.cancelled:
            outcome.cancelled = True
            return outcome
        backend = session.load_backend()
        if backend is None:
            outcome.error = session.model_error or "no model loaded"
            outcome.skipped = "no model"
            return outcome
        prompt: AssembledPrompt | None = None
        # A running index scan waits between files while the prompt is built and decoded.
        try:
            with session.foreground():
                prompt = self.build_prompt(doc, pos, strategy=query.strategy, keep=True)
                outcome = self._generate(
                    query,
                    doc,
                    pos,
                    tree,
                    prompt,
                    backend,
                    settings,
                    outcome,
                    started,
                    cancel=cancel,
                    on_answer=on_answer,
                )
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
        base: CompletionOutcome,
        started: float,
        *,
        cancel: CancelToken,
        on_answer: Callable[[CompletionOutcome], None] | None,
    ) -> CompletionOutcome:
        """Generate at ``pos`` with ``prompt``; return ``base`` completed by what came of it.

        The stages: the plan (serving/generation.py), the backend's generation, the next
        likeliest line where post-processing dropped the greedy one, the outcome settled,
        the type-through entry put. A backend failure or cancel is part of the outcome
        (its prompt and times kept)."""
        planned = plan(
            query,
            doc,
            pos,
            tree,
            prompt,
            backend,
            settings,
            base,
            started=started,
            cancel=cancel,
            on_answer=on_answer,
            typethrough=self.typethrough,
        )
        # an early answer's entry is being written until the whole is put: a keystroke
        # that typed all of it waits for more meanwhile (TypeThrough.wait_for_more)
        writing: AbstractContextManager[None] = (
            self.typethrough.writing(planned.entry) if planned.early else nullcontext()
        )
        with writing:
            try:
                result = backend.generate(planned.request)
            except GenerationCancelled:
                # Superseded or cancelled within the backend (a remote tokenizer call).
                return dataclasses.replace(planned.prepared, cancelled=True)
            except LspAssistError as exc:
                logger.error("completion failed: %s", exc)
                return dataclasses.replace(planned.prepared, error=str(exc))
            if result.ttft_ms > 0:  # the prompt was evaluated whole (not cancelled within)
                self.session.adaptive.observe(
                    result.prompt_tokens - result.reused_tokens, result.prefill_ms / 1000
                )
            text = planned.clean(result.text, result.stop_reason)
            request = planned.request
            ended = result.stop_reason not in ("cancelled", "timeout")
            if not text and request.code_first and request.alternatives == 1 and ended:
                text = self._next_best(backend, planned.retry(), result.text, planned.clean)
            outcome = settle(planned, result, text, query)
            if outcome.text or not outcome.cancelled:
                # the whole is what the entry answers with from now on (nothing: no entry);
                # a cancelled request leaves what an earlier one put there
                kept = planned.kept_after(result, outcome)
                block, kept = planned.as_block(outcome.text, kept)
                if block != outcome.text:
                    outcome.text, outcome.multiline = block, True
                self.typethrough.put(planned.entry, outcome.text, kept)
            return outcome

    @staticmethod
    def _next_best(
        backend: Backend, request: GenerationRequest, raw: str, clean: Callable[[str, str], str]
    ) -> str:
        """At a blank line whose greedy line post-processing dropped, the next likeliest one.

        The dropped line is most often a copy of the line below (docs/serving.md,
        post-processing 5): after Enter above existing code the model writes that code
        again, and the user got nothing (issue 24: 9 of 52 new lines in a replay). The
        branch that starts with the next likeliest first token (the alternatives' decode,
        from the prompt's KV state) is asked for once; "" when there is none.
        """
        if not raw.strip():
            return ""
        retry = dataclasses.replace(request, alternatives=2, on_text=None, on_logprob=None)
        if "\n" in request.forced_prefix and not request.forced_prefix.strip():
            # At column 0 the healed text is the line break: every branch would start with
            # it. As prompt tokens (the KV cache holds them: the greedy wrote them) the
            # branches start at the line's first token instead.
            retry = dataclasses.replace(
                retry,
                prompt_tokens=[*request.prompt_tokens, *backend.tokenize(request.forced_prefix)],
                forced_prefix="",
            )
        try:
            again = backend.generate(retry)
        except LspAssistError as exc:
            logger.debug("no next-best line: %s", exc)
            return ""
        found = (clean(b.text, b.stop_reason) for b in again.alternatives if b.complete)
        return next((text for text in found if text), "")

    def prefill(
        self,
        doc: DocumentSnapshot,
        line: int = 0,
        column: int = 0,
        *,
        cancel: CancelToken | None = None,
        reason: str = "open",
    ) -> int:
        """Evaluate a snapshot's stable prompt prefix at a position ahead of time; return
        tokens evaluated.

        The snapshot is taken on the event loop; ``cancel`` lets a completion that arrives
        meanwhile stop the prefill at once. ``reason`` is recorded in ``last_prefill``.
        """
        session = self.session
        if (cancel is not None and cancel.cancelled) or oversized_reason(doc, session.settings):
            return 0
        backend = session.load_backend()
        if backend is None:
            return 0
        began = time.perf_counter()
        position = doc.clamp(line, column)
        try:
            prompt = self.build_prompt(doc, position, keep=True)
        except LspAssistError as exc:
            logger.debug("prefill skipped: %s", exc)
            return 0
        stable = prompt.tokens[: prompt.stable_prefix_len]
        if not stable or (cancel is not None and cancel.cancelled):
            return 0
        with session.foreground():  # the scan waits meanwhile, as for a completion
            evaluating = time.perf_counter()
            evaluated = backend.prefill(stable, cache_key=doc.uri, cancel=cancel)
            session.adaptive.observe(evaluated, time.perf_counter() - evaluating)
        if cancel is None or not cancel.cancelled:
            self.last_prefill = record = PrefillRecord(
                uri=doc.uri,
                line=position.line,
                column=position.column,
                reason=reason,
                prompt_tokens=len(stable),
                evaluated=evaluated,
                ms=(time.perf_counter() - began) * 1000,
            )
            logger.debug(
                "prefilled (%s) %s:%d:%d: %d of %d tokens evaluated in %.0f ms",
                reason,
                doc.uri,
                record.line,
                record.column,
                evaluated,
                record.prompt_tokens,
                record.ms,
            )
        return evaluated

    def explain(
        self,
        doc: DocumentSnapshot,
        line: int,
        column: int,
        *,
        strategy: str | None = None,
    ) -> AssembledPrompt:
        """Return the prompt the engine would build at a snapshot's position (explain
        commands): a fresh build, which reads nothing completions kept and keeps nothing."""
        return self.build_prompt(doc, doc.clamp(line, column), strategy=strategy)

    def _remember(self, outcome: CompletionOutcome) -> None:
        """Keep the outcome for ``lspAssist.status`` (a skip by the trigger rules too: no
        metrics record, as no model work was asked for)."""
        with self._outcomes_lock:
            self.last_outcomes = (*self.last_outcomes, outcome)[-LAST_OUTCOMES:]

    def _finish(
        self,
        outcome: CompletionOutcome,
        query: CompletionQuery,
        doc: DocumentSnapshot,
        trigger: str,
        prompt: AssembledPrompt | None,
    ) -> None:
        """Remember the outcome for status and write its metrics record."""
        self._remember(outcome)
        metrics = self.session.metrics
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
