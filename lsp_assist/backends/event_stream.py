"""Reading one streamed ``/v1/completions`` answer: server-sent events into a result.

:class:`Attempt` is one request's progress (its deadline, moved to the generation cap
at the first text, and whether the answer is complete); :class:`CompletionEvents`
splits the body into lines itself, so that the cancel flag and the cap are checked at
every chunk (even one without a line end) and a line cannot grow without bound, and
turns each ``data:`` line into text, a stop reason and llama-server's cache count.

Two chunk formats are read: OpenAI's (``choices[0].text``, ``finish_reason``, then
``[DONE]``) from ``/v1/completions``, and llama-server's own (``content``, ``stop``,
``stop_type``, ``tokens_evaluated``; no ``[DONE]``: its last chunk has ``stop: true``)
from ``/infill``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import httpx

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.backends.streaming import TextStream
from lsp_assist.backends.transport import Exchange
from lsp_assist.errors import RemoteBackendError

MAX_LINE_BYTES = 1 << 20
"""A longer server-sent-event line is junk, not a completion chunk."""
MAX_ERROR_BODY = 4096


@dataclass(slots=True)
class Attempt:
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


class CompletionEvents:
    """Reads one attempt's event stream into ``result`` through ``stream``."""

    def __init__(
        self,
        request: GenerationRequest,
        result: GenerationResult,
        stream: TextStream,
        attempt: Attempt,
        started: float,
    ) -> None:
        self.request = request
        self.result = result
        self.stream = stream
        self.attempt = attempt
        self.started = started
        """``generate``'s perf_counter start (``ttft_ms`` counts from it)."""
        self.saw_timings = False
        """A chunk carried llama-server's ``timings`` (the server is llama-server)."""

    def read(self, resp: httpx.Response) -> None:
        """Read server-sent events until done, cancelled, capped or the stream ends."""
        request, result, attempt = self.request, self.result, self.attempt
        pending = b""
        for chunk in resp.iter_bytes():
            if request.cancel.cancelled:
                result.stop_reason = "cancelled"
                return
            *lines, pending = (pending + chunk).split(b"\n")
            if len(pending) > MAX_LINE_BYTES:
                raise RemoteBackendError(
                    f"the server sent a line of over {MAX_LINE_BYTES} bytes: not an event stream"
                )
            for line in lines:
                if self.event(line.rstrip(b"\r")):
                    return
            if attempt.expired():
                result.stop_reason = result.stop_reason or "timeout"
                return
        if request.cancel.cancelled and not attempt.done:
            # our cancel shut the socket down and the server's close-delimited body
            # ended there: what came is not the whole answer
            result.stop_reason = "cancelled"
            return
        self.event(pending.rstrip(b"\r"))

    def event(self, line: bytes) -> bool:
        """Handle one event-stream line; return True when the answer is complete."""
        result, attempt = self.result, self.attempt
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
        if isinstance(chunk, dict) and "choices" not in chunk and "content" in chunk:
            return self.native(chunk)
        choices = chunk.get("choices") if isinstance(chunk, dict) else None
        choice = choices[0] if isinstance(choices, list) and choices else {}
        if not isinstance(choice, dict):
            raise RemoteBackendError("the server sent a chunk without a completion choice")
        text = str(choice.get("text") or "")
        self.timings(chunk)  # before the text: a stop there ends the stream
        if self.text(text):
            return True
        finish = choice.get("finish_reason")
        if finish:
            # keep reading up to [DONE]: llama-server's timings may follow
            result.stop_reason = {"length": "length", "stop": "stop"}.get(str(finish), "eos")
            if finish == "stop" and not self.request.stop:
                result.stop_reason = "eos"
            attempt.done = True
        return False

    def text(self, text: str) -> bool:
        """Take a chunk's text (the first moves the deadline); True when a stop ended it."""
        result, attempt = self.result, self.attempt
        if not text:
            return False
        if attempt.first_text_at is None:
            attempt.first_text_at = time.monotonic()
            attempt.move_deadline(attempt.first_text_at + attempt.generation_cap)
            result.ttft_ms = (time.perf_counter() - self.started) * 1000.0
            result.prefill_ms = result.ttft_ms
        if self.stream.feed_text(text):
            result.stop_reason = self.stream.reason
            attempt.done = True
            return True
        return False

    def timings(self, chunk: dict[str, object]) -> None:
        """Take llama-server's prompt cache count (``timings.cache_n``), when it sent one."""
        timings = chunk.get("timings")
        if isinstance(timings, dict) and "cache_n" in timings:
            self.result.reused_tokens = int(timings["cache_n"])
            self.saw_timings = True

    def native(self, chunk: dict[str, object]) -> bool:
        """Handle one chunk of llama-server's own format; return True when it is the last."""
        # the counts before the text: a stop in the text ends the stream (the client
        # closes it), and with timings_per_token the first chunk already has them
        self.timings(chunk)
        evaluated = chunk.get("tokens_evaluated")
        if isinstance(evaluated, int) and evaluated > 0:
            # the server built the prompt (/infill): its count, not the request's
            self.result.prompt_tokens = evaluated
        if self.text(str(chunk.get("content") or "")):
            return True
        if not chunk.get("stop"):
            return False
        kind = str(chunk.get("stop_type") or "")
        reason = {"limit": "length", "word": "stop"}.get(kind, "eos")
        if reason == "stop" and not self.request.stop:
            reason = "eos"
        self.result.stop_reason = reason
        self.attempt.done = True
        return True


def error_text(resp: httpx.Response) -> str:
    """The first bytes of an error response's body (never more, whatever it sends)."""
    body = b""
    for chunk in resp.iter_bytes():
        body += chunk
        if len(body) >= MAX_ERROR_BODY:
            break
    return body[:200].decode("utf-8", errors="replace")


def check_event_stream(resp: httpx.Response) -> None:
    """Refuse a 200 that is plainly not an event stream (a proxy's HTML page, say)."""
    kind = resp.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind and kind != "text/event-stream":
        raise RemoteBackendError(
            f"the server answered with Content-Type {kind!r}, not an event stream"
        )
