"""lsp-assist's own client as the acceptance replay drives it: a :class:`Suggester` over JSON-RPC.

It keeps the shipped Neovim plugin's timing (editors/nvim/lua/lsp-assist: init.lua's
autocmds, request.lua, decide.lua): at every key the ``didChange`` goes out at once (the
range that changed, as an editor sends it), and the automatic
``textDocument/inlineCompletion`` only after ``debounce_ms`` (the plugin's default 75 ms)
without another key: a new key restarts the timer. When the timer fires, the inline
request still out is cancelled (``$/cancelRequest``) and the new one sent; an answer for
an older buffer version is dropped (the plugin finds it stale), so it never shows. After
a word accepted with the rest of the suggestion still on screen the plugin asks nothing
(its own change, and the cursor is where the suggestion shows); a typed key, a Tab and a
word that takes the rest ask after the debounce. ``debounce_ms=0`` is the earlier client:
cancel and ask at every key, no wait. It opts in to ``lspAssist/suggestionReady`` and
asks again (automatic) when a notice comes for a suggestion still on screen at the
cursor and nothing is asked (request.lua's ``ready_ignored``). ``rest`` reports the
resting cursor (``lspAssist/didMoveCursor``) and only waits: a user does not wait for
the prefill. pygls 2.1's request future sends no ``$/cancelRequest`` when cancelled
(checked in ``JsonRPCProtocol.send_request``), so the notice is sent here, with the id
the request went out with. The budget the server was using (``lspAssist.status``) is
read once the model is loaded and again before the server stops."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any, Literal

from lsprotocol import types

from lsp_assist.evaluation.client import (
    close_document,
    command,
    open_document,
    range_edit,
    start_server,
    stop_server,
    wait_loaded,
)
from lsp_assist.evaluation.suggester import Answer, AnswerCallback, KeyKind

READY_NOTIFICATION = "lspAssist/suggestionReady"
READY_CAPABILITY = "lspAssistSuggestionReady"
"""As lsp_assist.lsp.server (not imported: the replay does not load the server)."""
DEBOUNCE_MS = 75.0
"""The Neovim plugin's ``debounce_ms`` (editors/nvim/lua/lsp-assist/init.lua)."""

KeyPlan = Literal["now", "debounce", "none"]


def key_plan(kind: KeyKind, ghost_left: bool, debounce_ms: float) -> KeyPlan:
    """Return when the client asks after a key: ``now`` (no debounce: the earlier client,
    which asked at every key), ``debounce`` (after ``debounce_ms`` without another key) or
    ``none``.

    With a debounce, as the plugin: a word accepted with the rest still on screen asks
    nothing (the plugin's own change, ``keys.own_tick``, schedules nothing, and
    ``CursorMovedI`` finds the suggestion at the cursor). Anything else (a typed key,
    typed through or not; a Tab; a word that took the rest) asks after the debounce
    (``TextChangedI`` or ``CursorMovedI``: ``M.schedule``).
    """
    if debounce_ms <= 0:
        return "now"
    return "none" if kind == "word" and ghost_left else "debounce"


def offset_position(text: str, offset: int) -> tuple[int, int]:
    """Return the (line, character) of ``offset`` in ``text`` (characters, not UTF-16)."""
    line = text.count("\n", 0, offset)
    return line, offset - (text.rfind("\n", 0, offset) + 1)


def diff_edit(old: str, new: str) -> tuple[tuple[int, int], tuple[int, int], str]:
    """Return the one range edit that turns ``old`` into ``new``: start, end (in ``old``), text."""
    limit = min(len(old), len(new))
    a = 0
    while a < limit and old[a] == new[a]:
        a += 1
    b = 0
    while b < limit - a and old[len(old) - 1 - b] == new[len(new) - 1 - b]:
        b += 1
    return offset_position(old, a), offset_position(old, len(old) - b), new[a : len(new) - b]


def answer_from(
    result: Any, version: int, line: int, column: int, line_text: str, arrived: float
) -> Answer | None:
    """Return the suggestion an inline completion result shows at (line, column), or None.

    The first item counts (what an editor shows). Its ``range``, when given, must be on
    the cursor's line and start at or before the cursor with the text typed since
    repeated at the start of ``insertText`` (else an editor would not show it as ghost
    text here); the end of the range right of the cursor is what it replaces.
    """
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    if not items:
        return None
    item = items[0]
    raw = item.insert_text
    text = raw.value if isinstance(raw, types.StringValue) else str(raw)
    replaces = 0
    span = item.range
    if span is not None:
        if span.start.line != line or span.end.line != line or span.start.character > column:
            return None
        typed = line_text[span.start.character : column]
        if not text.startswith(typed):
            return None
        text = text[len(typed) :]
        replaces = max(0, span.end.character - column)
    if not text.strip():
        return None
    accept = item.command
    request_id = str(accept.arguments[0]) if accept is not None and accept.arguments else ""
    return Answer(
        version=version, text=text, arrived=arrived, replaces=replaces, request_id=request_id
    )


class ServerSuggester:
    """``lsp-assist serve`` over stdio with the row's settings, driven as an editor drives it."""

    def __init__(
        self,
        label: str,
        options: dict[str, Any],
        env: dict[str, str] | None = None,
        *,
        debounce_ms: float = DEBOUNCE_MS,
    ):
        self.label = label
        self.options = options
        self.env = env
        self.debounce_ms = debounce_ms
        """Quiet time after a key before the inline request (0: at every key, no wait)."""
        self.client: Any = None
        self.messages: list[str] = []
        self.stats = {
            "requests": 0,
            "cancelled": 0,
            "answered": 0,
            "empty": 0,
            "failed": 0,
            "ready_notices": 0,
            "asked_again": 0,
            "debounced": 0,
            "not_asked": 0,
        }
        """Inline requests sent, cancelled (``$/cancelRequest``), answered in time with a
        suggestion, answered with none, failed; suggestionReady notices and re-asks; keys
        whose timer a newer key restarted; keys after which the plugin asks nothing."""
        self.budget: dict[str, Any] = {}
        """The server's budget (``lspAssist.status``): ``start`` once loaded, ``end``
        before it stops."""
        self._uri = ""
        self._text = ""
        self._version = 0
        self._cursor = (0, 0)
        self._on_answer: AnswerCallback | None = None
        self._pending = ""
        """The id of the inline request still out ('' none)."""
        self._stale: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._serial = 0
        self._pending_version = 0
        """The buffer version the request still out was sent for."""
        self._timer: asyncio.TimerHandle | None = None
        self._plan: KeyPlan = "now" if debounce_ms <= 0 else "debounce"
        """What the next key asks (``key_kind``); a caller that never says: a typed key."""
        self._ghost_left = False
        self._ghost_version = -1
        """The buffer version at which a suggestion is on screen at the cursor (an answer
        for it came, or a key left the earlier one on screen)."""

    async def start(self, workspace: Path) -> None:
        """Start the server on ``workspace``; return once the model and the index are ready."""
        self.client, _ = await start_server(
            f"replay-{self.label}",
            workspace,
            self.options,
            env=self.env,
            on_message=self.messages.append,
            experimental={READY_CAPABILITY: True},
            notifications={READY_NOTIFICATION: self._on_ready},
        )
        state = await wait_loaded(self.client)
        self.budget["start"] = state.get("budget", {})

    async def open(self, path: Path, text: str, version: int) -> None:
        """Send didOpen for the buffer with the region removed."""
        from lsp_assist.documents import language_for_path

        self._uri, self._text, self._version = path.as_uri(), text, version
        open_document(self.client, self._uri, text, language_for_path(path) or "", version)

    async def rest(self, path: Path, line: int, column: int, seconds: float) -> None:
        """Report the resting cursor (lspAssist/didMoveCursor) and wait ``seconds``."""
        self._cursor = (line, column)
        self.client.protocol.notify(
            "lspAssist/didMoveCursor",
            {
                "textDocument": {"uri": path.as_uri(), "version": self._version},
                "position": {"line": line, "character": column},
            },
        )
        await asyncio.sleep(seconds)

    def key_kind(self, kind: KeyKind, ghost_left: bool) -> None:
        """The next key is ``kind``; ``ghost_left``: a suggestion stays on screen after it."""
        self._plan = key_plan(kind, ghost_left, self.debounce_ms)
        self._ghost_left = ghost_left

    def key(
        self,
        path: Path,
        text: str,
        line: int,
        column: int,
        version: int,
        on_answer: AnswerCallback,
    ) -> None:
        """Send the change at once; ask after the debounce (or now, or not: ``key_plan``)."""
        plan = self._plan
        self._plan = "now" if self.debounce_ms <= 0 else "debounce"
        ghost_left, self._ghost_left = self._ghost_left, False
        if plan == "now":
            self._cancel()
        start, end, inserted = diff_edit(self._text, text)
        self._text, self._version, self._cursor = text, version, (line, column)
        self._on_answer = on_answer
        if ghost_left:
            self._ghost_version = version
        self.client.text_document_did_change(range_edit(self._uri, version, start, end, inserted))
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
            self.stats["debounced"] += 1
        if plan == "now":
            self._ask()
        elif plan == "debounce":
            loop = asyncio.get_running_loop()
            self._timer = loop.call_later(self.debounce_ms / 1000, self._fire)
        else:
            self.stats["not_asked"] += 1

    def _fire(self) -> None:
        """The debounce ran out: ask at the cursor unless a request for this text is out
        (decide.ask's 'skip'); the request still out for older text is cancelled."""
        self._timer = None
        if self._on_answer is None:
            return
        if self._pending and self._pending_version == self._version:
            return
        self._cancel()
        self._ask()

    async def close_file(self, path: Path, text: str) -> None:
        """Cancel what is out and close the buffer (the file is restored on disk first)."""
        self._stop_timer()
        self._cancel()
        self._on_answer = None
        close_document(self.client, path.as_uri())
        await asyncio.sleep(0)

    async def stop(self) -> None:
        """Read the budget in force, shut the server down."""
        self._stop_timer()
        self._cancel()
        for task in list(self._tasks):
            task.cancel()
        if self.client is not None:
            with contextlib.suppress(Exception):
                state = await asyncio.wait_for(command(self.client, "lspAssist.status"), 30)
                self.budget["end"] = state.get("budget", {})
            with contextlib.suppress(Exception):
                await stop_server(self.client)

    # -- requests ---------------------------------------------------------------------

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _cancel(self) -> None:
        if self._pending:
            self.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=self._pending))
            self._stale.add(self._pending)
            self.stats["cancelled"] += 1
            self._pending = ""

    def _ask(self) -> None:
        self._serial += 1
        msg_id = f"replay-{self._serial}"
        line, column = self._cursor
        params = types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=self._uri),
            position=types.Position(line=line, character=column),
            context=types.InlineCompletionContext(
                trigger_kind=types.InlineCompletionTriggerKind.Automatic
            ),
        )
        future = self.client.protocol.send_request_async(
            types.TEXT_DOCUMENT_INLINE_COMPLETION, params, msg_id=msg_id
        )
        future.add_done_callback(_retrieve)
        self._pending, self._pending_version = msg_id, self._version
        self.stats["requests"] += 1
        task = asyncio.ensure_future(self._receive(future, msg_id, self._version, line, column))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _receive(
        self, future: Any, msg_id: str, version: int, line: int, column: int
    ) -> None:
        try:
            # shielded: stopping cancels this task, never pygls's future (an answer to a
            # cancelled future makes pygls's reader raise InvalidStateError)
            result = await asyncio.shield(future)
        except Exception:  # cancelled by us or failed: nothing shows
            result = None
            if msg_id not in self._stale:
                self.stats["failed"] += 1
        arrived = time.perf_counter()
        if self._pending == msg_id:
            self._pending = ""
        if msg_id in self._stale:
            self._stale.discard(msg_id)
            return
        callback = self._on_answer
        if result is None or callback is None or version != self._version:
            return
        line_text = _line_of(self._text, line)
        answer = answer_from(result, version, line, column, line_text, arrived)
        if answer is None:
            self.stats["empty"] += 1
        else:
            self.stats["answered"] += 1
            self._ghost_version = version
            callback(answer)

    def _on_ready(self, *args: Any) -> None:
        """lspAssist/suggestionReady: ask again at the cursor if the notice is for where it
        is, a suggestion shows there and nothing is asked."""
        params = args[-1]
        self.stats["ready_notices"] += 1
        try:
            uri = params.textDocument.uri
            version = params.textDocument.version
            at = (params.position.line, params.position.character)
        except AttributeError:
            return
        if uri != self._uri or self._pending or self._on_answer is None:
            return
        if self.debounce_ms > 0 and self._ghost_version != self._version:
            return  # the plugin's 'no suggestion shown' (the earlier client did not check)
        if (version is not None and version > self._version) or self._cursor < at:
            return
        self.stats["asked_again"] += 1
        self._ask()


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Mark a request's failure as seen (its waiter may be gone once the row stops)."""
    if not future.cancelled():
        future.exception()


def _line_of(text: str, line: int) -> str:
    start = 0
    for _ in range(line):
        start = text.find("\n", start) + 1
        if start == 0:
            return ""
    end = text.find("\n", start)
    return text[start:] if end < 0 else text[start:end]
