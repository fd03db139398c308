"""The decode loop: one request's greedy generation on a :class:`LlamaEngine`.

:class:`DecodeLoop` evaluates the prompt (whatever the KV cache does not hold yet),
then decodes greedily (argmax), one step at a time. With a drafter, each step puts the
pending token and up to ``span`` drafts in one batch with logits for those positions
only, accepts the drafts up to the first that differs from the greedy choice, takes
the model's token there as the next one, and removes the rejected positions from the
KV cache. The span adapts: a step in which every draft was accepted earns the next one
twice as many, up to ``span_cap``; a rejection falls back to the restart span (the base
span, or :data:`PADDED_RESTART_SPAN` where the caller asks for it).

Decoding is greedy and the engine's steps are batch-invariant, so drafting never
changes the output. A cancel or a time cap is checked after every token and, through
the engine's abort callback, inside every ``llama_decode``, except a cancel while the
prompt is evaluated: that one is checked between the prompt's calls only (a cancelled
request's prompt is the next request's, so a call half evaluated is finished and kept).
Either ends generation with ``stop_reason`` ``cancelled`` or ``timeout``, never an
exception.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time

import numpy as np

from lsp_assist.backends.base import Alternative, GenerationRequest, GenerationResult, TimeCaps
from lsp_assist.backends.drafting import Drafter, PromptLookupDrafter
from lsp_assist.backends.healing import ForcedPrefix
from lsp_assist.backends.llama_engine import INVARIANT_MAX_ROWS, DecodeAborted, LlamaEngine
from lsp_assist.backends.streaming import TextStream
from lsp_assist.errors import BackendError

logger = logging.getLogger(__name__)


CODE_FIRST_CANDIDATES = 16
"""How many of the likeliest first tokens :attr:`GenerationRequest.code_first` looks at."""

PADDED_RESTART_SPAN = 1
"""Drafts after a rejection (and in a request's first step) with batch-invariant steps.

A plain batch-invariant step evaluates a padding row anyway, so one draft rides along
for the cost of its logits (about 6 % of a step for Qwen2.5-Coder-1.5B on this CPU),
while every further row costs about a third of a step here. On real code most drafts
after a rejection are rejected too (prompt lookup: 0.38 accepted at 4 a step), so a
step risks only the free row and the span earns its way back up (1, 2, 4, 6) by full
acceptances: docs/performance.md, "Speculative drafting with a real draft model".
"""


def draft_limits(draft_tokens: int, min_rows: int) -> tuple[int, int]:
    """Return (drafts per step, the adaptive span's cap) for ``draftTokens``.

    With batch-invariant steps (``min_rows`` > 1) a verification batch is the pending
    token plus at most ``INVARIANT_MAX_ROWS - 1`` drafts: 8 or more rows switch kernels.
    """
    draft_n = max(0, draft_tokens)
    span_cap = 2 * draft_n
    if min_rows > 1:
        draft_n = min(draft_n, INVARIANT_MAX_ROWS - 1)
        span_cap = min(span_cap, INVARIANT_MAX_ROWS - 1)
    return draft_n, span_cap


class DecodeLoop:
    """Prompt evaluation then greedy decoding of one request into ``result``.

    ``started`` is ``generate``'s perf_counter start: the prompt cap, ``prefill_ms`` and
    ``ttft_ms`` count from it; the generation cap counts from the prompt's end.
    """

    def __init__(
        self,
        engine: LlamaEngine,
        request: GenerationRequest,
        result: GenerationResult,
        *,
        caps: TimeCaps,
        started: float,
    ) -> None:
        self.engine = engine
        self.request = request
        self.result = result
        self.caps = caps
        self.started = started
        self._deadline = started + caps.prompt_s
        self._pending = -1
        self._firsts: list[int] = []
        """The likeliest first tokens, best first, kept for :meth:`branches`."""
        self._stream = TextStream(request)
        self._max_tokens = max(1, request.max_tokens)
        self._forced = (
            ForcedPrefix(request.forced_prefix, engine.piece_index())
            if request.forced_prefix
            else None
        )
        """Token healing: the text the first tokens must write (not part of the text)."""
        self._code_due = request.code_first
        """At a blank line, until the text has something other than white space: the
        next token must write code (:meth:`_next`)."""
        self._logprob = 0.0
        """The log probability of the token :meth:`_next` chose last (its row's)."""

    def _late(self) -> bool:
        """The current cap (prompt, then generation) has passed."""
        return time.perf_counter() > self._deadline

    def _cancelled(self) -> bool:
        """The request was cancelled (superseded, the client, shutdown)."""
        return self.request.cancel.cancelled

    def _abort(self) -> bool:
        # checked between graph nodes: a cancel lands within a step (a verification
        # batch of 7 rows takes ~60 ms here) rather than after it
        return self._cancelled() or self._late()

    def _aborted(self) -> None:
        self.result.stop_reason = "cancelled" if self.request.cancel.cancelled else "timeout"

    def evaluate_prompt(self, prompt: list[int], reuse: int) -> bool:
        """Evaluate ``prompt`` after its first ``reuse`` tokens (held by the KV cache).

        Return False when a cancel or the prompt cap stopped it (``stop_reason`` set).
        """
        result = self.result
        result.reused_tokens = reuse
        try:
            # a cancel between calls only: the next request shares this prompt (see
            # LlamaEngine.eval); the prompt cap within them
            self.engine.eval(prompt[reuse:], n_logits=1, abort=self._late, stop=self._cancelled)
        except DecodeAborted:
            self._aborted()
            result.prefill_ms = (time.perf_counter() - self.started) * 1000.0
            return False
        t_prefill = time.perf_counter()
        result.prefill_ms = (t_prefill - self.started) * 1000.0
        self._deadline = t_prefill + self.caps.generation_s
        self._pending = self._next(0)
        code_first = self.request.code_first and self._forced is None
        if self.request.alternatives > 1:
            # the next decode overwrites these logits: keep the runners-up for the branches
            self._firsts = self.engine.top_tokens(0, 4 * self.request.alternatives)
            if code_first:
                self._firsts = [t for t in self._firsts if self._writes_code(t)] or self._firsts
            if self._forced is not None and self._forced.active:
                # the runners-up among the tokens that agree with the healed text
                self._firsts = self._forced.best(
                    self.engine.logits(0), 4 * self.request.alternatives
                )
        result.ttft_ms = (time.perf_counter() - self.started) * 1000.0
        return True

    def _ends(self, token: int) -> bool:
        """True when ``token`` ends the generation (end of generation, or a control token)."""
        return self.engine.is_eog(token) or self.engine.is_control(token)

    def _writes_code(self, token: int) -> bool:
        """True when ``token`` neither ends the generation nor breaks the line (after
        spaces or tabs: ``" \\n"`` ends a single-line suggestion as surely as ``"\\n"``)."""
        if self._ends(token):
            return False
        piece = self.engine.piece(token, special=True).lstrip(b" \t")
        return not piece.startswith((b"\n", b"\r"))

    def _next(self, i: int) -> int:
        """Return the token of logits row ``i``: the greedy one, or while healing the
        likeliest one that agrees with the forced text; while code is due at a blank
        line (:attr:`GenerationRequest.code_first`), the likeliest that writes code."""
        forced = self._forced
        if forced is not None and forced.active:
            chosen = forced.choose(self.engine.logits(i))
            if chosen is not None:
                self._logprob = self._token_logprob(i, chosen)
                return chosen
        token = self.engine.argmax(i)
        if self._code_due and not self._writes_code(token):
            # At a blank line the likeliest token is sometimes a line break or the end: an
            # empty suggestion where the line's code is wanted (issue 20). The same after
            # token healing wrote back the typed indentation or line break (issue 24: the
            # model wrote the healed "\\n" of an empty line, then ended).
            candidates = self.engine.top_tokens(i, CODE_FIRST_CANDIDATES)
            token = next((t for t in candidates if self._writes_code(t)), token)
        self._logprob = self._token_logprob(i, token)
        return token

    def _token_logprob(self, i: int, token: int) -> float:
        """The log probability of ``token`` in logits row ``i`` (a log-softmax)."""
        row = self.engine.logits(i)
        top = float(row.max())
        return float(row[token]) - top - math.log(float(np.exp(row - top).sum()))

    def _emit(self, token: int) -> bool:
        """Accept one generated token; return True when generation is done."""
        eng, result = self.engine, self.result
        if self._ends(token):
            result.stop_reason = "eos"
            return True
        result.tokens.append(token)
        result.token_logprobs.append(self._logprob)
        if self.request.on_logprob is not None:
            self.request.on_logprob(self._logprob)
        piece = eng.piece(token, special=True)
        if self._forced is not None:
            piece = self._forced.consume(piece)
        if self._code_due and piece.strip():
            self._code_due = False
        if self._stream.feed(piece):
            result.stop_reason = self._stream.reason
            return True
        if len(result.tokens) >= self._max_tokens:
            result.stop_reason = "length"
            return True
        return False

    def prepare_drafter(self, prompt: list[int], drafter: Drafter | None) -> bool:
        """Hand ``drafter`` the prompt (a draft model evaluates it) under the prompt cap.

        Called after :meth:`evaluate_prompt` and before :meth:`decode`; its time counts
        as prompt time (``prefill_ms``, ``ttft_ms``). Return False when a cancel or the
        prompt cap stopped it (``stop_reason`` set); a drafter that fails otherwise is
        logged and the request decodes without it (:meth:`decode` is then given None).
        """
        if drafter is None:
            return True
        deadline = self._deadline
        self._deadline = self.started + self.caps.prompt_s
        try:
            drafter.reset(prompt, self._abort)
        except DecodeAborted:
            self._aborted()
            return False
        finally:
            self._deadline = deadline
        now = time.perf_counter()
        self.result.prefill_ms = self.result.ttft_ms = (now - self.started) * 1000.0
        self._deadline = now + self.caps.generation_s
        return True

    def decode(
        self,
        prompt: list[int],
        drafter: Drafter | None,
        *,
        span: int,
        span_cap: int,
        pad_guess: PromptLookupDrafter | None = None,
        restart_span: int | None = None,
    ) -> None:
        """Decode after :meth:`evaluate_prompt`, drafting with ``drafter`` when given.

        ``span`` drafts per step (0: no drafting), growing up to ``span_cap``. A drafter
        must have been reset on ``prompt`` (:meth:`prepare_drafter`). Sets ``text``,
        ``tokens``, ``stop_reason`` and the drafting figures of the result.

        ``pad_guess`` (while drafting, with batch-invariant steps): a step the drafter
        has nothing for puts :meth:`PromptLookupDrafter.guess` in the row that would
        have been padding. Guesses are counted on ``pad_guess`` (``guesses``,
        ``guesses_accepted``), not in the result's draft figures, so the acceptance
        tracker judges the drafter alone; they do not move the adaptive span.

        ``restart_span`` (None: ``span``) is the span of the first step and of a step
        after a rejection.
        """
        eng, result, cancel = self.engine, self.result, self.request.cancel
        draft_n = span if restart_span is None else max(1, min(span, restart_span))
        span = draft_n
        drafting = span > 0 and drafter is not None
        result.drafting = drafting
        generated = result.tokens
        pending = self._pending
        while True:
            if self._emit(pending):
                break
            if cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            if time.perf_counter() > self._deadline:
                result.stop_reason = "timeout"
                break
            base = len(eng.tokens)
            room = min(self._max_tokens - len(generated), eng.n_ctx - base - 1)
            if room <= 0:
                result.stop_reason = "length"
                break
            drafts: list[int] = []
            healing = self._forced is not None and self._forced.active
            if drafting and drafter is not None and not healing and room > 1:
                try:
                    drafts = drafter.propose([*prompt, *generated], min(span, room - 1))
                except DecodeAborted:
                    self._aborted()
                    break
                except BackendError as exc:
                    logger.warning("drafting failed, switched off for this request: %s", exc)
                    drafting = False
            guessed = False
            if drafting and not drafts and pad_guess is not None and room > 1 and not healing:
                # the step has a padding row anyway (eng.min_rows > 1): let it guess
                drafts = pad_guess.guess([*prompt, *generated]) if eng.min_rows > 1 else []
                guessed = bool(drafts)
            try:
                eng.eval([pending, *drafts], n_logits=1 + len(drafts), abort=self._abort)
            except DecodeAborted:
                self._aborted()
                break
            nxt = self._next(0)
            accepted = 0
            done = False
            for i, d in enumerate(drafts):
                if nxt != d:
                    break
                accepted += 1
                done = self._emit(d)
                if done:
                    break
                nxt = self._next(i + 1)
            if guessed and pad_guess is not None:
                pad_guess.guesses += 1
                pad_guess.guesses_accepted += accepted
            elif drafts:
                result.draft_proposed += len(drafts)
                result.draft_accepted += accepted
                # adaptive span: a run of full acceptances (code being copied) earns longer
                # drafts, up to twice draftTokens; a rejection falls back to draftTokens
                span = min(span_cap, span * 2) if accepted == len(drafts) else draft_n
            if done:
                break
            eng.truncate(base + 1 + accepted)
            pending = nxt
        result.text = self._stream.finish()

    def branches(
        self,
        prompt: list[int],
        drafter: Drafter | None,
        *,
        span: int,
        span_cap: int,
        pad_guess: PromptLookupDrafter | None = None,
        restart_span: int | None = None,
    ) -> list[Alternative]:
        """Decode up to ``request.alternatives - 1`` more suggestions after :meth:`decode`.

        Each branch starts from the prompt's KV state (the previous branch's tokens
        truncated away) with the next likeliest first token that does not end generation,
        then decodes greedily under the same stop rules, cancel flag and generation
        deadline as the first suggestion. A cancel or the deadline ends the branching.
        """
        eng, request = self.engine, self.request
        firsts = [
            token for token in self._firsts if token != self._pending and not self._ends(token)
        ]
        # only the first suggestion streams
        quiet = dataclasses.replace(request, on_text=None, on_logprob=None)
        found: list[Alternative] = []
        for first in firsts[: request.alternatives - 1]:
            if request.cancel.cancelled or time.perf_counter() > self._deadline:
                break
            eng.truncate(len(prompt))
            result = GenerationResult()
            branch = DecodeLoop(eng, quiet, result, caps=self.caps, started=self.started)
            branch._deadline, branch._pending = self._deadline, first
            branch.decode(
                prompt,
                drafter,
                span=span,
                span_cap=span_cap,
                pad_guess=pad_guess,
                restart_span=restart_span,
            )
            found.append(Alternative(result.text, tuple(result.tokens), result.stop_reason))
        return found
