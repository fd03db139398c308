"""A client for OpenAI-compatible ``/v1/completions`` servers, for teams sharing one model.

Works with llama.cpp's llama-server, llama-cpp-python's server, vLLM and Ollama:
streaming (server-sent events), bounded retries with exponential backoff (only before
any text has arrived: a half-streamed answer is never silently restarted), and a
circuit breaker (:mod:`~lsp_assist.backends.circuit`). The API key is read from the
environment variable named by ``remoteApiKeyEnv``, sent as a bearer token, and never
logged or put in an error message.

Time caps. A request's caps hold whatever the server does (says nothing, drips a byte
a second, streams junk): until the first text, every connect, write and read of every
attempt, retry backoffs included, must end by ``promptTimeoutMs`` after ``generate``
started; from the first text on, by ``generationTimeoutMs`` after it. The deadline is
enforced in the transport (:mod:`~lsp_assist.backends.transport`), which cuts each
socket operation's timeout to the time left, so ``generate`` returns with
``stop_reason == "timeout"`` at the cap (plus milliseconds), keeping any text already
streamed. ``remoteReadTimeoutMs`` and ``remoteConnectTimeoutMs`` still bound a single
read or connect (a shorter read timeout lets a retry happen within the prompt cap). A
server that sent no text within the prompt cap counts as a failure for the circuit
breaker, so a dead server costs a few capped requests, then none.

Cancellation. A cancel shuts the request's socket down from the cancelling thread
(see the transport module), so ``generate`` returns within milliseconds wherever it
blocks: connecting, waiting for the prompt to be evaluated, reading a trickle. A
cancel is neither a retry nor a failure.

Tokens. The rest of lsp-assist counts and assembles prompts in token ids, so the client
needs the server model's tokenizer. In order of preference:

1. ``local``: a vocabulary-only load of ``modelPath`` (the same GGUF the server runs);
   exact and fast, no network.
2. ``server``: the server's own tokenizer endpoints (``/extras/tokenize`` of
   llama-cpp-python, ``/tokenize`` of llama-server); exact, one round trip per call.
   Each call is capped by ``promptTimeoutMs`` (and the read timeout) and is
   cancelled by the token of the request it works for (``CancelToken.current()``:
   the scheduler runs each completion under its token). A call that fails raises
   :class:`~lsp_assist.errors.RemoteBackendError` and counts for the circuit breaker;
   while the circuit is open calls fail at once: a prompt is never assembled from a
   mix of server ids and estimates.
3. ``estimate``: no tokenizer at all. Text is cut into 4-character pieces and each
   piece is encoded reversibly into one integer ("pseudo token"), so counts follow the
   usual chars/4 estimate and ``detokenize`` gives the text back exactly.

The prompt goes to the server as token ids when they are real ids (llama-server and
vLLM accept a list of ints) and as text otherwise; a server that rejects ids (HTTP
400/422, e.g. llama-cpp-python's) is switched to text for the rest of the session.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import httpx

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
)
from lsp_assist.backends.circuit import CircuitBreaker
from lsp_assist.backends.streaming import TextStream
from lsp_assist.backends.transport import CancellableNetwork, Exchange, cancellable_transport
from lsp_assist.backends.vocab import Vocabulary, read_model_info
from lsp_assist.config import ModelSettings
from lsp_assist.errors import GenerationCancelled, ModelLoadError, RemoteBackendError

logger = logging.getLogger(__name__)

TokenizerMode = Literal["auto", "local", "server", "estimate"]
_PSEUDO_CHARS = 4
_TRANSPORT_ERRORS = (httpx.TransportError, httpx.StreamError)
_MAX_LINE_BYTES = 1 << 20
"""A longer server-sent-event line is junk, not a completion chunk."""
_MAX_ERROR_BODY = 4096

__all__ = ["CircuitBreaker", "RemoteBackend", "pseudo_detokenize", "pseudo_tokenize"]


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


class _Retryable(Exception):
    """A failure before any text arrived: the request may be retried."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass(slots=True)
class _Attempt:
    """One attempt's progress: its deadline (moved at the first text) and what arrived."""

    deadline: float
    generation_cap: float
    exchange: Exchange | None = None
    first_text_at: float | None = None
    done: bool = False
    """A finish reason, [DONE] or a stop arrived: the answer is complete."""

    def expired(self) -> bool:
        """True once the current deadline has passed."""
        return time.monotonic() >= self.deadline

    def move_deadline(self, deadline: float) -> None:
        """Set a new deadline (the generation cap from the first text on)."""
        self.deadline = deadline
        if self.exchange is not None:
            self.exchange.deadline = deadline


class RemoteBackend(Backend):
    """OpenAI-compatible completions over HTTP with caps, retries and a circuit breaker."""

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
        # a caller's transport (tests, proxies) is used as is: cancels and caps are then
        # noticed between streamed chunks only
        self._network: CancellableNetwork | None = None
        if transport is None:
            transport, self._network = cancellable_transport()
        self._client = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            timeout=self._timeout(None),
            transport=transport,
        )
        self._vocab: Vocabulary | None = None
        path = model_path or (Path(settings.model_path) if settings.model_path else None)
        self.token_mode: str = "estimate" if tokenizer == "estimate" else "server"
        if tokenizer in ("auto", "local") and path is not None:
            self._vocab = Vocabulary(Path(path).expanduser())
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

    def _timeout(self, left: float | None) -> httpx.Timeout:
        """httpx's per-operation timeouts, none longer than ``left`` seconds."""
        read = self.settings.remote_read_timeout_ms / 1000.0
        connect = self.settings.remote_connect_timeout_ms / 1000.0
        if left is not None:
            read, connect = min(read, left), min(connect, left)
        return httpx.Timeout(read, connect=connect)

    def _caps(self, request: GenerationRequest | None = None) -> tuple[float, float]:
        """The prompt and generation caps in seconds (the request's, else the settings')."""
        prompt = request.prompt_timeout_s if request is not None else None
        generation = request.generation_timeout_s if request is not None else None
        return (
            prompt if prompt is not None else self.settings.prompt_timeout_ms / 1000.0,
            generation if generation is not None else self.settings.generation_timeout_ms / 1000.0,
        )

    @contextmanager
    def _guard(self, cancel: CancelToken, deadline: float) -> Iterator[Exchange | None]:
        """Bound this thread's I/O by ``deadline`` and let ``cancel`` end it."""
        if self._network is None:
            yield None
            return
        with self._network.guard(cancel, deadline) as exchange:
            yield exchange

    def _fail(self) -> None:
        self._counters["failures"] += 1
        self.breaker.failure()

    def _post_json(
        self,
        path: str,
        body: dict[str, Any],
        *,
        cancel: CancelToken | None = None,
        deadline: float | None = None,
    ) -> tuple[int, Any]:
        """POST to a tokenizer endpoint within the prompt cap; return (status, JSON body).

        ``cancel`` defaults to the token of the request this thread works for. Transport
        errors, timeouts and junk count as failures for the circuit breaker.
        """
        self.breaker.check()
        cancel = cancel or CancelToken.current() or CancelToken()
        if cancel.cancelled:
            raise GenerationCancelled(f"{path}: {cancel.reason}")
        if deadline is None:
            deadline = time.monotonic() + self._caps()[0]
        left = deadline - time.monotonic()
        try:
            with self._guard(cancel, deadline):
                resp = self._client.post(
                    path,
                    json=body,
                    headers={"Accept": "application/json"},
                    timeout=self._timeout(max(left, 0.0)),
                )
            if cancel.cancelled:  # the body may have ended where our cancel cut it
                raise GenerationCancelled(f"{path}: {cancel.reason}")
            if resp.status_code >= 400:
                if resp.status_code >= 500:
                    self._fail()
                return resp.status_code, None
            return resp.status_code, resp.json()
        except _TRANSPORT_ERRORS as exc:
            if cancel.cancelled:
                raise GenerationCancelled(f"{path}: {cancel.reason}") from exc
            self._fail()
            raise RemoteBackendError(f"{path} failed: {type(exc).__name__}") from exc
        except ValueError as exc:  # a 200 whose body is not JSON
            self._fail()
            raise RemoteBackendError(f"{path} answered with something other than JSON") from exc

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
            status, data = self._post_json(path, body)
            if status in (404, 405):
                continue
            if status >= 400 or not isinstance(data, dict):
                raise RemoteBackendError(f"tokenize failed: HTTP {status}")
            tokens = [int(t) for t in data.get("tokens", [])]
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
        """Return token ids without BOS (pseudo tokens in estimate mode; see module doc).

        With the server's tokenizer, raises RemoteBackendError when the call fails or
        the circuit is open, and GenerationCancelled when the current request's token
        is cancelled meanwhile.
        """
        if self._vocab is not None:
            return list(self._vocab.tokenize(text, special=special))
        if self.token_mode == "server":
            tokens = self._server_tokenize(text, special)
            if tokens is not None:
                return tokens
            logger.info("the server has no tokenizer endpoint: estimating chars/4")
            self.token_mode = "estimate"
            self._send_ids = False
        return pseudo_tokenize(text)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens`` (raises like :meth:`tokenize`)."""
        return self._detokenize(tokens)

    def _detokenize(
        self,
        tokens: Sequence[int],
        *,
        cancel: CancelToken | None = None,
        deadline: float | None = None,
    ) -> str:
        if self._vocab is not None:
            return str(self._vocab.detokenize(tokens, special=True))
        if self.token_mode == "server" and tokens and all(0 <= t < 1 << 24 for t in tokens):
            path = (
                "/extras/detokenize" if self._server_tokenize_path != "/tokenize" else "/detokenize"
            )
            status, data = self._post_json(
                path, {"tokens": list(tokens)}, cancel=cancel, deadline=deadline
            )
            if status >= 400 or not isinstance(data, dict):
                raise RemoteBackendError(f"detokenize failed: HTTP {status}")
            return str(data.get("text", data.get("content", "")))
        return pseudo_detokenize(tokens)

    # --- generation -------------------------------------------------------------------------

    def _prompt_payload(
        self, tokens: Sequence[int], cancel: CancelToken, deadline: float
    ) -> str | list[int]:
        if self._send_ids and all(0 <= t < 1 << 24 for t in tokens):
            return list(tokens)
        bos = self._info.bos_id
        body = list(tokens)
        if body and bos is not None and body[0] == bos:
            body = body[1:]  # the server adds its own BOS to text prompts
        prefix = self._server_prefix
        if prefix and body[: len(prefix)] == prefix:
            body = body[len(prefix) :]
        return self._detokenize(body, cancel=cancel, deadline=deadline)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Stream a completion within the request's caps (module doc); retries, then raises.

        Raises RemoteBackendError when the server failed (after retries) and
        CircuitOpenError while the circuit is open; a cancel or a cap is a result.
        """
        self._counters["requests"] += 1
        t0 = time.perf_counter()
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        if request.cancel.cancelled:
            result.stop_reason = "cancelled"
            self._counters["cancelled"] += 1
            return result
        self.breaker.check()
        try:
            healthy = self._attempts(request, result, t0)
        except GenerationCancelled:  # while detokenizing the prompt on the server
            result.stop_reason, healthy = "cancelled", None
        except RemoteBackendError:
            self._fail()
            raise
        if healthy:
            self.breaker.success()
        elif healthy is False:
            self._fail()
        result.finish(t0)
        if result.stop_reason == "cancelled":
            self._counters["cancelled"] += 1
        elif result.stop_reason == "timeout":
            self._counters["timeouts"] += 1
        self._counters["generated_chars"] += len(result.text)
        return result

    def _attempts(
        self, request: GenerationRequest, result: GenerationResult, t0: float
    ) -> bool | None:
        """Run attempts until one answers or the prompt cap is spent; return the verdict.

        True: the server answered (success for the circuit breaker); False: no text
        within the prompt cap (a failure); None: cancelled before any text (no verdict).
        """
        prompt_cap, generation_cap = self._caps(request)
        prompt_deadline = time.monotonic() + prompt_cap
        attempts = max(0, self.settings.remote_retries) + 1
        failed = 0
        switched = False
        while True:
            try:
                return self._stream_once(request, result, t0, prompt_deadline, generation_cap)
            except _Retryable as exc:
                if exc.status in (400, 422, 500) and self._send_ids and not switched:
                    # llama-cpp-python's server answers a list-of-ints prompt with 500
                    logger.info("server rejected a token-id prompt; sending text from now on")
                    self._send_ids = False
                    switched = True
                    continue
                if 400 <= exc.status < 500 and exc.status != 429:
                    raise RemoteBackendError(f"remote completion failed: {exc}") from None
                failed += 1
                delay = self.backoff_s * (2 ** (failed - 1))
                if failed >= attempts or time.monotonic() + delay >= prompt_deadline:
                    raise RemoteBackendError(
                        f"remote completion failed after {failed} attempt(s): {exc}"
                    ) from None
                self._counters["retries"] += 1
                if request.cancel._event.wait(delay):
                    result.stop_reason = "cancelled"
                    return None

    def _stream_once(
        self,
        request: GenerationRequest,
        result: GenerationResult,
        t0: float,
        prompt_deadline: float,
        generation_cap: float,
    ) -> bool | None:
        """One streamed request; raises _Retryable before any text, else RemoteBackendError.

        Returns the verdict for the circuit breaker, as :meth:`_attempts` does.
        """
        cancel = request.cancel
        attempt = _Attempt(deadline=prompt_deadline, generation_cap=generation_cap)
        if attempt.expired():
            result.stop_reason = "timeout"
            return False
        payload: dict[str, Any] = {
            "prompt": self._prompt_payload(request.prompt_tokens, cancel, prompt_deadline),
            "max_tokens": max(1, request.max_tokens),
            "temperature": 0.0,
            "top_k": 1,
            "stream": True,
        }
        if request.stop:
            payload["stop"] = [s for s in request.stop if s][:4]
        if self.settings.remote_model:
            payload["model"] = self.settings.remote_model
        stream = TextStream(request)
        timeout = self._timeout(max(prompt_deadline - time.monotonic(), 0.0))
        try:
            with (
                self._guard(cancel, prompt_deadline) as exchange,
                self._client.stream(
                    "POST", "/v1/completions", json=payload, timeout=timeout
                ) as resp,
            ):
                attempt.exchange = exchange
                if resp.status_code >= 400:
                    raise _Retryable(
                        f"HTTP {resp.status_code}: {_error_text(resp)}", resp.status_code
                    )
                _check_event_stream(resp)
                self._read_events(resp, request, result, stream, attempt, t0)
                if exchange is not None:
                    # before the response closes and its connection may go back to the
                    # pool, where a late cancel must not shut it down
                    exchange.disarm()
        except _TRANSPORT_ERRORS as exc:
            if cancel.cancelled:
                # our cancel shut the socket down (or it broke after the cancel): the
                # answer is no longer wanted, so this is neither a failure nor a retry
                result.stop_reason = "cancelled"
            elif attempt.done:
                pass  # the answer was complete; what came after it does not matter
            elif isinstance(exc, httpx.TimeoutException) and attempt.expired():
                result.stop_reason = "timeout"
            elif attempt.first_text_at is None:
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
        if attempt.first_text_at is not None or attempt.done:
            return True
        if result.stop_reason == "cancelled":
            return None
        return result.stop_reason != "timeout"

    def _read_events(
        self,
        resp: httpx.Response,
        request: GenerationRequest,
        result: GenerationResult,
        stream: TextStream,
        attempt: _Attempt,
        t0: float,
    ) -> None:
        """Read server-sent events until done, cancelled, capped or the stream ends.

        Lines are split here rather than by httpx so that the cancel flag and the cap
        are checked at every chunk, even one without a line end, and a line cannot
        grow without bound.
        """
        pending = b""
        for chunk in resp.iter_bytes():
            if request.cancel.cancelled:
                result.stop_reason = "cancelled"
                return
            *lines, pending = (pending + chunk).split(b"\n")
            if len(pending) > _MAX_LINE_BYTES:
                raise RemoteBackendError(
                    f"the server sent a line of over {_MAX_LINE_BYTES} bytes: not an event stream"
                )
            for line in lines:
                if self._event(line.rstrip(b"\r"), request, result, stream, attempt, t0):
                    return
            if attempt.expired():
                result.stop_reason = result.stop_reason or "timeout"
                return
        if request.cancel.cancelled and not attempt.done:
            # our cancel shut the socket down and the server's close-delimited body
            # ended there: what came is not the whole answer
            result.stop_reason = "cancelled"
            return
        self._event(pending.rstrip(b"\r"), request, result, stream, attempt, t0)

    def _event(
        self,
        line: bytes,
        request: GenerationRequest,
        result: GenerationResult,
        stream: TextStream,
        attempt: _Attempt,
        t0: float,
    ) -> bool:
        """Handle one event-stream line; return True when the answer is complete."""
        if not line.startswith(b"data:"):
            return False  # blank lines, comments, other fields, junk
        data = line[5:].strip()
        if data == b"[DONE]":
            attempt.done = True
            return True
        try:
            chunk = json.loads(data)
        except ValueError as exc:  # JSONDecodeError or bytes that are not UTF-8
            raise RemoteBackendError("the server sent malformed JSON") from exc
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else {}
        if not isinstance(choice, dict):
            raise RemoteBackendError("the server sent a chunk without a completion choice")
        text = str(choice.get("text") or "")
        if text:
            if attempt.first_text_at is None:
                attempt.first_text_at = time.monotonic()
                attempt.move_deadline(attempt.first_text_at + attempt.generation_cap)
                result.ttft_ms = (time.perf_counter() - t0) * 1000.0
                result.prefill_ms = result.ttft_ms
            if stream.feed_text(text):
                result.stop_reason = stream.reason
                attempt.done = True
                return True
        timings = chunk.get("timings")
        if isinstance(timings, dict) and "cache_n" in timings:
            result.reused_tokens = int(timings["cache_n"])
        finish = choice.get("finish_reason")
        if finish:
            # keep reading up to [DONE]: llama-server's timings may follow
            result.stop_reason = {"length": "length", "stop": "stop"}.get(str(finish), "eos")
            if finish == "stop" and not request.stop:
                result.stop_reason = "eos"
            attempt.done = True
        return False

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


def _error_text(resp: httpx.Response) -> str:
    """The first bytes of an error response's body (never more, whatever it sends)."""
    body = b""
    for chunk in resp.iter_bytes():
        body += chunk
        if len(body) >= _MAX_ERROR_BODY:
            break
    return body[:200].decode("utf-8", errors="replace")


def _check_event_stream(resp: httpx.Response) -> None:
    """Refuse a 200 that is plainly not an event stream (a proxy's HTML page, say)."""
    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != "text/event-stream":
        raise RemoteBackendError(
            f"the server answered with Content-Type {kind!r}, not an event stream"
        )
