"""Speculative drafting: who proposes draft tokens, and whether drafting pays off.

Two drafters propose up to N tokens that the main model then verifies in one batch:

- :class:`PromptLookupDrafter` finds the most recent earlier occurrence of the last few
  tokens (an n-gram) in the prompt plus what has been generated, and proposes what
  followed it. Free to run; code repeats itself, so it often hits.
- :class:`DraftModelDrafter` (built by the local backend from ``draftModelPath``) runs
  a second, smaller GGUF with the same vocabulary greedily, with the same LCP-based KV
  reuse, for up to N tokens while it is confident (its top token's probability at least
  ``p_min``); :func:`check_draft_vocab` refuses one whose vocabulary differs (llama.cpp's
  own rules).
- :class:`CombinedDrafter` asks prompt lookup first and the draft model only when the
  lookup has nothing: copied code costs no draft-model step, new code still gets drafts.

:class:`AcceptanceTracker` keeps the acceptance rate per task type over a rolling
window; below the threshold it switches drafting off for that task type and switches it
back on for a probe after a number of requests.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from lsp_assist.backends.kv_states import common_prefix_len
from lsp_assist.backends.llama_engine import LlamaEngine
from lsp_assist.errors import DraftModelError

# llama.cpp checks vocabularies of a main and a draft model the same way (speculative.cpp)
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5

DRAFT_P_MIN = 0.75
"""A draft model keeps drafting while its top token's probability is at least this
(llama.cpp's speculative default); the first token of a step is always proposed."""

AbortCheck = Callable[[], bool]


class Drafter(Protocol):
    """Anything that proposes draft tokens to continue ``history``."""

    def reset(self, history: Sequence[int], abort: AbortCheck | None = None) -> None:
        """Start a request whose history begins with ``history`` (its prompt).

        ``abort`` is the request's cancel/deadline check, for any model evaluation the
        drafter does until the next ``reset``.
        """
        ...

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Return up to ``n`` tokens likely to follow ``history``."""
        ...


class PromptLookupDrafter:
    """N-gram lookup in the prompt and the generated tokens (no second model).

    ``reset`` indexes a new history; ``propose`` keeps the index current as tokens are
    appended, so each step costs O(n-gram sizes), not O(history). :meth:`guess` is the
    one-token fallback for a decode step's padding row (see :class:`DecodeLoop`).
    """

    def __init__(self, *, max_ngram: int = 3, min_ngram: int = 2) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}
        self._after: dict[int, int] = {}
        """Token -> the position after its latest occurrence (one-token matches)."""
        self.guesses = 0
        self.guesses_accepted = 0
        # how many positions (n-gram end positions) are indexed
        self._indexed = 0

    def reset(self, history: Sequence[int], abort: AbortCheck | None = None) -> None:
        """Index ``history`` from scratch (``abort`` is not needed: no model runs)."""
        self._tokens = []
        self._index = {}
        self._after = {}
        self._indexed = 0
        self._extend(history)

    def _extend(self, history: Sequence[int]) -> None:
        if len(history) < len(self._tokens) or list(history[: len(self._tokens)]) != self._tokens:
            self._tokens = []
            self._index = {}
            self._after = {}
            self._indexed = 0
        self._tokens.extend(history[len(self._tokens) :])
        toks = self._tokens
        # index n-grams ending at position end-1 whose continuation (toks[end]) exists
        last = len(toks) - 1
        for end in range(max(self._indexed, 1), last + 1):
            self._after[toks[end - 1]] = end
            for n in range(self.min_ngram, self.max_ngram + 1):
                start = end - n
                if start < 0:
                    break
                self._index[tuple(toks[start:end])] = end
        self._indexed = max(self._indexed, last + 1)

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Return up to ``n`` tokens that followed the latest earlier match of the tail."""
        if n <= 0 or not history:
            return []
        self._extend(history)
        toks = self._tokens
        for size in range(self.max_ngram, self.min_ngram - 1, -1):
            if size > len(toks) - 1:
                continue
            pos = self._index.get(tuple(toks[-size:]))
            if pos is not None and pos < len(toks):
                return list(toks[pos : pos + n])
        return []

    def guess(self, history: Sequence[int]) -> list[int]:
        """Return the token that followed the latest earlier occurrence of the last one.

        A one-token match is too often wrong to be worth a verification row of its own
        (about a quarter are right on real code), but a batch-invariant step has a
        padding row anyway: there a guess costs at most that row's logits.
        """
        if not history:
            return []
        self._extend(history)
        toks = self._tokens
        pos = self._after.get(toks[-1])
        return [toks[pos]] if pos is not None and pos < len(toks) else []


class DraftModelDrafter:
    """Greedy drafting with a second, smaller model that shares the main vocabulary.

    Each step drafts up to ``n`` tokens and stops early after a token whose
    probability under the draft model is below ``p_min`` (that token is still
    proposed when it is the first: a verification row is cheap next to a draft step).
    The draft model's KV cache keeps the longest common prefix with the history, so a
    step first catches up on what the main model accepted since the last one.
    """

    def __init__(self, engine: LlamaEngine, *, p_min: float = DRAFT_P_MIN) -> None:
        self.engine = engine
        self.p_min = p_min
        self._abort: AbortCheck | None = None
        self._logits_at = -1
        """How many tokens the engine held when its last logits were computed (-1: stale)."""
        self.steps = 0
        """Draft-model decode steps run (one per drafted token, catch-ups included)."""
        self.catchup_tokens = 0
        """History tokens evaluated to catch up (the prompt on a cold cache, accepted tokens)."""
        self.seconds = 0.0
        """Time spent in the draft model, catch-ups included."""

    def reset(self, history: Sequence[int], abort: AbortCheck | None = None) -> None:
        """Evaluate ``history`` (the prompt) in the draft model, under ``abort``.

        Run during the request's prompt evaluation, so the draft model's own prompt
        costs prompt time (and its cap), not decode time. Raises ``DecodeAborted``.
        """
        self._abort = abort
        self._catch_up(history)

    def prefill(self, history: Sequence[int], abort: AbortCheck | None = None) -> None:
        """Evaluate ``history`` ahead of a request (no logits), keeping the common prefix."""
        eng = self.engine
        if not history or len(history) >= eng.n_ctx:
            return
        keep = common_prefix_len(eng.tokens, history)
        eng.truncate(keep)
        self._logits_at = -1
        eng.eval(history[keep:], n_logits=0, abort=abort)

    def _catch_up(self, history: Sequence[int]) -> None:
        eng = self.engine
        if not history or len(history) >= eng.n_ctx:
            return
        keep = common_prefix_len(eng.tokens, history)
        if keep == len(history) == len(eng.tokens) == self._logits_at:
            return  # the last evaluation ended here: its logits are the ones needed
        if keep == len(history):
            keep -= 1  # the last token is evaluated again for its logits
        eng.truncate(keep)
        self._logits_at = -1
        t0 = time.perf_counter()
        try:
            eng.eval(history[keep:], n_logits=1, abort=self._abort)
        finally:
            self.seconds += time.perf_counter() - t0
        self._logits_at = len(eng.tokens)
        self.catchup_tokens += len(history) - keep
        self.steps += 1

    def _best(self) -> tuple[int, float]:
        """The greedy token of the last evaluation and its probability."""
        row = self.engine._logits_row(0)
        tok = int(row.argmax())
        top = float(row[tok])
        return tok, 1.0 / float(np.exp(row - top).sum())

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Run the draft model greedily for up to ``n`` confident tokens after ``history``."""
        eng = self.engine
        if n <= 0 or not history or len(history) + n >= eng.n_ctx:
            return []
        self._catch_up(history)
        out: list[int] = []
        tok, prob = self._best()
        t0 = time.perf_counter()
        try:
            while True:
                out.append(tok)
                if len(out) >= n or eng.is_eog(tok) or prob < self.p_min:
                    break
                self._logits_at = -1
                eng.eval([tok], n_logits=1, abort=self._abort)
                self._logits_at = len(eng.tokens)
                self.steps += 1
                tok, prob = self._best()
                if prob < self.p_min:
                    break
        finally:
            self.seconds += time.perf_counter() - t0
        return out

    def stats(self) -> dict[str, float]:
        """Draft-model steps, catch-up tokens and seconds so far."""
        return {
            "draft_model_steps": self.steps,
            "draft_model_catchup_tokens": self.catchup_tokens,
            "draft_model_seconds": round(self.seconds, 3),
        }


class CombinedDrafter:
    """Prompt lookup first; the draft model only when the lookup has no match.

    Copying continuations (a method being duplicated, a repeated call) are drafted for
    free by the lookup; new code falls back to the draft model, which catches up on the
    tokens it missed in one batch the next time it is asked.
    """

    def __init__(self, lookup: PromptLookupDrafter, model: Drafter) -> None:
        self.lookup = lookup
        self.model = model
        self.lookup_steps = 0
        self.model_steps = 0

    def reset(self, history: Sequence[int], abort: AbortCheck | None = None) -> None:
        """Index the prompt for the lookup and evaluate it in the draft model."""
        self.lookup.reset(history)
        self.model.reset(history, abort)

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Return the lookup's drafts when it has any, else the draft model's."""
        drafts = self.lookup.propose(history, n)
        if drafts:
            self.lookup_steps += 1
            return drafts
        self.model_steps += 1
        return self.model.propose(history, n)

    def stats(self) -> dict[str, float]:
        """Steps drafted by each source, and the draft model's own figures."""
        own: dict[str, float] = {"lookup_steps": self.lookup_steps, "model_steps": self.model_steps}
        if isinstance(self.model, DraftModelDrafter):
            own.update(self.model.stats())
        return own


def check_draft_vocab(main: LlamaEngine, draft: LlamaEngine) -> None:
    """Raise DraftModelError unless ``draft`` can draft for ``main`` (llama.cpp's rules)."""
    ll = main._ll
    if ll.llama_vocab_type(main.vocab) != ll.llama_vocab_type(draft.vocab):
        raise DraftModelError(
            f"draft model {draft.path.name} uses another tokenizer type than {main.path.name}"
        )
    for name in ("llama_vocab_bos", "llama_vocab_eos"):
        a = getattr(ll, name)(main.vocab)
        b = getattr(ll, name)(draft.vocab)
        if a != b:
            raise DraftModelError(
                f"draft model {draft.path.name} has another {name[12:].upper()} token "
                f"({b}) than {main.path.name} ({a})"
            )
    diff = abs(main.n_vocab - draft.n_vocab)
    if diff > VOCAB_MAX_SIZE_DIFFERENCE:
        raise DraftModelError(
            f"draft model {draft.path.name} has {draft.n_vocab} tokens, {main.path.name} has "
            f"{main.n_vocab}: the vocabularies differ"
        )
    for tok in range(VOCAB_CHECK_START_TOKEN_ID, min(main.n_vocab, draft.n_vocab)):
        if main.token_text(tok) != draft.token_text(tok):
            raise DraftModelError(
                f"draft model {draft.path.name} differs from {main.path.name} at token {tok} "
                f"({draft.token_text(tok)!r} vs {main.token_text(tok)!r}): the vocabularies differ"
            )


@dataclass
class _TaskWindow:
    samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=32))
    enabled: bool = True
    skipped: int = 0
    switched_off: int = 0
    total_proposed: int = 0
    total_accepted: int = 0

    def rate(self) -> float | None:
        proposed = sum(p for p, _ in self.samples)
        if proposed == 0:
            return None
        return sum(a for _, a in self.samples) / proposed

    def proposed(self) -> int:
        return sum(p for p, _ in self.samples)


class AcceptanceTracker:
    """Per-task-type acceptance rate over a rolling window, with an automatic off switch."""

    def __init__(
        self,
        *,
        min_acceptance: float = 0.5,
        window: int = 32,
        min_proposed: int = 24,
        probe_after: int = 20,
    ) -> None:
        self.min_acceptance = min_acceptance
        self.window = window
        self.min_proposed = min_proposed
        self.probe_after = probe_after
        self._tasks: dict[str, _TaskWindow] = {}

    def _task(self, task_type: str) -> _TaskWindow:
        task = self._tasks.get(task_type)
        if task is None:
            task = _TaskWindow(samples=deque(maxlen=self.window))
            self._tasks[task_type] = task
        return task

    def should_draft(self, task_type: str) -> bool:
        """Return whether to draft for the next request of ``task_type`` (counts skips)."""
        task = self._task(task_type)
        if task.enabled:
            return True
        task.skipped += 1
        if task.skipped >= self.probe_after:
            task.enabled = True
            task.skipped = 0
            task.samples.clear()
            return True
        return False

    def record(self, task_type: str, proposed: int, accepted: int) -> None:
        """Record one request's draft counts; switch drafting off when the rate is too low."""
        if proposed <= 0:
            return
        task = self._task(task_type)
        task.samples.append((proposed, accepted))
        task.total_proposed += proposed
        task.total_accepted += accepted
        rate = task.rate()
        if (
            task.enabled
            and rate is not None
            and task.proposed() >= self.min_proposed
            and rate < self.min_acceptance
        ):
            task.enabled = False
            task.skipped = 0
            task.switched_off += 1

    def rate(self, task_type: str) -> float | None:
        """Return the rolling acceptance rate of ``task_type`` (None before any draft)."""
        return self._task(task_type).rate()

    def enabled(self, task_type: str) -> bool:
        """Return whether drafting is currently on for ``task_type``."""
        return self._task(task_type).enabled

    def stats(self) -> dict[str, dict[str, object]]:
        """Per task type: rolling rate, on/off, totals."""
        return {
            name: {
                "acceptance_rate": task.rate(),
                "enabled": task.enabled,
                "proposed": task.total_proposed,
                "accepted": task.total_accepted,
                "switched_off": task.switched_off,
            }
            for name, task in self._tasks.items()
        }
