"""The LSP base protocol on a byte stream: framing that survives bad input, stdio and TCP.

pygls 2.1's reader (``pygls/io_.py``) loses the stream for good on one bad frame: it
matches only ``Content-Length: N\\r\\n`` exactly (no lower-case name, no LF-only
line), reads the declared length in one call (``Content-Length: 99999999999999``
is a MemoryError that ends the process), and after a length that does not match the
body every later header sits behind the rest of a body and is never seen again.

``FrameReader`` replaces it. It is lenient where that is safe (header names in any
case, LF-only lines, other headers in any order, a missing blank line before a body
that starts with ``{``), caps a message at ``MAX_MESSAGE_BYTES``, and resynchronises on
the next ``Content-Length`` header after anything it cannot frame. Resynchronising is
sound because that header can never occur inside valid JSON: JSON has no bare words
besides true/false/null, and a string cannot hold a raw line break. So a body in which
the header appears was cut short (its declared length was too large), and bytes
before a header that are not header fields are the rest of a body whose declared
length was too small. Each case is logged; ``AssistProtocol`` answers what it can.

``serve_stdio`` and ``serve_tcp`` run sessions: stdin/stdout for one editor, or a TCP
listener whose every connection gets a fresh server (its own engine, freed when the
connection ends) until the process is stopped. SIGTERM and SIGHUP end them as
``shutdown`` and ``exit`` would (``STOP_SIGNALS``): each session closes, the code is 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from lsp_assist.serving import run_blocking

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
"""The largest body accepted (64 MiB): a 30 MB file opened in the editor still fits."""

MAX_HEADER_BYTES = 8192
"""A header block (or a run of unframed bytes) longer than this is treated as garbage."""

_READ_CHUNK = 65536
_HEAD_KEPT = 4096
"""Bytes kept from the start of a rejected body, to read its request id."""

# The optional whitespace is bounded so that a match is never longer than _OVERLAP:
# scanning a growing body again from _OVERLAP bytes back then finds every match.
_CONTENT_LENGTH = re.compile(
    rb"content-length[ \t]{0,8}:[ \t]{0,8}(\d{1,40})[ \t]{0,8}\r?\n", re.IGNORECASE
)
_OVERLAP = 128
_FIELD = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}[ \t]*:[^\r\n]{0,4096}\r?\n")
_FIELD_START = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]{0,256}(?:[ \t]*:[^\r\n]*)?\r?")


class FrameSink(Protocol):
    """What a session hands framed input to (``AssistProtocol`` implements it)."""

    def receive_body(self, body: bytes) -> None:
        """Parse and handle one message body."""

    def reject_frame(self, head: bytes, reason: str) -> None:
        """Answer a frame that was not read (too large), given its first bytes."""


@dataclass(frozen=True)
class Body:
    """A framed message body, with a note when its declared length did not match."""

    data: bytes
    problem: str = ""


@dataclass(frozen=True)
class Rejected:
    """A frame skipped without being read: the first bytes of its body and why."""

    head: bytes
    reason: str


class FrameReader:
    """Incremental base-protocol framing: ``feed`` bytes, get bodies and rejections back."""

    def __init__(self, max_message_bytes: int = MAX_MESSAGE_BYTES) -> None:
        self.max_message_bytes = max_message_bytes
        self._buf = bytearray()
        self._need: int | None = None  # declared length of the body being read
        self._scanned = 0  # bytes of the body already searched for a header
        self._skip_reason = ""  # set while skipping an oversized body
        self._skip_head = bytearray()
        self._skipped = 0
        self.garbage_bytes = 0
        """Bytes dropped because no frame could be read from them (for tests and logs)."""

    def feed(self, data: bytes) -> list[Body | Rejected]:
        """Add bytes read from the stream; return the frames they complete."""
        self._buf += data
        out: list[Body | Rejected] = []
        while True:
            if self._skip_reason:
                if not self._skip():
                    break
                out.append(Rejected(bytes(self._skip_head), self._skip_reason))
                self._skip_reason = ""
            elif self._need is None:
                if not self._headers():
                    break
                if self._need == 0:
                    self._need = None
                    out.append(Body(b"", "Content-Length 0"))
            else:
                body = self._body()
                if body is None:
                    break
                out.append(body)
        return out

    def pending(self) -> str:
        """Describe an incomplete frame left at the end of the stream ('' if none)."""
        if self._skip_reason:
            return f"the stream ended while skipping a rejected frame ({self._skip_reason})"
        if self._need is not None:
            return f"the stream ended {len(self._buf)} bytes into a {self._need}-byte body"
        if self._buf.strip():
            return f"the stream ended with {len(self._buf)} unframed bytes"
        return ""

    def _drop_garbage(self, count: int, why: str) -> None:
        if count <= 0:
            return
        dropped = bytes(self._buf[:count])
        del self._buf[:count]
        if not dropped.strip():
            return  # blank lines between frames: harmless
        self.garbage_bytes += count
        logger.error("skipped %d bytes %s", count, why)
        logger.debug("skipped bytes start %r", dropped[:80])  # may hold code: DEBUG only

    def _headers(self) -> bool:
        """Read one header block; set ``_need`` and return True, or False for more input."""
        match = _CONTENT_LENGTH.search(self._buf)
        if match is None:
            if len(self._buf) > MAX_HEADER_BYTES:
                self._drop_garbage(len(self._buf) - _OVERLAP, "with no Content-Length header")
            return False
        start = match.start()
        # Other header fields may come first (Content-Type); anything else is garbage.
        pos = 0
        while pos < start and (field := _FIELD.match(self._buf, pos, start)) is not None:
            pos = field.end()
        if pos < start:
            self._drop_garbage(start, "before a Content-Length header (a frame's length was wrong)")
            return True  # search again: offsets moved
        pos = match.end()
        while True:
            if pos >= len(self._buf):
                return self._header_block_too_long(start)
            if self._buf.startswith(b"\r\n", pos):
                pos += 2
                break
            if self._buf.startswith(b"\n", pos):
                pos += 1
                break
            field = _FIELD.match(self._buf, pos)
            if field is not None:
                pos = field.end()
                continue
            if _FIELD_START.fullmatch(self._buf, pos):
                return self._header_block_too_long(start)  # a field still arriving
            logger.warning("no blank line after the headers: the body starts right after them")
            break
        length = int(match.group(1))
        del self._buf[:pos]
        if length > self.max_message_bytes:
            logger.error(
                "Content-Length %d exceeds the %d-byte cap: skipping to the next header",
                length,
                self.max_message_bytes,
            )
            self._skip_reason = (
                f"Content-Length {length} exceeds the {self.max_message_bytes}-byte cap"
            )
            self._skip_head.clear()
            self._skipped = 0
            return True
        self._need = length
        self._scanned = 0
        return True

    def _header_block_too_long(self, start: int) -> bool:
        if len(self._buf) - start > MAX_HEADER_BYTES:
            self._drop_garbage(start + 1, "in a header block that never ended")
            return True
        return False

    def _body(self) -> Body | None:
        """Return the body once complete (or cut short by a new header), else None."""
        need = self._need
        assert need is not None
        match = _CONTENT_LENGTH.search(
            self._buf, max(0, self._scanned - _OVERLAP), min(len(self._buf), need + _OVERLAP)
        )
        if match is not None and match.start() < need:
            cut = match.start()
            data = bytes(self._buf[:cut])
            del self._buf[:cut]
            self._need = None
            return Body(data, f"Content-Length {need} but a new header began after {cut} bytes")
        if len(self._buf) < need:
            self._scanned = len(self._buf)
            return None
        data = bytes(self._buf[:need])
        del self._buf[:need]
        self._need = None
        return Body(data)

    def _skip(self) -> bool:
        """Discard an oversized body up to the next header; True once one is found."""
        match = _CONTENT_LENGTH.search(self._buf)
        end = match.start() if match is not None else max(0, len(self._buf) - _OVERLAP)
        room = _HEAD_KEPT - len(self._skip_head)
        if room > 0:
            self._skip_head += self._buf[: min(end, room)]
        self._skipped += end
        del self._buf[:end]
        if match is None:
            return False
        logger.error("skipped %d bytes of a rejected frame", self._skipped)
        return True


_PEEK_BYTES = 65536
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)


def peek_request_id(data: bytes) -> int | str | None:
    """Return the top-level ``id`` of a request in a possibly broken JSON text, else None.

    Scans the start of ``data`` leniently (it may be cut short or malformed later on),
    only at the top level of an object: a nested ``"id"`` (``$/cancelRequest``'s
    params) is not the message's. None for a response (a top-level ``result`` or
    ``error`` key), or when no integer or string id is found before the text breaks.
    """
    text = data[:_PEEK_BYTES].decode("utf-8", "replace")
    pos = _skip_space(text, 0)
    if not text.startswith("{", pos):
        return None
    found: int | str | None = None
    depth = 0
    expect_key = False
    while pos < len(text):
        char = text[pos]
        if char == '"':
            string = _STRING.match(text, pos)
            if string is None:
                return found
            value, end = string.group(), string.end()
            after = _skip_space(text, end)
            if depth == 1 and expect_key and text.startswith(":", after):
                if value in ('"result"', '"error"'):
                    return None
                if value == '"id"':
                    found = _scalar(text, _skip_space(text, after + 1))
                expect_key = False
            pos = end
            continue
        if char in "{[":
            depth += 1
            expect_key = char == "{" and depth == 1
        elif char in "}]":
            depth -= 1
            if depth <= 0:
                return found
        elif char == "," and depth == 1:
            expect_key = True
        pos += 1
    return found


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _scalar(text: str, pos: int) -> int | str | None:
    string = _STRING.match(text, pos)
    if string is not None:
        try:
            value = json.loads(string.group())
        except ValueError:
            return None
        return value if isinstance(value, str) else None
    number = _NUMBER.match(text, pos)
    if number is None or not number.group().lstrip("-").isdigit():
        return None
    return int(number.group())


# -- sessions -----------------------------------------------------------------------


class Session(Protocol):
    """The server side of one connection (``LspAssistServer`` implements it)."""

    @property
    def protocol(self) -> Any:
        """The JSON-RPC protocol: a FrameSink with ``set_writer``, ``on_exit``, ``refusal``."""

    def close_session(self) -> None:
        """Release everything the session holds (blocking; run off the event loop)."""


STOP_SIGNALS = tuple(
    sig for sig in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if sig
)
"""Signals that end the sessions as ``shutdown`` and ``exit`` do (an editor that quits
may send SIGTERM instead; a closed terminal sends SIGHUP): the process then exits 0."""


def stop_on_signals(stop: asyncio.Event) -> None:
    """Set ``stop`` on SIGTERM or SIGHUP (on the running loop; not on Windows)."""
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:

        def on_signal(sig: int = sig) -> None:
            logger.info("%s: closing the session", signal.Signals(sig).name)
            stop.set()

        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, on_signal)


async def _until(chunks: AsyncIterator[bytes], stop: asyncio.Event) -> AsyncIterator[bytes]:
    """Yield from ``chunks`` until they end or ``stop`` is set (a read waiting is cancelled)."""
    stopped = asyncio.ensure_future(stop.wait())
    try:
        while not stop.is_set():
            chunk = asyncio.ensure_future(anext(chunks))
            await asyncio.wait({chunk, stopped}, return_when=asyncio.FIRST_COMPLETED)
            if not chunk.done():
                chunk.cancel()
                return
            try:
                yield chunk.result()
            except StopAsyncIteration:
                return
    finally:
        stopped.cancel()


async def run_session(
    session: Session, chunks: AsyncIterator[bytes], stop: asyncio.Event | None = None
) -> int:
    """Feed a stream to the session's protocol until exit or end of input; return the exit code.

    The code is the one ``exit`` chose (0 after ``shutdown``, else 1); at the end of the
    input it is 0 if ``shutdown`` came first, else 1 (the client went away). ``stop``
    set (a signal) ends the session like ``shutdown`` and ``exit``: code 0.
    """
    protocol = session.protocol
    code: list[int] = []
    protocol.on_exit = code.append
    reader = FrameReader()
    if stop is not None:
        chunks = _until(chunks, stop)
    try:
        async for chunk in chunks:
            for item in reader.feed(chunk):
                if isinstance(item, Rejected):
                    protocol.reject_frame(item.head, item.reason)
                else:
                    if item.problem:
                        logger.error("bad frame: %s", item.problem)
                    protocol.receive_body(item.data)
                if code:
                    return code[0]
        if stop is not None and stop.is_set():
            return 0
        if left := reader.pending():
            logger.error("%s", left)
        return 0 if protocol._shutdown else 1
    except (BrokenPipeError, ConnectionError) as exc:
        logger.error("connection to the client lost: %s", exc)
        return 1
    finally:
        protocol.on_exit = None
        await run_blocking(session.close_session, name="lsp-assist-close")


def _release_memory(active_sessions: int) -> None:
    """Let the collector free a finished session (the index froze its objects)."""
    gc.unfreeze()
    gc.collect()
    if active_sessions:
        gc.freeze()


async def _stdin_chunks() -> AsyncIterator[bytes]:
    """Yield stdin as it arrives, read on a daemon thread (a blocked read never holds exit)."""
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=16)
    fd = sys.stdin.buffer.fileno()

    def pump() -> None:
        while True:
            try:
                data = os.read(fd, _READ_CHUNK)
            except OSError as exc:
                logger.error("reading stdin: %s", exc)
                data = b""
            try:
                asyncio.run_coroutine_threadsafe(queue.put(data), loop).result()
            except RuntimeError:  # the loop is gone
                return
            if not data:
                return

    threading.Thread(target=pump, name="lsp-stdin", daemon=True).start()
    while data := await queue.get():
        yield data


class _StdoutWriter:
    """Write frames to stdout, flushed (pygls calls ``write`` and, at exit, ``close``)."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer

    def write(self, data: bytes) -> None:
        """Write and flush one frame."""
        self._out.write(data)
        self._out.flush()

    def close(self) -> None:
        """Flush; stdout stays open for the interpreter's own shutdown."""
        self._out.flush()


def serve_stdio(session: Session) -> int:
    """Serve one editor over stdin/stdout; return the process exit code."""
    session.protocol.set_writer(_StdoutWriter())

    async def main() -> int:
        stop = asyncio.Event()
        stop_on_signals(stop)
        return await run_session(session, _stdin_chunks(), stop)

    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        return 1


async def _socket_chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while True:
        try:
            data = await reader.read(_READ_CHUNK)
        except ConnectionError:
            return
        if not data:
            return
        yield data


class _SocketWriter:
    """Write frames to a TCP connection."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        """Queue one frame on the connection."""
        if not self._writer.is_closing():
            self._writer.write(data)

    def close(self) -> None:
        """Close the connection (``exit`` ends this session only)."""
        self._writer.close()


MAX_TCP_SESSIONS = 4
"""Sessions served at once over TCP; each holds its own engine and model until it ends."""


def serve_tcp(
    make_session: Callable[[], Session],
    host: str,
    port: int,
    on_listening: Callable[[list[Any]], None] | None = None,
    max_sessions: int = MAX_TCP_SESSIONS,
) -> int:
    """Listen on host:port; each connection is one session with a fresh server, freed when it ends.

    A connection beyond ``max_sessions`` at once gets an error for its ``initialize``
    (and builds no engine) instead of another model in memory.
    """
    active: set[asyncio.Task[Any]] = set()
    stop = asyncio.Event()

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        task = asyncio.current_task()
        assert task is not None
        busy = len(active) >= max_sessions
        if not busy:  # a refused connection builds no engine: it does not take a slot
            active.add(task)
        logger.info("session from %s", peer)
        try:
            session = make_session()
            if busy:
                logger.error("refusing a session from %s: %d already active", peer, max_sessions)
                session.protocol.refusal = (
                    f"lsp-assist already serves {max_sessions} sessions on this port "
                    "(the most it serves at once); close one or start another server"
                )
            session.protocol.set_writer(_SocketWriter(writer))
            code = await run_session(session, _socket_chunks(reader), stop)
            del session
            logger.info("session from %s ended (exit code %d)", peer, code)
        finally:
            active.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            if not busy:
                _release_memory(len(active))

    async def main() -> None:
        stop_on_signals(stop)
        server = await asyncio.start_server(connection, host, port)
        addresses = [sock.getsockname() for sock in server.sockets]
        if on_listening is not None:
            on_listening(addresses)
        async with server:
            await stop.wait()
            server.close()  # no new connections; each session closes as on exit
            await asyncio.gather(*active, return_exceptions=True)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        logger.error("cannot listen on %s port %d: %s", host, port, exc)
        return 1
    return 0
