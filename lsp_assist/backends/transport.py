"""The HTTP transport of the remote backend: every exchange cancellable and bounded in time.

httpx's timeouts are per operation: a read that gets one byte within the read timeout
succeeds, so a server that drips a byte a second (or streams junk) holds a request for
ever, and a server that sends nothing holds it for the read timeout times the attempts.
And a request thread blocked in a socket read cannot poll a cancel flag. This module
closes both gaps under httpx, in httpcore's network layer:

- :class:`Exchange` is one request's guard: a cancel token and an absolute deadline
  (``time.monotonic()``; its owner may move it, e.g. from the prompt cap to the
  generation cap once text arrives).
- :class:`CancellableNetwork` wraps httpcore's network backend. ``guard(exchange)``
  makes the exchange current for the calling thread; requests are synchronous, so the
  streams that read and write for it (a fresh connection or a kept-alive one alike)
  run in that thread. Before each connect, read, write or TLS handshake the stream
  binds itself to the current exchange and gets its timeout cut to what is left
  before the deadline (an httpcore timeout when nothing is left), so no sequence of
  slow successful reads outlives the deadline.
- A cancel runs :meth:`Exchange.fire` in the cancelling thread, which shuts the bound
  socket down: the blocked read returns at once and the server sees the connection
  close. Once :meth:`Exchange.disarm` returned, nothing touches the socket again (the
  connection may go back to the pool and serve another request).

No thread is started. A TCP connect cannot be interrupted from another thread; it is
bounded by the connect timeout cut to the deadline, and a cancel during it takes
effect at the connection's first write.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

import httpcore
import httpx

from lsp_assist.backends.base import CancelToken

logger = logging.getLogger(__name__)


class Exchange:
    """One HTTP exchange in flight: its deadline and the socket a cancel shuts down.

    ``bind`` and ``time_left`` are called from the request thread, ``fire`` from the
    cancelling thread, ``disarm`` when the request no longer needs the guard. They
    share one lock, so once ``disarm`` returned no socket is shut down.
    """

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline
        """``time.monotonic()`` after which I/O fails with an httpcore timeout; None = none."""
        self._lock = threading.Lock()
        self._stream: httpcore.NetworkStream | None = None
        self._fired = False
        self._armed = True

    @property
    def fired(self) -> bool:
        """True when the cancel fired while armed."""
        return self._fired

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def time_left(self, timeout: float | None, error: type[Exception]) -> float | None:
        """Return ``timeout`` cut to the time left; raise ``error`` when none is left."""
        if self.deadline is None:
            return timeout
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise error("the request's time cap was reached")
        return left if timeout is None else min(timeout, left)

    def bind(self, stream: httpcore.NetworkStream) -> None:
        """Remember the stream this exchange reads and writes (called on each I/O)."""
        with self._lock:
            if not self._armed or stream is self._stream:
                return
            self._stream = stream
            if self._fired:  # cancelled while connecting: end it at the first write
                _shutdown(stream)

    def fire(self) -> None:
        """Shut the bound socket down (from the cancelling thread)."""
        with self._lock:
            if not self._armed:
                return
            self._fired = True
            if self._stream is not None:
                _shutdown(self._stream)

    def disarm(self) -> None:
        """Forget the socket: from now on a cancel touches nothing."""
        with self._lock:
            self._armed = False
            self._stream = None


def _shutdown(stream: httpcore.NetworkStream) -> None:
    """Shut the TCP connection under ``stream`` down: a blocked read returns, FIN is sent.

    ``socket.socket.shutdown`` is called unbound so that a TLS socket is shut down at the
    TCP level too, without ``SSLSocket.shutdown`` dropping the TLS state another thread
    is reading with. The stream itself is closed by its owner (httpcore) afterwards.
    """
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        with suppress(OSError):  # already closed or not connected: nothing to unblock
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _GuardedStream(httpcore.NetworkStream):
    """An httpcore stream bound, on each I/O, to the calling thread's exchange."""

    def __init__(self, inner: httpcore.NetworkStream, network: CancellableNetwork) -> None:
        self._inner = inner
        self._network = network

    def _guard(self, timeout: float | None, error: type[Exception]) -> float | None:
        exchange = self._network.current()
        if exchange is None:
            return timeout
        exchange.bind(self._inner)
        return exchange.time_left(timeout, error)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, self._guard(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._guard(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        timeout = self._guard(timeout, httpcore.ConnectTimeout)
        return _GuardedStream(
            self._inner.start_tls(ssl_context, server_hostname, timeout), self._network
        )

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class CancellableNetwork(httpcore.NetworkBackend):
    """httpcore's network backend, wrapped so each exchange's deadline and cancel hold."""

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner
        self._local = threading.local()

    def current(self) -> Exchange | None:
        """The exchange of this thread's request in flight, if any."""
        exchange: Exchange | None = getattr(self._local, "exchange", None)
        return exchange

    @contextmanager
    def guard(self, cancel: CancelToken, deadline: float | None) -> Iterator[Exchange]:
        """Bound this thread's I/O by ``deadline`` and let ``cancel`` end it, until exit."""
        exchange = Exchange(deadline)
        previous = self.current()
        self._local.exchange = exchange
        remove = cancel.add_callback(exchange.fire)
        try:
            yield exchange
        finally:
            remove()
            exchange.disarm()
            self._local.exchange = previous

    def _connect_timeout(self, timeout: float | None) -> float | None:
        exchange = self.current()
        return timeout if exchange is None else exchange.time_left(timeout, httpcore.ConnectTimeout)

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = self._connect_timeout(timeout)
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _GuardedStream(stream, self)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        timeout = self._connect_timeout(timeout)
        stream = self._inner.connect_unix_socket(path, timeout, socket_options)
        return _GuardedStream(stream, self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def cancellable_transport() -> tuple[httpx.HTTPTransport, CancellableNetwork | None]:
    """httpx's default transport with its pool's network backend wrapped.

    httpx does not expose the pool's ``network_backend``, so this reaches into
    ``HTTPTransport._pool`` (an ``httpcore.ConnectionPool``); should a future httpx
    change that, the network is None and the caller falls back to checking cancels and
    caps between chunks (a test pins the httpx version's layout).
    """
    transport = httpx.HTTPTransport()
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not isinstance(
        inner, httpcore.NetworkBackend
    ):
        logger.warning("httpx transport without a reachable network backend: late cancels")
        return transport, None
    network = CancellableNetwork(inner)
    pool._network_backend = network
    return transport, network
