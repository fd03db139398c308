"""The serving object: what one editor connection asks of lsp-assist, behind one typed API.

Owns everything between a language server's protocol and the pipeline, for the LSP
layer, whose handlers only read lsprotocol params, call one method here and build the
lsprotocol answer: the composition at ``initialize`` (a :class:`Session`, its
:class:`CompletionEngine`, the :class:`Scheduler`, the :class:`NextEdits`); the
model-load lifecycle (the first load at :meth:`Service.start` and every model settings
change, each on the model thread and reported to the :class:`Client` as progress; the
open files' stable prefixes evaluated after it; :attr:`Service.ready` says "not ready"
until then); the open documents, in the client's position encoding; suggestions; the
next-edit round trip (proposed on the event loop, the model's rewrite on the model
thread, merged on the loop); the shown-suggestion telemetry and its retention timer;
the commands' answers. No pygls here: the editor is the :class:`Client` protocol.

Every method runs on the event loop but :meth:`Service.close`, which blocks. A command
whose argument names nothing (a document neither open nor on disk) raises
:class:`~lsp_assist.errors.UsageError`; one that cannot be done (no model) raises
another :class:`~lsp_assist.errors.LspAssistError`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.errors import DocumentError, UsageError
from lsp_assist.serving.adaptive_budget import explain_with_budget
from lsp_assist.serving.blocking import run_blocking
from lsp_assist.serving.bounds import memory_json
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.next_edit import NextEdits, ProposedEdit
from lsp_assist.serving.scheduler import CURSOR_MOVED, ReadyCallback, Scheduler
from lsp_assist.serving.session import BackendFactory, Session
from lsp_assist.serving.status import status_json
from lsp_assist.telemetry import OfferedItem, item_id, request_of, trigger_kind, trim_edit

__all__ = ["Client", "LspChange", "Service", "Suggestion", "settings_from_options"]

logger = logging.getLogger(__name__)

LspChange = tuple[tuple[int, int, int, int] | None, str]
"""One content change as the client sent it: its range (start line, start character,
end line, end character, in the client's encoding; None: the whole text), its text."""


class Client(Protocol):
    """What the serving object tells the editor (the LSP server implements it)."""

    def warn(self, message: str, *, error: bool = False) -> None:
        """Show ``message`` in the editor (an error when ``error``) and log it."""

    async def begin_progress(self, token: str, title: str) -> bool:
        """Begin a work-done progress; False when the client has none."""

    def report_progress(self, token: str, message: str, percentage: int) -> None:
        """Report a phase of a progress begun."""

    def end_progress(self, token: str, message: str) -> None:
        """End a progress begun."""


@dataclass(frozen=True, slots=True)
class Suggestion:
    """What a completion handler shows: texts at a position of the snapshot they are for."""

    texts: tuple[str, ...]
    """One, or with alternatives asked for up to the ``alternatives`` setting, greedy first."""
    items: tuple[str, ...]
    """Each text's item id (its accept command's argument): the request id, then ``.1`` ..."""
    pos: Position
    """The cursor in code points (the snapshot's)."""
    lsp_pos: tuple[int, int]
    """The cursor in the client's encoding: line, character."""
    snapshot: DocumentSnapshot
    """The buffer as it was when the request arrived."""


def settings_from_options(options: Any, base: Settings) -> tuple[Settings, list[str]]:
    """The settings ``initializationOptions`` ask for over ``base``, and what was wrong."""
    settings, warnings = parse_settings(options if isinstance(options, dict) else None, base=base)
    if options is not None and not isinstance(options, dict):
        warnings.append("initializationOptions must be an object; using defaults")
    return settings, warnings


class Service:
    """One connection's session, engine, scheduler and next edits, and its model's lifecycle."""

    def __init__(
        self,
        settings: Settings,
        *,
        client: Client,
        workspace: Path | None = None,
        on_ready: ReadyCallback | None = None,
        warnings: Sequence[str] = (),
        backend_factory: BackendFactory | None = None,
    ) -> None:
        self.settings = settings
        """The settings the client asked for last (the session's follow on the model thread)."""
        self.session = Session(settings, workspace=workspace, backend_factory=backend_factory)
        self.engine = CompletionEngine(self.session)
        self.scheduler = Scheduler(self.engine, on_ready=on_ready)
        self.next_edits = NextEdits(self.session)
        self._client = client
        self._pending = list(warnings)
        """Warnings of the settings at initialize, shown once the client is ready (start)."""
        self._ready = False
        self._loads = 0
        """How many model loads this session began (each gets its own progress token)."""
        self._closed = False
        self._tasks: set[asyncio.Future[Any]] = set()

    @property
    def ready(self) -> bool:
        """True once the model is loaded and the open files' stable prefixes are evaluated."""
        return self._ready

    @property
    def next_edit_mode(self) -> str:
        """The ``nextEdit`` setting now: off, symbolic, model or both."""
        return self.next_edits.mode

    def _background(self, awaitable: Awaitable[Any]) -> None:
        """Run an awaitable in the background, keeping a reference until it ends."""
        task = asyncio.ensure_future(awaitable)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- the model-load lifecycle ----------------------------------------------------

    def start(self) -> None:
        """Show the settings' warnings, then load the model and index the workspace."""
        for warning in self._pending:
            self._client.warn(warning)
        self._pending.clear()
        self._background(self._load_model())
        self._background(self._index())

    def apply_settings(self, values: Any) -> None:
        """Apply settings the client changed (``{"lspAssist": {...}}`` or the object)."""
        if isinstance(values, dict) and "lspAssist" in values:
            values = values["lspAssist"]
        if not isinstance(values, dict):
            if values is not None:
                self._client.warn("settings must be an object; keeping the current ones")
            return
        settings, warnings = parse_settings(values, base=self.settings)
        for warning in warnings:
            self._client.warn(warning)
        self.settings = settings
        # On the model thread, after whatever runs there: a model swap must not close
        # the model under a running generation.
        swap = settings.model != self.session.settings.model
        self._background(self._apply_on_model_thread(settings, swap))

    async def _apply_on_model_thread(self, settings: Settings, swap: bool) -> None:
        session = self.session
        if swap:
            self._ready = False  # status says loading until the new model is in
        for warning in await self.scheduler.run(session.update_settings, settings):
            self._client.warn(warning)
        if swap and session.settings.model != settings.model:
            # refused (the KV cache would not fit): the loaded model runs on
            self._client.warn(session.model_refused, error=True)
            self._ready = True
        elif swap:
            await self._load_model()

    async def _load_model(self) -> None:
        """Load the model on its thread, reported as work-done progress; then set ready."""
        session, client = self.session, self._client
        self._ready = False
        token = f"lsp-assist/model-{self._loads}" if self._loads else "lsp-assist/model"
        self._loads += 1
        loop = asyncio.get_running_loop()
        # phases heard before the begin has gone out wait for it (None: not yet begun)
        began: list[bool | None] = [None]
        heard_early: list[tuple[str, int]] = []

        def report(message: str, percentage: int) -> None:
            if began[0] is None:
                heard_early.append((message, percentage))
            elif began[0]:
                client.report_progress(token, message, percentage)

        def heard(message: str, percentage: int) -> None:  # on the model thread
            loop.call_soon_threadsafe(report, message, percentage)

        loading = asyncio.ensure_future(self.scheduler.run(session.load_backend, heard))
        began[0] = progress = await client.begin_progress(token, "lsp-assist: loading model")
        for message, percentage in heard_early:
            report(message, percentage)
        if await loading is None:
            message = f"no completions: {session.model_error or 'model not loaded'}"
            client.warn(message, error=True)
        else:
            message = "ready"
            if progress:
                client.report_progress(token, "evaluating open files", 90)
            # Files opened while the model loaded: evaluate their stable prefix now.
            for uri in session.buffers.uris():
                snapshot = session.buffers.snapshot(uri, disk=False)
                if snapshot is not None:
                    await self.scheduler.prefill(snapshot)
        if progress:
            client.end_progress(token, message)
        self._ready = True

    async def _index(self) -> None:
        """Scan the workspace on the index's thread, reported as work-done progress."""
        session, client = self.session, self._client
        if session.index is None:
            return
        token = "lsp-assist/index"
        loop = asyncio.get_running_loop()
        progress = await client.begin_progress(token, "lsp-assist: indexing")
        last = [-1]

        def report(done: int, total: int) -> None:  # on the index's thread
            pct = int(done * 100 / total) if total else 100
            if progress and pct != last[0]:
                last[0] = pct
                loop.call_soon_threadsafe(
                    client.report_progress, token, f"{done}/{total} files", pct
                )

        thread = session.start_indexing(report)
        if thread is not None:
            await run_blocking(thread.join, name="lsp-assist-index-wait")
            # The index's objects live as long as the session: keep them out of the
            # collector's full passes (75-90 ms pauses that land on completion requests).
            # Not once the session is closed: that would keep its garbage for good (the
            # TCP transport unfreezes when a session ends).
            if not self._closed:
                gc.freeze()
        if progress:
            client.end_progress(token, "indexed")

    def close(self) -> None:
        """Stop the scheduler and the session's threads and free the model (blocking).

        The model is freed only once the model thread is idle: the work in flight is
        cancelled (a generation ends within milliseconds), but a model load runs to its
        end, and freeing the model under either would be a use-after-free in llama.cpp.
        """
        self._closed = True
        self.scheduler.shutdown(wait=True)
        self.session.close()

    # -- documents -------------------------------------------------------------------

    def open(self, uri: str, text: str, *, version: int, language_id: str) -> None:
        """A document opened: its buffer, and its stable prompt prefix evaluated ahead."""
        doc = self.session.buffers.open(uri, text, version=version, language_id=language_id)
        if self.session.loaded:  # while the user reads the file
            self._background(self.scheduler.prefill(doc.snapshot()))

    def change(self, uri: str, version: int, changes: Sequence[LspChange], encoding: str) -> None:
        """Apply a document's changes, each range in the client's ``encoding``."""
        buffers, shown = self.session.buffers, self.session.shown
        for rng, text in changes:
            doc = buffers.get(uri)
            if doc is None:
                logger.warning("didChange for unopened %s", uri)
                return
            old = doc.text
            try:
                if rng is None:
                    offsets = (0, len(old))
                    buffers.change(uri, version, [(None, None, text)])
                else:
                    start = doc.from_lsp(rng[0], rng[1], encoding)
                    end = doc.from_lsp(rng[2], rng[3], encoding)
                    offsets = (doc.offset_at(start), doc.offset_at(end))
                    buffers.change(uri, version, [(start, end, text)])
            except DocumentError as exc:
                self._client.warn(f"ignored an edit that does not fit {uri}: {exc}")
                continue
            if shown.follows(uri):  # accepted text to keep track of
                shown.changed(uri, *trim_edit(old, *offsets, text))
        doc = buffers.get(uri)
        if doc is not None:
            shown.edited(uri, doc.line)  # typed over the suggestion shown?

    def close_document(self, uri: str) -> None:
        """A document closed (its accepted suggestions measured first, on its text)."""
        self.session.shown.closed(uri)
        self.session.buffers.close(uri)

    def cursor_rested(
        self, uri: str, version: int | None, line: int, character: int, encoding: str
    ) -> None:
        """Evaluate the prompt where the cursor rests (ignored for another version, a
        closed file or before the model is loaded)."""
        snapshot = self.session.buffers.snapshot(uri, disk=False)
        if snapshot is None or not self.session.loaded:
            return
        if version is not None and version != snapshot.version:
            return  # the buffer changed since: the next report or request says where
        at = snapshot.from_lsp(line, character, encoding)
        self._background(self.scheduler.prefill(snapshot, at.line, at.column, reason=CURSOR_MOVED))

    # -- suggestions -----------------------------------------------------------------

    async def suggest(
        self,
        uri: str,
        line: int,
        character: int,
        encoding: str,
        *,
        automatic: bool,
        inline: bool,
    ) -> Suggestion | None:
        """Suggestions at a client's position; None when there is nothing to show.

        ``inline`` (ghost text) counts the request for the shown-suggestion telemetry, asks
        for alternatives when the request is explicit, and lets the engine answer with the
        suggestion's start (serving/early.py). The snapshot is taken here, on arrival.
        """
        session = self.session
        snapshot = session.buffers.snapshot(uri, disk=False)
        if snapshot is None:
            return None
        if inline:  # an open document's (its close forgets it): its changes are keys
            session.shown.asked(uri)
        query = CompletionQuery.at(
            snapshot,
            line,
            character,
            encoding,
            trigger="automatic" if automatic else "invoked",
            want_alternatives=inline and not automatic,
            answer_early=inline,
        )
        outcome = await self.scheduler.complete(query)
        if not outcome.text:
            return None
        pos = snapshot.clamp(outcome.line, outcome.column)
        ids = tuple(item_id(outcome.request_id, i) for i in range(len(outcome.items)))
        line_text, model = snapshot.line(pos.line), session.model_name()
        for name, text in zip(ids, outcome.items, strict=True):
            offered = OfferedItem(
                item=name,
                request_id=outcome.request_id,
                uri=uri,
                line=pos.line,
                column=pos.column,
                before=line_text[: pos.column],
                text=text,
                after=line_text[pos.column :],
                trigger=trigger_kind(query.trigger),
                model=model,
                language=snapshot.language_id,
            )
            session.shown.offer(offered)
        return Suggestion(outcome.items, ids, pos, snapshot.to_lsp(pos, encoding), snapshot)

    def accept(self, item: str) -> dict[str, Any]:
        """The user took a suggestion (its item id): counted, and its retention measured."""
        request_id = request_of(item)
        counted = bool(request_id) and self.session.accept(request_id)
        if item and self.session.shown.accepted(item):
            self._measure_later()  # how much of it is still there, RETAIN_AFTER_S later
        return {"accepted": counted, "request_id": request_id}

    def shown(self, item: str) -> None:
        """The editor showed a suggestion (its item id)."""
        self.session.shown.shown(item)

    def partially_accepted(self, item: str, length: int) -> None:
        """The user took ``length`` UTF-16 units of a suggestion."""
        if self.session.shown.partially_accepted(item, length):
            self._measure_later()

    def dismissed(self, item: str) -> None:
        """The user dismissed a suggestion."""
        self.session.shown.dismissed(item)

    def _measure_later(self) -> None:
        """Measure the retention of accepted text when the next measurement is due (a timer
        on the event loop, where the documents change: the spans and the text agree)."""
        delay = self.session.shown.next_due()
        if delay is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on the event loop: close() measures what is left
            return
        loop.call_later(delay + 0.01, self._measure_due)

    def _measure_due(self) -> None:
        if not self._closed and self.session.shown.measure_due():
            self._measure_later()  # the next accept waiting, if any

    # -- next edits ------------------------------------------------------------------

    async def propose_edits(
        self, uri: str, version: int | None, position: tuple[int, int] | None, encoding: str
    ) -> list[ProposedEdit]:
        """The next edits for ``uri`` at ``version`` (None: any), nearest the cursor first.

        The round trip: proposed on the event loop; with ``nextEdit`` ``model`` or
        ``both``, the model's rewrite on the model thread (a completion or a newer rewrite
        cancels it, ``Scheduler.rewrite``); the two merged back on the loop.
        """
        next_edits = self.next_edits
        doc = self.session.buffers.get(uri)
        cursor = doc.from_lsp(*position, encoding) if doc is not None and position else None
        answer = next_edits.propose(uri, version, cursor)
        job = answer.job
        if job is not None:
            outcome = await self.scheduler.rewrite(
                lambda cancel: next_edits.rewrite(job, cancel),
                wanted=lambda: next_edits.current(job),
            )
            answer = next_edits.merge(answer, outcome)
        return answer.edits

    def edit_shown(self, edit_id: str) -> None:
        """The editor showed a proposed next edit."""
        self.next_edits.shown(edit_id)

    def accept_edit(self, edit_id: str) -> dict[str, Any]:
        """The editor applied a proposed next edit."""
        return {"accepted": self.next_edits.accept(edit_id) is not None, "id": edit_id}

    def next_edit_stats(self) -> dict[str, Any]:
        """The next-edit counters (``lspAssist.nextEditStats``)."""
        return {"mode": self.next_edits.mode, **asdict(self.next_edits.counters)}

    # -- commands --------------------------------------------------------------------

    async def explain(self, uri: str, line: int, character: int, encoding: str) -> dict[str, Any]:
        """The prompt the engine would build at a client's position, layer by layer."""
        buffers = self.session.buffers
        # the model thread builds the prompt from the buffer as it is now, not as edited later
        snapshot = buffers.snapshot(uri, disk=False)
        column = snapshot.from_lsp(line, character, encoding).column if snapshot else character
        if snapshot is None:  # not open: the file on disk, read off the event loop
            snapshot = await self.scheduler.run(buffers.snapshot, uri)
        if snapshot is None:
            raise UsageError(f"cannot read {uri}: neither open nor a readable file")
        prompt = await self.scheduler.run(self.engine.explain, snapshot, line, column)
        result: dict[str, Any] = prompt.to_json()
        result["text"] = explain_with_budget(prompt)
        return result

    def document_state(self, uri: str) -> dict[str, Any]:
        """The buffer as the server holds it (editors and tests compare it with theirs)."""
        doc = self.session.buffers.get(uri)
        if doc is None:
            raise UsageError(f"not open: {uri}")
        return {"uri": doc.uri, "version": doc.version, "text": doc.text}

    def status(self) -> dict[str, Any]:
        """Model, index and latency state; ``ready`` as :attr:`ready` says."""
        return {"initialized": True, "ready": self._ready, **status_json(self.engine)}

    def memory(self, top: int = 0, *, in_flight: Mapping[str, int] | None = None) -> dict[str, Any]:
        """What grows with use against its bounds, the work in flight (the caller's too:
        ``in_flight``) and the process's memory, with ``top`` allocators when tracing."""
        if top < 0:
            raise UsageError(f"top must be 0 or more, not {top}")
        pending = {"service_tasks": len(self._tasks), **(in_flight or {})}
        return memory_json(self.engine, self.scheduler, self.next_edits, top=top, in_flight=pending)
