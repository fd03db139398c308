"""Speculative drafting: who proposes draft tokens, and whether drafting pays off.

Two drafters propose up to N tokens that the main model then verifies in one batch:

- :class:`PromptLookupDrafter` finds the most recent earlier occurrence of the last few
  tokens (an n-gram) in the prompt plus what has been generated, and proposes what
  followed it. Free to run; code repeats itself, so it often hits.
- :class:`DraftModelDrafter` (built by the local backend from ``draftModelPath``) runs
  a second, smaller GGUF with the same vocabulary greedily for N tokens, with the same
  LCP-based KV reuse; :func:`check_draft_vocab` refuses one whose vocabulary differs
  (llama.cpp's own rules).

:class:`AcceptanceTracker` keeps the acceptance rate per task type over a rolling
window; below the threshold it switches drafting off for that task type and switches it
back on for a probe after a number of requests.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from lsp_assist.backends.kv_states import common_prefix_len
from lsp_assist.backends.llama_engine import LlamaEngine
from lsp_assist.errors import DraftModelError

# llama.cpp checks vocabularies of a main and a draft model the same way (speculative.cpp)
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5


class Drafter(Protocol):
    """Anything that proposes draft tokens to continue ``history``."""

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Return up to ``n`` tokens likely to follow ``history``."""
        ...


class PromptLookupDrafter:
    """N-gram lookup in the prompt and the generated tokens (no second model).

    ``reset`` indexes a new history; ``propose`` keeps the index current as tokens are
    appended, so each step costs O(n-gram sizes), not O(history).
    """

    def __init__(self, *, max_ngram: int = 3, min_ngram: int = 2) -> None:
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self._tokens: list[int] = []
        self._index: dict[tuple[int, ...], int] = {}
        # how many positions (n-gram end positions) are indexed
        self._indexed = 0

    def reset(self, history: Sequence[int]) -> None:
        """Index ``history`` from scratch."""
        self._tokens = []
        self._index = {}
        self._indexed = 0
        self._extend(history)

    def _extend(self, history: Sequence[int]) -> None:
        if len(history) < len(self._tokens) or list(history[: len(self._tokens)]) != self._tokens:
            self._tokens = []
            self._index = {}
            self._indexed = 0
        self._tokens.extend(history[len(self._tokens) :])
        toks = self._tokens
        # index n-grams ending at position end-1 whose continuation (toks[end]) exists
        last = len(toks) - 1
        for end in range(max(self._indexed, 1), last + 1):
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


class DraftModelDrafter:
    """Greedy drafting with a second, smaller model that shares the main vocabulary."""

    def __init__(self, engine: LlamaEngine) -> None:
        self.engine = engine

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        """Run the draft model greedily for ``n`` tokens after ``history``."""
        eng = self.engine
        if n <= 0 or not history or len(history) + n >= eng.n_ctx:
            return []
        keep = common_prefix_len(eng.tokens, history)
        if keep == len(history):
            keep -= 1
        eng.truncate(keep)
        eng.eval(history[keep:], n_logits=1)
        out: list[int] = []
        tok = eng.argmax(0)
        while True:
            out.append(tok)
            if len(out) >= n or eng.is_eog(tok):
                break
            eng.eval([tok], n_logits=1)
            tok = eng.argmax(0)
        return out


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
