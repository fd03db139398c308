"""A client for OpenAI-compatible ``/v1/completions`` servers, for teams sharing one model.

Works with llama.cpp's llama-server, llama-cpp-python's server, vLLM and Ollama:
streaming (server-sent events), connect and read timeouts, bounded retries with
exponential backoff (only before any text has arrived: a half-streamed answer is never
silently restarted), and a circuit breaker that refuses calls for a while after
repeated failures (:class:`~lsp_assist.errors.CircuitOpenError`). The API key is read
from the environment variable named by ``remoteApiKeyEnv``, sent as a bearer token, and
never logged or put in an error message.

Tokens. The rest of lsp-assist counts and assembles prompts in token ids, so the client
needs the server model's tokenizer. In order of preference:

1. ``local``: a vocabulary-only load of ``modelPath`` (the same GGUF the server runs);
   exact and fast, no network.
2. ``server``: the server's own tokenizer endpoints (``/extras/tokenize`` of
   llama-cpp-python, ``/tokenize`` of llama-server); exact, one round trip per call.
3. ``estimate``: no tokenizer at all. Text is cut into 4-character pieces and each
   piece is encoded reversibly into one integer ("pseudo token"), so counts follow the
   usual chars/4 estimate and ``detokenize`` gives the text back exactly.

The prompt goes to the server as token ids when they are real ids (llama-server and
vLLM accept a list of ints) and as text otherwise; a server that rejects ids (HTTP
400/422, e.g. llama-cpp-python's) is switched to text for the rest of the session.

Cancellation. A cancel is checked at every streamed chunk, but while the server is
still evaluating a long prompt no chunk arrives and the request thread sits in a socket
read. So the client's connection pool gets a thin network layer
(:class:`_CancellableNetwork`) that remembers which socket the current request of each
thread uses; a callback on the request's :class:`~lsp_assist.backends.base.CancelToken`
shuts that socket down from the cancelling thread. The blocked read returns at once,
``generate`` reports ``stop_reason == "cancelled"``, and the server sees the connection
closed; what it does then is up to the server (llama-cpp-python's drops queued requests
but finishes a prompt evaluation already under way). This needs no extra thread: a
worker thread would let ``generate`` return early, but the read it leaves behind would
still need the socket to be shut down to end, so the socket hook is needed either way.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

import httpcore
import httpx

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
)
from lsp_assist.backends.streaming import TextStream
from lsp_assist.config import ModelSettings
from lsp_assist.errors import CircuitOpenError, ModelLoadError, RemoteBackendError

logger = logging.getLogger(__name__)

TokenizerMode = Literal["auto", "local", "server", "estimate"]
_PSEUDO_CHARS = 4
_TRANSPORT_ERRORS = (httpx.TransportError, httpx.StreamError)


def pseudo_tokenize(text: str) -> list[int]:
    """Encode ``text`` as reversible pseudo tokens of up to 4 characters each."""
    out = []
    for i in range(0, len(text), _PSEUDO_CHARS):
        raw = text[i : i + _PSEUDO_CHARS].encode("utf-8", errors="surrogatepass") + b"\x01"
        out.append(int.from_bytes(raw, "little"))
    return out


def pseudo_detokenize(tokens: Sequence[int]) -> str:
    """Decode pseudo tokens made by :func:`pseudo_tokenize`."""
    parts = []
    for tok in tokens:
        if tok <= 0:
            continue
        raw = int(tok).to_bytes((int(tok).bit_length() + 7) // 8, "little")
        parts.append(raw[:-1].decode("utf-8", errors="replace"))
    return "".join(parts)


class CircuitBreaker:
    """Open after ``threshold`` consecutive failures; half-open after ``cooldown_s``."""

    def __init__(self, threshold: int = 3, cooldown_s: float = 10.0) -> None:
        self.threshold = threshold
        self.cooldown_s = cooldown_s
        self.failures = 0
        self.opened_at: float | None = None
        self.times_opened = 0
        self._lock = threading.Lock()

    @property
    def state(self) -> str:
        """'closed', 'open' or 'half-open'."""
        if self.opened_at is None:
            return "closed"
        if time.monotonic() - self.opened_at >= self.cooldown_s:
            return "half-open"
        return "open"

    def check(self) -> None:
        """Raise CircuitOpenError while open."""
        if self.state == "open":
            assert self.opened_at is not None
            left = self.cooldown_s - (time.monotonic() - self.opened_at)
            raise CircuitOpenError(
                f"remote backend unavailable after {self.failures} failures; "
                f"retrying in {max(left, 0):.1f} s"
            )

    def success(self) -> None:
        """Close the circuit."""
        with self._lock:
            self.failures = 0
            self.opened_at = None

    def failure(self) -> None:
        """Count a failure; open (or re-open) the circuit at the threshold."""
        with self._lock:
            self.failures += 1
            half_open = self.opened_at is not None
            if half_open or self.failures >= self.threshold:
                if self.opened_at is None or half_open:
                    self.times_opened += 1
                self.opened_at = time.monotonic()


class _Retryable(Exception):
    """A failure before any text arrived: the request may be retried."""


class _Interrupter:
    """Shuts down the socket of one request in flight when its cancel token fires.

    ``bind`` is called from the request thread with each stream it reads or writes;
    ``fire`` from the cancelling thread; ``disarm`` when the request no longer needs
    it. All three hold one lock, so once ``disarm`` returned no socket is shut down
    (the connection may go back to the pool and serve another request).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stream: httpcore.NetworkStream | None = None
        self._fired = False
        self._armed = True

    @property
    def fired(self) -> bool:
        """True when the cancel fired while armed."""
        return self._fired

    def bind(self, stream: httpcore.NetworkStream) -> None:
        with self._lock:
            if not self._armed or stream is self._stream:
                return
            self._stream = stream
            if self._fired:  # cancelled while connecting: end it at the first write
                _shutdown(stream)

    def fire(self) -> None:
        with self._lock:
            if not self._armed:
                return
            self._fired = True
            if self._stream is not None:
                _shutdown(self._stream)

    def disarm(self) -> None:
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


class _CancellableStream(httpcore.NetworkStream):
    """An httpcore stream that binds itself to the calling thread's request."""

    def __init__(self, inner: httpcore.NetworkStream, network: _CancellableNetwork) -> None:
        self._inner = inner
        self._network = network

    def _bind(self) -> None:
        interrupter = self._network.current()
        if interrupter is not None:
            interrupter.bind(self._inner)

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        self._bind()
        return self._inner.read(max_bytes, timeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._bind()
        self._inner.write(buffer, timeout)

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        tls = self._inner.start_tls(ssl_context, server_hostname, timeout)
        return _CancellableStream(tls, self._network)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _CancellableNetwork(httpcore.NetworkBackend):
    """httpcore's network backend, wrapped so a cancel can reach a request's socket.

    Requests are synchronous, so the thread doing one is the thread whose streams read
    and write for it (a fresh connection or a reused keep-alive one alike): ``watch``
    puts an :class:`_Interrupter` in a thread-local slot, each stream binds itself to it
    on I/O, and the cancel token's callback shuts the bound socket down.
    """

    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner
        self._local = threading.local()

    def current(self) -> _Interrupter | None:
        """The interrupter of this thread's request in flight, if any."""
        interrupter: _Interrupter | None = getattr(self._local, "interrupter", None)
        return interrupter

    @contextmanager
    def watch(self, cancel: CancelToken) -> Iterator[_Interrupter]:
        """Make this thread's requests interruptible by ``cancel`` until exit."""
        interrupter = _Interrupter()
        self._local.interrupter = interrupter
        remove = cancel.add_callback(interrupter.fire)
        try:
            yield interrupter
        finally:
            remove()
            interrupter.disarm()
            self._local.interrupter = None

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _CancellableStream(stream, self)

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(path, timeout, socket_options)
        return _CancellableStream(stream, self)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _cancellable_transport() -> tuple[httpx.HTTPTransport, _CancellableNetwork | None]:
    """httpx's default transport with its pool's network backend wrapped.

    httpx does not expose the pool's ``network_backend``, so this reaches into
    ``HTTPTransport._pool`` (an ``httpcore.ConnectionPool``); should a future httpx
    change that, cancels fall back to being noticed at the next streamed chunk.
    """
    transport = httpx.HTTPTransport()
    pool = getattr(transport, "_pool", None)
    inner = getattr(pool, "_network_backend", None)
    if not isinstance(pool, httpcore.ConnectionPool) or not isinstance(
        inner, httpcore.NetworkBackend
    ):
        logger.debug("httpx transport without a reachable network backend; late cancels")
        return transport, None
    network = _CancellableNetwork(inner)
    pool._network_backend = network
    return transport, network


class RemoteBackend(Backend):
    """OpenAI-compatible completions over HTTP with retries and a circuit breaker."""

    name = "remote"

    def __init__(
        self,
        settings: ModelSettings,
        *,
        model_path: Path | None = None,
        tokenizer: TokenizerMode = "auto",
        circuit_threshold: int = 3,
        circuit_cooldown_s: float = 10.0,
        backoff_s: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = settings
        self.base_url = settings.remote_url.rstrip("/")
        self.backoff_s = backoff_s
        self.breaker = CircuitBreaker(circuit_threshold, circuit_cooldown_s)
        headers = {"Accept": "text/event-stream"}
        key_env = settings.remote_api_key_env
        api_key = os.environ.get(key_env, "") if key_env else ""
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._has_key = bool(api_key)
        # a caller's transport (tests, proxies) is used as is: cancels are then noticed
        # at the next streamed chunk only
        self._network: _CancellableNetwork | None = None
        if transport is None:
            transport, self._network = _cancellable_transport()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(
                settings.remote_read_timeout_ms / 1000.0,
                connect=settings.remote_connect_timeout_ms / 1000.0,
            ),
            transport=transport,
        )
        self._vocab: Any = None
        path = model_path or (Path(settings.model_path) if settings.model_path else None)
        self.token_mode: str = "estimate" if tokenizer == "estimate" else "server"
        if tokenizer in ("auto", "local") and path is not None:
            from lsp_assist.backends.llama import LlamaEngine

            self._vocab = LlamaEngine(Path(path).expanduser(), vocab_only=True)
            self.token_mode = "local"
        elif tokenizer == "local":
            raise ModelLoadError("tokenizer 'local' needs modelPath (the server's GGUF)")
        self._server_tokenize_path: str | None = None
        self._server_prefix: list[int] = []
        self._send_ids = self.token_mode in ("local", "server")
        self._counters = {
            "requests": 0,
            "failures": 0,
            "retries": 0,
            "cancelled": 0,
            "timeouts": 0,
            "generated_chars": 0,
        }
        self._info = self._build_info()

    # --- model metadata and tokens ---------------------------------------------------------

    def _build_info(self) -> ModelInfo:
        if self._vocab is not None:
            from lsp_assist.backends.llama import read_model_info

            local = read_model_info(self._vocab)
            return ModelInfo(
                path=self.base_url,
                name=self.settings.remote_model or local.name,
                architecture=local.architecture,
                quantization=local.quantization,
                vocab_size=local.vocab_size,
                context_length_train=local.context_length_train,
                bos_id=local.bos_id,
                eos_id=local.eos_id,
                fim_prefix_id=local.fim_prefix_id,
                fim_suffix_id=local.fim_suffix_id,
                fim_middle_id=local.fim_middle_id,
                special_tokens=dict(local.special_tokens),
            )
        return ModelInfo(path=self.base_url, name=self.settings.remote_model)

    @property
    def info(self) -> ModelInfo:
        """What is known about the server's model (full metadata with a local vocabulary)."""
        return self._info

    def _server_tokenize(self, text: str, special: bool) -> list[int] | None:
        """Tokenize on the server; None when it has no tokenizer endpoint."""
        candidates = (
            [self._server_tokenize_path]
            if self._server_tokenize_path
            else ["/extras/tokenize", "/tokenize"]
        )
        for path in candidates:
            assert path is not None
            body: dict[str, Any] = (
                {"input": text} if path == "/extras/tokenize" else {"content": text}
            )
            if path == "/tokenize":
                body["add_special"] = False
                body["parse_special"] = special
            try:
                resp = self._client.post(path, json=body, headers={"Accept": "application/json"})
            except _TRANSPORT_ERRORS as exc:
                raise RemoteBackendError(f"tokenize failed: {type(exc).__name__}") from exc
            if resp.status_code in (404, 405):
                continue
            if resp.status_code >= 400:
                raise RemoteBackendError(f"tokenize failed: HTTP {resp.status_code}")
            tokens = [int(t) for t in resp.json().get("tokens", [])]
            if self._server_tokenize_path is None:
                self._server_tokenize_path = path
                if text:  # learn what the server prepends (BOS) from an empty string
                    self._server_prefix = self._server_tokenize("", special) or []
            prefix = self._server_prefix
            if prefix and tokens[: len(prefix)] == prefix:
                tokens = tokens[len(prefix) :]
            return tokens
        return None

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids without BOS (pseudo tokens in estimate mode; see module doc)."""
        if self.token_mode == "local":
            return list(self._vocab.tokenize(text, special=special))
        if self.token_mode == "server":
            try:
                tokens = self._server_tokenize(text, special)
            except RemoteBackendError as exc:
                logger.debug("server tokenizer unavailable (%s); estimating", exc)
                return pseudo_tokenize(text)
            if tokens is not None:
                return tokens
            logger.info("the server has no tokenizer endpoint: estimating chars/4")
            self.token_mode = "estimate"
            self._send_ids = False
        return pseudo_tokenize(text)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens``."""
        if self.token_mode == "local":
            return str(self._vocab.detokenize(tokens, special=True))
        if self.token_mode == "server" and tokens and all(0 <= t < 1 << 24 for t in tokens):
            path = (
                "/extras/detokenize" if self._server_tokenize_path != "/tokenize" else "/detokenize"
            )
            try:
                resp = self._client.post(
                    path,
                    json={"tokens": list(tokens)},
                    headers={"Accept": "application/json"},
                )
                if resp.status_code < 400:
                    data = resp.json()
                    return str(data.get("text", data.get("content", "")))
            except _TRANSPORT_ERRORS as exc:
                raise RemoteBackendError(f"detokenize failed: {type(exc).__name__}") from exc
        return pseudo_detokenize(tokens)

    # --- generation -------------------------------------------------------------------------

    def _prompt_payload(self, tokens: Sequence[int]) -> str | list[int]:
        if self._send_ids and all(0 <= t < 1 << 24 for t in tokens):
            return list(tokens)
        bos = self._info.bos_id
        body = list(tokens)
        if body and bos is not None and body[0] == bos:
            body = body[1:]  # the server adds its own BOS to text prompts
        prefix = self._server_prefix
        if prefix and body[: len(prefix)] == prefix:
            body = body[len(prefix) :]
        return self.detokenize(body)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream a completion from the server; retries, then raises RemoteBackendError."""
        self._counters["requests"] += 1
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        if request.cancel.cancelled:
            result.stop_reason = "cancelled"
            return result
        self.breaker.check()
        attempts = max(0, self.settings.remote_retries) + 1
        last_error = ""
        switched = False
        attempt = 0
        while attempt < attempts:
            try:
                answered = self._stream_once(request, result, t0)
            except _Retryable as exc:
                last_error = str(exc)
                if "HTTP " in last_error and self._send_ids and not switched:
                    # llama-cpp-python's server answers a list-of-ints prompt with 500
                    logger.info("server rejected a token-id prompt; sending text from now on")
                    self._send_ids = False
                    switched = True
                    continue
                if "HTTP 4" in last_error and "HTTP 429" not in last_error:
                    raise RemoteBackendError(f"remote completion failed: {last_error}") from None
                attempt += 1
                if attempt < attempts:
                    self._counters["retries"] += 1
                    delay = self.backoff_s * (2 ** (attempt - 1))
                    if request.cancel._event.wait(delay):
                        result.stop_reason = "cancelled"
                        return result
                    continue
                self._counters["failures"] += 1
                self.breaker.failure()
                raise RemoteBackendError(
                    f"remote completion failed after {attempts} attempt(s): {last_error}"
                ) from None
            except RemoteBackendError:
                self._counters["failures"] += 1
                self.breaker.failure()
                raise
            else:
                if answered:  # a cancel before the server answered says nothing of it
                    self.breaker.success()
                break
        result.finish(t0)
        if result.stop_reason == "cancelled":
            self._counters["cancelled"] += 1
        elif result.stop_reason == "timeout":
            self._counters["timeouts"] += 1
        self._counters["generated_chars"] += len(result.text)
        return result

    def _stream_once(self, request: GenerationRequest, result: GenerationResult, t0: float) -> bool:
        """One streamed request; raises _Retryable before any text, else RemoteBackendError.

        Returns False when a cancel ended it before the server answered (no verdict on
        the server's health), True otherwise.
        """
        settings = self.settings
        prompt_cap = (
            request.prompt_timeout_s
            if request.prompt_timeout_s is not None
            else settings.prompt_timeout_ms / 1000.0
        )
        gen_cap = (
            request.generation_timeout_s
            if request.generation_timeout_s is not None
            else settings.generation_timeout_ms / 1000.0
        )
        payload: dict[str, Any] = {
            "prompt": self._prompt_payload(request.prompt_tokens),
            "max_tokens": max(1, request.max_tokens),
            "temperature": 0.0,
            "top_k": 1,
            "stream": True,
        }
        if request.stop:
            payload["stop"] = [s for s in request.stop if s][:4]
        if settings.remote_model:
            payload["model"] = settings.remote_model
        read_timeout = min(settings.remote_read_timeout_ms / 1000.0, prompt_cap + gen_cap + 1.0)
        timeout = httpx.Timeout(
            read_timeout,
            connect=settings.remote_connect_timeout_ms / 1000.0,
        )
        stream = TextStream(request)
        first_text_at: float | None = None
        answered = False
        started = time.perf_counter()
        try:
            with (
                self._watch(request.cancel) as interrupter,
                self._client.stream(
                    "POST", "/v1/completions", json=payload, timeout=timeout
                ) as resp,
            ):
                answered = True
                if resp.status_code >= 400:
                    resp.read()
                    raise _Retryable(f"HTTP {resp.status_code}: {resp.text[:200]}")
                for line in resp.iter_lines():
                    if request.cancel.cancelled:
                        result.stop_reason = "cancelled"
                        break
                    now = time.perf_counter()
                    if first_text_at is None and now - started > prompt_cap:
                        result.stop_reason = "timeout"
                        break
                    if first_text_at is not None and now - first_text_at > gen_cap:
                        result.stop_reason = "timeout"
                        break
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except json.JSONDecodeError as exc:
                        raise RemoteBackendError("the server sent malformed JSON") from exc
                    choices = chunk.get("choices") or [{}]
                    choice = choices[0]
                    text = str(choice.get("text") or "")
                    if text:
                        if first_text_at is None:
                            first_text_at = time.perf_counter()
                            result.ttft_ms = (first_text_at - t0) * 1000.0
                            result.prefill_ms = result.ttft_ms
                        if stream.feed_text(text):
                            result.stop_reason = stream.reason
                            break
                    timings = chunk.get("timings")
                    if isinstance(timings, dict) and "cache_n" in timings:
                        result.reused_tokens = int(timings["cache_n"])
                    finish = choice.get("finish_reason")
                    if finish:
                        result.stop_reason = {"length": "length", "stop": "stop"}.get(
                            str(finish), "eos"
                        )
                        if finish == "stop" and not request.stop:
                            result.stop_reason = "eos"
                if interrupter is not None:
                    # before the response closes and its connection may go back to the
                    # pool, where a late cancel must not shut it down
                    interrupter.disarm()
        except _TRANSPORT_ERRORS as exc:
            if request.cancel.cancelled:
                # our cancel shut the socket down (or it broke after the cancel): the
                # answer is no longer wanted, so this is neither a failure nor a retry
                result.stop_reason = "cancelled"
            elif first_text_at is None and not result.stop_reason:
                if isinstance(exc, httpx.TimeoutException) and (
                    time.perf_counter() - started >= prompt_cap
                ):
                    result.stop_reason = "timeout"
                    result.text = stream.finish()
                    return True
                raise _Retryable(f"{type(exc).__name__}: {exc}") from exc
            else:
                raise RemoteBackendError(
                    f"the connection to {self.base_url} broke mid-stream ({type(exc).__name__})"
                ) from exc
        result.text = stream.finish()
        if not result.stop_reason:
            result.stop_reason = "eos"
        if self.token_mode == "local" and result.text:
            result.tokens = self.tokenize(result.text)
        return answered or result.stop_reason != "cancelled"

    @contextmanager
    def _watch(self, cancel: CancelToken) -> Iterator[_Interrupter | None]:
        """Let ``cancel`` shut this thread's request socket down (see the module doc)."""
        if self._network is None:
            yield None
            return
        with self._network.watch(cancel) as interrupter:
            yield interrupter

    # --- status -------------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Counters, circuit state and tokenizer mode (never the API key)."""
        return {
            "backend": self.name,
            "url": self.base_url,
            **self._counters,
            "circuit": self.breaker.state,
            "circuit_opened": self.breaker.times_opened,
            "token_mode": self.token_mode,
            "prompt_as_ids": self._send_ids,
            "api_key_set": self._has_key,
        }

    def close(self) -> None:
        """Close the HTTP client and the vocabulary."""
        self._client.close()
        if self._vocab is not None:
            self._vocab.close()
            self._vocab = None

    def __repr__(self) -> str:
        return f"RemoteBackend(url={self.base_url!r}, token_mode={self.token_mode!r})"
