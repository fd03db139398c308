"""Scheduling of completion requests: debounce, newest-wins, cancellation, one model thread.

The model runs on an executor of its own (one thread: one llama.cpp context, serialized),
never on the event loop nor on pygls's thread pool. A new request for a document cancels
the older one for that document, and a request that arrives while the model is busy
with an older request cancels that one too: the user has moved on.

Requests arrive on the event loop, which also applies the edits, as a frozen
:class:`CompletionQuery` over the snapshot taken there, at arrival (see
serving/engine.py). What the scheduler adds while it serves one (the cancel flag, when
it left the debounce, the early-answer callback) is its private :class:`_Ticket`,
handed to the engine beside the query; the query itself never changes.

Early answers (serving/early.py): the engine may hand over the suggestion's start while
the model writes the rest. The request's answer is then that start; the model thread
goes on, a keystroke served from the type-through cache leaves it running (it is
writing the very suggestion being typed through), a request that goes to the model
cancels it, and when it completes with a text other than the start (longer, shorter,
different or empty) ``on_ready`` is called (the LSP layer sends
``lspAssist/suggestionReady``). A keystroke that typed all of what is written so
far waits for the next piece on ``TypeThrough.wait_for_more`` (serving/typethrough.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

from lsp_assist.backends import CancelToken
from lsp_assist.documents import DocumentSnapshot
from lsp_assist.serving.alternatives import wanted
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.triggers import skip_reason

logger = logging.getLogger(__name__)

T = TypeVar("T")

REST_WAIT_S = 0.25
"""How long a keystroke that typed all of a suggestion still being written waits for its
next piece (the model writes a token every ~25 ms on a 2-core CPU) before going to the
model itself."""
WAITERS = 2
"""Threads that wait for the rest of a suggestion (``TypeThrough.wait_for_more`` blocks)."""

ReadyCallback = Callable[[CompletionQuery, CompletionOutcome], None]


def _settle(future: asyncio.Future[CompletionOutcome], answer: CompletionOutcome) -> None:
    """Set an early answer unless the request is over already."""
    if not future.done():
        future.set_result(answer)


COMPLETION_FIRST = "completion requested"
"""Why a completion cancels a prefill or a rewrite (the rewrite then runs again)."""
CURSOR_MOVED = "cursor"
"""The reason of a prefill at the position the client reported (``lspAssist/didMoveCursor``)."""
REWRITE_RETRIES = 3
"""How often a rewrite cancelled by completions runs again."""


@dataclass(eq=False)
class _Ticket:
    """The scheduler's bookkeeping for one query: what it adds, kept out of the value."""

    query: CompletionQuery
    cancel: CancelToken = field(default_factory=CancelToken)
    queued_at: float | None = None
    """When the scheduler handed the query to the model thread (after the debounce)."""
    on_answer: Callable[[CompletionOutcome], None] | None = None
    """Set for a query that may be answered early: the engine calls it on the model thread."""


class Scheduler:
    """Runs engine work on the model executor with debounce and newest-wins."""

    def __init__(self, engine: CompletionEngine, *, on_ready: ReadyCallback | None = None) -> None:
        self.engine = engine
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lsp-assist-model")
        self._waiters = ThreadPoolExecutor(
            max_workers=WAITERS, thread_name_prefix="lsp-assist-wait"
        )
        """Where a keystroke waits for the rest of a suggestion off the event loop."""
        self._latest: dict[str, CancelToken] = {}
        self._running: CancelToken | None = None
        self._prefills: set[CancelToken] = set()
        self._rewrites: set[CancelToken] = set()
        """Next-edit rewrites queued or running: a completion or a newer rewrite cancels them."""
        self._writing_on: set[CancelToken] = set()
        """Requests answered early whose rest the model thread is still writing."""
        self.on_ready = on_ready
        """Called on the event loop when an early-answered suggestion is complete and not
        the start answered (chosen by the caller at set-up: the LSP server, from the
        client's capabilities)."""

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking engine call on the model executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, func, *args)

    async def prefill(
        self,
        snapshot: DocumentSnapshot,
        line: int = 0,
        column: int = 0,
        *,
        reason: str = "open",
    ) -> int:
        """Evaluate a snapshot's stable prefix at a position on the model thread.

        The caller takes the snapshot on the event loop (the buffer as it is then). A
        completion cancels it; a prefill at the cursor (``reason`` ``cursor``) cancels
        the older prefills still queued or running, since the user has moved on."""
        if reason == CURSOR_MOVED:
            for older in list(self._prefills):
                older.cancel("the cursor moved")
        token = CancelToken()
        self._prefills.add(token)
        try:
            loop = asyncio.get_running_loop()
            done: int = await loop.run_in_executor(
                self.executor,
                lambda: token.call(
                    self.engine.prefill, snapshot, line, column, cancel=token, reason=reason
                ),
            )
            return done
        finally:
            self._prefills.discard(token)

    async def rewrite(
        self, func: Callable[[CancelToken], T], *, wanted: Callable[[], bool] | None = None
    ) -> T:
        """Run a next-edit rewrite on the model thread; a newer rewrite or a completion
        cancels it (the user moved on; the suggestion at the cursor comes first).

        Cancelled by a completion while ``wanted()`` still holds (the buffer is the one the
        rewrite is for), it runs again after that completion, up to ``REWRITE_RETRIES``
        times: Emacs asks for a suggestion and a next edit after the same change, and the
        suggestion would otherwise empty every model answer."""
        for older in list(self._rewrites):
            older.cancel("superseded")
        loop = asyncio.get_running_loop()
        tries = 0
        while True:
            token = CancelToken()
            self._rewrites.add(token)
            try:
                result = await loop.run_in_executor(self.executor, partial(token.call, func, token))
            finally:
                self._rewrites.discard(token)
            again = token.reason == COMPLETION_FIRST and wanted is not None and wanted()
            if not again or tries == REWRITE_RETRIES:
                return result
            tries += 1

    def _supersede(self, ticket: _Ticket, *, hit: bool = False, prefills: bool = True) -> None:
        """Cancel older work for a new query; a cache ``hit`` leaves early answers writing
        on; ``prefills`` False leaves the prefills and rewrites (the query will be skipped)."""
        for token in (list(self._prefills) + list(self._rewrites)) if prefills else []:
            token.cancel(COMPLETION_FIRST)
        uri = ticket.query.uri
        previous = self._latest.get(uri)
        if previous is not None and previous is not ticket.cancel:
            previous.cancel("superseded")
        running = self._running
        keep = hit and running in self._writing_on
        if running is not None and running is not ticket.cancel and not keep:
            running.cancel("superseded")
        if not hit:
            for token in list(self._writing_on):
                token.cancel("superseded")
        self._latest[uri] = ticket.cancel

    async def complete(self, query: CompletionQuery) -> CompletionOutcome:
        """Answer a query: type-through cache first, then debounce, then the model."""
        ticket = _Ticket(query)
        # An explicit ask for alternatives goes to the model: the cache holds one suggestion.
        cycles = wanted(query, self.engine.settings.completion) > 1
        hit = None if cycles else self.engine.cached(query)
        if hit is None and not cycles:
            hit = await self._wait_for_the_rest(query)
        if hit is not None:
            self._supersede(ticket, hit=True)
            return hit
        # An automatic request the model will not see (mid-word, text right of the cursor:
        # the rules that need no syntax tree) leaves the prefills running: in Emacs every
        # rest of point asks, and a prefill where the cursor rests must survive it.
        doc = query.snapshot
        skipped = skip_reason(
            doc,
            doc.clamp(query.line, query.column),
            query.trigger,
            self.engine.settings.completion,
            None,
        )
        self._supersede(ticket, prefills=not skipped)
        try:
            delay = self.engine.settings.completion.debounce_ms / 1000
            if delay > 0 and query.trigger == "automatic":
                await asyncio.sleep(delay)
            if ticket.cancel.cancelled:
                return self._cancelled(ticket)
            if self.engine.stale(query):
                return self._cancelled(ticket, "stale version")
            ticket.queued_at = time.perf_counter()
            loop = asyncio.get_running_loop()
            early: asyncio.Future[CompletionOutcome] = loop.create_future()

            def on_answer(answer: CompletionOutcome) -> None:
                loop.call_soon_threadsafe(_settle, early, answer)

            if query.answer_early:
                ticket.on_answer = on_answer
            future = loop.run_in_executor(self.executor, self._run_on_model, ticket)
            await asyncio.wait((future, early), return_when=asyncio.FIRST_COMPLETED)
            if future.done() or not early.done():
                early.cancel()
                return await future
            answer = early.result()
            self._writing_on.add(ticket.cancel)
            future.add_done_callback(lambda done: self._written(ticket, answer, done))
            return answer
        except asyncio.CancelledError:
            ticket.cancel.cancel("client cancelled")
            raise
        finally:
            if self._latest.get(query.uri) is ticket.cancel:
                del self._latest[query.uri]

    async def _wait_for_the_rest(self, query: CompletionQuery) -> CompletionOutcome | None:
        """A keystroke that typed all of a suggestion still being written waits for more.

        Without this it would miss the cache (nothing left to show), cancel the writing
        and start the model afresh for the text that is about to arrive.
        """
        doc = query.snapshot
        typethrough = self.engine.typethrough
        found = typethrough.typed_through(doc, doc.clamp(query.line, query.column))
        if found is None:
            return None
        key, typed = found
        loop = asyncio.get_running_loop()
        # woken by the writer's next piece or its end (a condition, not a poll)
        more = await loop.run_in_executor(
            self._waiters, lambda: typethrough.wait_for_more(key, REST_WAIT_S, than=typed)
        )
        return self.engine.cached(query) if more else None

    def _written(
        self,
        ticket: _Ticket,
        answer: CompletionOutcome,
        done: asyncio.Future[CompletionOutcome],
    ) -> None:
        """The rest of an early-answered suggestion is written (or was cancelled)."""
        self._writing_on.discard(ticket.cancel)
        if done.cancelled() or done.exception() is not None:
            return
        whole = done.result()
        # Longer, shorter or other than the start the editor shows (nothing, even: a
        # dropped copy): asked again, the client gets the whole and replaces the start.
        changed = whole.text != answer.text and not whole.cancelled
        if changed and self.on_ready is not None:
            try:
                self.on_ready(ticket.query, whole)
            except Exception:
                logger.exception("on_ready callback failed")

    def _run_on_model(self, ticket: _Ticket) -> CompletionOutcome:
        if ticket.cancel.cancelled:
            return self._cancelled(ticket)
        self._running = ticket.cancel
        try:
            # as the thread's current token, it also cancels work not handed the token
            return ticket.cancel.call(
                self.engine.complete,
                ticket.query,
                cancel=ticket.cancel,
                queued_at=ticket.queued_at,
                on_answer=ticket.on_answer,
            )
        finally:
            self._running = None

    @staticmethod
    def _cancelled(ticket: _Ticket, reason: str = "") -> CompletionOutcome:
        query = ticket.query
        return CompletionOutcome(
            request_id=query.request_id,
            line=query.line,
            column=query.column,
            cancelled=True,
            skipped=reason or ticket.cancel.reason or "cancelled",
            latency_ms=(time.perf_counter() - query.received_at) * 1000,
        )

    def shutdown(self) -> None:
        """Cancel what runs and stop the executor."""
        if self._running is not None:
            self._running.cancel("shutdown")
        self.executor.shutdown(wait=False, cancel_futures=True)
        self._waiters.shutdown(wait=False, cancel_futures=True)
