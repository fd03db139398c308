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

Who cancels whom is one table, :data:`SUPERSEDES`: for each :class:`Arrival` (a
completion that goes to the model, a type-through hit, a skipped completion, a prefill,
a rewrite, the shutdown), the :class:`Work` in flight it cancels, how far it reaches
(:class:`Reach`: the same document's, the one on the model thread, all) and the reason
given. The scheduler keeps every piece of work in flight in one registry and applies
the table to it when something arrives; nothing else cancels. Work run with
:meth:`Scheduler.run` (a model load, a settings change, the explain command) is not in
the table: it is never cancelled and cancels nothing.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final, TypeVar

from lsp_assist.backends import CancelToken
from lsp_assist.documents import DocumentSnapshot
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.triage import Triage, Verdict

logger = logging.getLogger(__name__)

T = TypeVar("T")

REST_WAIT_S = 0.25
"""How long a keystroke that typed all of a suggestion still being written waits for its
next piece (the model writes a token every ~25 ms on a 2-core CPU) before going to the
model itself."""
WAITERS = 2
"""Threads that wait for the rest of a suggestion (``TypeThrough.wait_for_more`` blocks)."""

ReadyCallback = Callable[[CompletionQuery, CompletionOutcome], None]


COMPLETION_FIRST = "completion requested"
"""Why a completion cancels a prefill or a rewrite (the rewrite then runs again)."""
SUPERSEDED = "superseded"
"""Why newer work of the same kind cancels older work (the user has moved on)."""
CURSOR_MOVED = "cursor"
"""The reason of a prefill at the position the client reported (``lspAssist/didMoveCursor``)."""
REWRITE_RETRIES = 3
"""How often a rewrite cancelled by completions runs again."""


class Work(enum.Enum):
    """A kind of work the scheduler has in flight, which something arriving may cancel."""

    COMPLETION = "completion"
    """A completion not answered yet: in its debounce, queued, or on the model thread."""
    EARLY_REST = "early rest"
    """The rest of a suggestion answered early, which the model thread is still writing."""
    PREFILL = "prefill"
    """A prompt's stable prefix evaluated ahead of the request (at open, at the cursor)."""
    REWRITE = "rewrite"
    """A next-edit rewrite by the model."""


class Arrival(enum.Enum):
    """What arrives at the scheduler and may supersede the work in flight."""

    COMPLETION = "completion"
    """A completion that goes to the model (not served from the cache, not skipped)."""
    CACHE_HIT = "type-through hit"
    """A completion answered from the type-through cache."""
    SKIPPED = "skipped completion"
    """An automatic completion the skip rules answer before the model (mid-word, text
    right of the cursor: the rules that need no syntax tree)."""
    CURSOR_PREFILL = "prefill at the cursor"
    """A prefill where the client reports the cursor at rest (``lspAssist/didMoveCursor``)."""
    OPEN_PREFILL = "prefill at open"
    """A prefill of a file opened, or of each open file once the model has loaded."""
    REWRITE = "rewrite"
    """A next-edit rewrite."""
    SHUTDOWN = "shutdown"
    """The scheduler stops (the session ends)."""


class Reach(enum.Flag):
    """Which work of a kind an arrival cancels."""

    SAME_DOCUMENT = enum.auto()
    """The work for the document the arrival is for, waiting or on the model thread."""
    ON_MODEL = enum.auto()
    """The work the model thread runs now, whatever its document."""
    ALL = enum.auto()
    """Every piece of work of the kind."""


@dataclass(frozen=True, slots=True)
class Supersedes:
    """One cell of the table: how far an arrival reaches into a kind of work, and why."""

    reach: Reach
    reason: str


SUPERSEDES: Final[Mapping[Arrival, Mapping[Work, Supersedes]]] = {
    # the user typed: the suggestion at the cursor comes first; an early rest still
    # being written is dropped (the request writes its own)
    Arrival.COMPLETION: {
        Work.COMPLETION: Supersedes(Reach.SAME_DOCUMENT | Reach.ON_MODEL, SUPERSEDED),
        Work.EARLY_REST: Supersedes(Reach.ALL, SUPERSEDED),
        Work.PREFILL: Supersedes(Reach.ALL, COMPLETION_FIRST),
        Work.REWRITE: Supersedes(Reach.ALL, COMPLETION_FIRST),
    },
    # a keystroke into a suggestion: the early rest writes the very text being typed
    Arrival.CACHE_HIT: {
        Work.COMPLETION: Supersedes(Reach.SAME_DOCUMENT | Reach.ON_MODEL, SUPERSEDED),
        Work.PREFILL: Supersedes(Reach.ALL, COMPLETION_FIRST),
        Work.REWRITE: Supersedes(Reach.ALL, COMPLETION_FIRST),
    },
    # in Emacs every rest of point asks: the prefill where the cursor rests survives it
    Arrival.SKIPPED: {
        Work.COMPLETION: Supersedes(Reach.SAME_DOCUMENT | Reach.ON_MODEL, SUPERSEDED),
        Work.EARLY_REST: Supersedes(Reach.ALL, SUPERSEDED),
    },
    # the user has moved on: the older prefills, queued or running, are for elsewhere
    Arrival.CURSOR_PREFILL: {Work.PREFILL: Supersedes(Reach.ALL, "the cursor moved")},
    Arrival.OPEN_PREFILL: {},
    Arrival.REWRITE: {Work.REWRITE: Supersedes(Reach.ALL, SUPERSEDED)},
    Arrival.SHUTDOWN: {kind: Supersedes(Reach.ALL, "shutdown") for kind in Work},
}
"""Who cancels whom: for each arrival, the kinds of work it cancels, how far, and why.
A kind of work an arrival does not name goes on. Read by ``Scheduler._supersede``,
checked against behaviour by tests/serving/test_cancellation.py."""


@dataclass(eq=False)
class _InFlight:
    """One piece of work in the scheduler's registry: its kind, document and token."""

    kind: Work
    uri: str
    cancel: CancelToken = field(default_factory=CancelToken)
    on_model: bool = False
    """True while the model thread runs it (written there, read on the event loop)."""

    def reached(self, reach: Reach, uri: str) -> bool:
        """True when an arrival for ``uri`` reaching ``reach`` reaches this work."""
        if Reach.ALL in reach:
            return True
        if Reach.SAME_DOCUMENT in reach and self.uri == uri:
            return True
        return Reach.ON_MODEL in reach and self.on_model


@dataclass(eq=False)
class _Ticket:
    """The scheduler's bookkeeping for one query: what it adds, kept out of the value."""

    query: CompletionQuery
    work: _InFlight
    queued_at: float | None = None
    """When the scheduler handed the query to the model thread (after the debounce)."""
    on_answer: Callable[[CompletionOutcome], None] | None = None
    """Set for a query that may be answered early: the engine calls it on the model thread."""
    told: str | None = None
    """The text the client was last given for it (answered early, then told again)."""
    triage: Triage | None = None
    """What the triage on the event loop found (the model thread takes it from there)."""

    @property
    def cancel(self) -> CancelToken:
        """The query's cancel flag (its work's)."""
        return self.work.cancel


class Scheduler:
    """Runs engine work on the model executor with debounce and newest-wins."""

    def __init__(self, engine: CompletionEngine, *, on_ready: ReadyCallback | None = None) -> None:
        self.engine = engine
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lsp-assist-model")
        self._waiters = ThreadPoolExecutor(
            max_workers=WAITERS, thread_name_prefix="lsp-assist-wait"
        )
        """Where a keystroke waits for the rest of a suggestion off the event loop."""
        self._in_flight: dict[int, _InFlight] = {}
        """Every piece of work the table may cancel, by id (changed on the event loop)."""
        self.on_ready = on_ready
        """Called on the event loop when an early-answered suggestion is complete and not
        the start answered (chosen by the caller at set-up: the LSP server, from the
        client's capabilities)."""

    # -- the registry and the table -------------------------------------------------

    def _supersede(self, arrival: Arrival, uri: str = "") -> None:
        """Cancel the work in flight that ``arrival`` (for ``uri``) supersedes: SUPERSEDES."""
        rules = SUPERSEDES[arrival]
        for work in list(self._in_flight.values()):
            rule = rules.get(work.kind)
            if rule is not None and not work.cancel.cancelled and work.reached(rule.reach, uri):
                work.cancel.cancel(rule.reason)

    def _register(self, kind: Work, uri: str = "") -> _InFlight:
        """Add new work to the registry (after its arrival superseded what it supersedes)."""
        work = _InFlight(kind, uri)
        self._in_flight[id(work)] = work
        return work

    def _end(self, work: _InFlight) -> None:
        self._in_flight.pop(id(work), None)

    @property
    def in_flight(self) -> int:
        """Work in the registry now (each piece leaves it when it ends: none at rest)."""
        return len(self._in_flight)

    @staticmethod
    def _on_model(work: _InFlight, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``func`` on the model thread as ``work`` (its token the thread's current)."""
        work.on_model = True
        try:
            return work.cancel.call(func, *args, **kwargs)
        finally:
            work.on_model = False

    # -- work ------------------------------------------------------------------------

    async def run(self, func: Callable[..., T], *args: Any) -> T:
        """Run a blocking engine call on the model executor (never cancelled)."""
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
        arrival = Arrival.CURSOR_PREFILL if reason == CURSOR_MOVED else Arrival.OPEN_PREFILL
        self._supersede(arrival, snapshot.uri)
        work = self._register(Work.PREFILL, snapshot.uri)
        try:
            loop = asyncio.get_running_loop()
            done: int = await loop.run_in_executor(
                self.executor,
                partial(
                    self._on_model,
                    work,
                    self.engine.prefill,
                    snapshot,
                    line,
                    column,
                    cancel=work.cancel,
                    reason=reason,
                ),
            )
            return done
        finally:
            self._end(work)

    async def rewrite(
        self, func: Callable[[CancelToken], T], *, wanted: Callable[[], bool] | None = None
    ) -> T:
        """Run a next-edit rewrite on the model thread; a newer rewrite or a completion
        cancels it (the user moved on; the suggestion at the cursor comes first).

        Cancelled by a completion while ``wanted()`` still holds (the buffer is the one the
        rewrite is for), it runs again after that completion, up to ``REWRITE_RETRIES``
        times: Emacs asks for a suggestion and a next edit after the same change, and the
        suggestion would otherwise empty every model answer."""
        self._supersede(Arrival.REWRITE)
        loop = asyncio.get_running_loop()
        tries = 0
        while True:
            work = self._register(Work.REWRITE)  # a retry is the same rewrite: no new arrival
            try:
                result = await loop.run_in_executor(
                    self.executor, partial(self._on_model, work, func, work.cancel)
                )
            finally:
                self._end(work)
            again = work.cancel.reason == COMPLETION_FIRST and wanted is not None and wanted()
            if not again or tries == REWRITE_RETRIES:
                return result
            tries += 1

    async def complete(self, query: CompletionQuery) -> CompletionOutcome:
        """Answer a query: triaged once (the cache, a wait, the skip rules), then debounce,
        then the model."""
        triage = self.engine.triage(query)
        if triage.verdict is Verdict.WAIT:
            triage = await self._wait_for_the_rest(query, triage)
        if triage.verdict is Verdict.SERVED and triage.outcome is not None:
            self._supersede(Arrival.CACHE_HIT, query.uri)
            return triage.outcome
        skipped = triage.verdict is Verdict.SKIPPED
        self._supersede(Arrival.SKIPPED if skipped else Arrival.COMPLETION, query.uri)
        if skipped and triage.outcome is not None:
            return triage.outcome
        ticket = _Ticket(query, self._register(Work.COMPLETION, query.uri), triage=triage)
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
                loop.call_soon_threadsafe(self._answered, ticket, early, answer)

            if query.answer_early:
                ticket.on_answer = on_answer
            future = loop.run_in_executor(self.executor, self._run_on_model, ticket)
            await asyncio.wait((future, early), return_when=asyncio.FIRST_COMPLETED)
            if future.done() or not early.done():
                early.cancel()
                return await future
            answer = early.result()
            ticket.work.kind = Work.EARLY_REST  # the registry keeps it until it is written
            future.add_done_callback(lambda done: self._written(ticket, done))
            return answer
        except asyncio.CancelledError:
            ticket.cancel.cancel("client cancelled")
            raise
        finally:
            if ticket.work.kind is Work.COMPLETION:
                self._end(ticket.work)

    async def _wait_for_the_rest(self, query: CompletionQuery, triage: Triage) -> Triage:
        """A keystroke that typed all of a suggestion still being written waits for more,
        then is triaged again (served from the cache when more came).

        Without this it would miss the cache (nothing left to show), cancel the writing
        and start the model afresh for the text that is about to arrive.
        """
        key, typed = triage.key, triage.typed
        loop = asyncio.get_running_loop()
        more = False
        if key is not None:
            # woken by the writer's next piece or its end (a condition, not a poll)
            more = await loop.run_in_executor(
                self._waiters, partial(self.engine.wait_for_more, key, REST_WAIT_S, typed)
            )
        again = self.engine.triage(query, lookup=more)
        if again.verdict is Verdict.WAIT:  # more came, and the user typed all of it too
            return self.engine.triage(query, lookup=False)
        return again

    def _answered(
        self,
        ticket: _Ticket,
        early: asyncio.Future[CompletionOutcome],
        answer: CompletionOutcome,
    ) -> None:
        """The engine answered early (on the loop): the request's answer, or else, with
        kept lines still being written, its shown line now whole (``on_ready``)."""
        if not early.done():
            early.set_result(answer)
            ticket.told = answer.text
        elif ticket.told is not None and answer.text != ticket.told:
            ticket.told = answer.text
            self._tell(ticket, answer)

    def _written(self, ticket: _Ticket, done: asyncio.Future[CompletionOutcome]) -> None:
        """The rest of an early-answered suggestion is written (or was cancelled)."""
        self._end(ticket.work)
        if done.cancelled() or done.exception() is not None:
            return
        whole = done.result()
        # Longer, shorter or other than the start the editor shows (nothing, even: a
        # dropped copy): asked again, the client gets the whole and replaces the start.
        if whole.text != ticket.told and not whole.cancelled:
            self._tell(ticket, whole)

    def _tell(self, ticket: _Ticket, outcome: CompletionOutcome) -> None:
        """Call ``on_ready``: the client shows a start of a suggestion that is now other."""
        if self.on_ready is not None:
            try:
                self.on_ready(ticket.query, outcome)
            except Exception:
                logger.exception("on_ready callback failed")

    def _run_on_model(self, ticket: _Ticket) -> CompletionOutcome:
        if ticket.cancel.cancelled:
            return self._cancelled(ticket)
        return self._on_model(
            ticket.work,
            self.engine.complete,
            ticket.query,
            cancel=ticket.cancel,
            queued_at=ticket.queued_at,
            on_answer=ticket.on_answer,
            triage=ticket.triage,
        )

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

    def shutdown(self, *, wait: bool = False) -> None:
        """Cancel the work in flight and stop the executors; with ``wait``, until the model
        thread is idle (a model load runs to its end: it cannot be cancelled)."""
        self._supersede(Arrival.SHUTDOWN)
        self.executor.shutdown(wait=False, cancel_futures=True)
        self._waiters.shutdown(wait=False, cancel_futures=True)
        if wait:
            self.executor.shutdown(wait=True)
