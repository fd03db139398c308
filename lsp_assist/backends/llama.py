"""The in-process backend: a GGUF model run by llama.cpp, behind the backend contract.

:class:`LocalBackend` ties together the modules that each own one part of it:

- :class:`~lsp_assist.backends.llama_engine.LlamaEngine`: the model and its context,
  driven through llama-cpp-python's C API (logits only where read, aborts inside
  ``llama_decode``, batch-invariant steps, the KV cache tracked token by token);
- :class:`~lsp_assist.backends.decode.DecodeLoop`: one request's prompt evaluation and
  greedy decoding, drafts verified in one batch;
- :mod:`~lsp_assist.backends.drafting`: the prompt-lookup and draft-model drafters and
  the acceptance tracker that switches drafting off where it does not pay;
- :class:`~lsp_assist.backends.kv_states.KVStateCache`: per-file KV states.

What stays here is what a request needs around the decode loop: **KV reuse** (each
request evaluates only what follows the longest common prefix with the live sequence),
**per-file state** (when the ``cache_key``, a document URI, changes, the live sequence
is saved and the new file's state restored when that beats re-evaluation), fitting
the prompt into the context, the time caps (:func:`~lsp_assist.backends.base.time_caps`),
one lock over ``generate`` and ``prefill``, and the counters of ``stats()``.

Decoding is greedy (argmax): completions are deterministic, and drafting never changes
the output.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from lsp_assist.backends import healing
from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
    time_caps,
)
from lsp_assist.backends.decode import PADDED_RESTART_SPAN, DecodeLoop, draft_limits
from lsp_assist.backends.drafting import (
    AcceptanceTracker,
    CombinedDrafter,
    Drafter,
    DraftModelDrafter,
    PromptLookupDrafter,
    check_draft_vocab,
)
from lsp_assist.backends.kv_states import KVStateCache, common_prefix_len
from lsp_assist.backends.llama_engine import (
    INVARIANT_MIN_ROWS,
    DecodeAborted,
    LlamaEngine,
)
from lsp_assist.config import Bounded, ModelSettings
from lsp_assist.errors import BackendError, ModelLoadError

logger = logging.getLogger(__name__)


class LocalBackend(Backend):
    """A GGUF model in-process via llama.cpp: KV reuse, per-file states, drafting, cancel."""

    name = "local"
    heals_tokens = True

    def __init__(
        self,
        settings: ModelSettings,
        *,
        model_path: Path | None = None,
        kv_reuse: bool = True,
    ) -> None:
        self.settings = settings
        path = model_path if model_path is not None else Path(settings.model_path).expanduser()
        if not str(path) or str(path) == ".":
            raise ModelLoadError("no model path given (modelPath is empty)")
        self.kv_reuse = kv_reuse
        """Switch for A/B comparisons: False evaluates every prompt from scratch."""
        self.pad_guess = True
        """Prompt lookup puts a one-token guess in a padding row (batch-invariant steps
        only); switch for A/B comparisons."""
        self.short_restart = True
        """With batch-invariant steps, spans restart at ``PADDED_RESTART_SPAN`` (not
        ``draftTokens``) after a rejection; switch for A/B comparisons."""
        self._lock = threading.RLock()
        self._engine = LlamaEngine(
            Path(path),
            n_ctx=settings.context_length,
            n_batch=settings.batch_size,
            threads=settings.threads,
            gpu_layers=settings.gpu_layers,
            max_outputs=max(8, 2 * settings.draft_tokens + 2),
            min_rows=INVARIANT_MIN_ROWS if settings.batch_invariant else 1,
        )
        self._draft_engine: LlamaEngine | None = None
        try:
            self._info = self._engine.info()
            if settings.draft == "model" and settings.draft_model_path:
                self._draft_engine = LlamaEngine(
                    Path(settings.draft_model_path).expanduser(),
                    n_ctx=settings.context_length,
                    n_batch=settings.batch_size,
                    threads=settings.threads,
                    gpu_layers=settings.gpu_layers,
                )
                check_draft_vocab(self._engine, self._draft_engine)
        except BaseException:
            self.close()
            raise
        self._prompt_lookup = PromptLookupDrafter()
        self._drafters: dict[str, Drafter] = {"prompt-lookup": self._prompt_lookup}
        if self._draft_engine is not None:
            model = DraftModelDrafter(self._draft_engine)
            self._drafters["model-only"] = model
            self._drafters["model"] = CombinedDrafter(self._prompt_lookup, model)
        self._drafter: Drafter | None = None
        self.draft_mode = "off"
        if settings.draft == "model" and self._draft_engine is not None:
            self.set_draft_mode("model")
        elif settings.draft != "off":
            self.set_draft_mode("prompt-lookup")
        self.acceptance = AcceptanceTracker(min_acceptance=settings.draft_min_acceptance)
        self.states = KVStateCache(
            settings.kv_cache_mb * 1024 * 1024,
            memory_threshold=settings.kv_memory_threshold,
        )
        self._active_key = ""
        self._counters: dict[str, int] = {
            "requests": 0,
            "prompt_tokens": 0,
            "reused_tokens": 0,
            "generated_tokens": 0,
            "cancelled": 0,
            "timeouts": 0,
            "prefills": 0,
            "state_restores": 0,
        }
        logger.info(
            "loaded %s (%s, %s, n_ctx %d, drafting %s)",
            path,
            self._info.architecture,
            self._info.quantization,
            self._engine.n_ctx,
            self.draft_mode,
        )

    # --- drafting -------------------------------------------------------------------------

    @property
    def draft_modes(self) -> list[str]:
        """The drafting modes this backend can switch to (see :meth:`set_draft_mode`)."""
        return ["off", *self._drafters]

    def set_draft_mode(self, mode: str) -> None:
        """Switch drafting: ``off``, ``prompt-lookup``, ``model`` or ``model-only``.

        ``model`` (what ``draft: model`` loads) is prompt lookup with the draft model
        where the lookup has no match; ``model-only`` drafts with the draft model alone.
        The two need a draft model. For A/B comparisons; the acceptance tracker is kept.
        """
        if mode != "off" and mode not in self._drafters:
            raise BackendError(f"drafting mode {mode!r} unavailable here: {self.draft_modes}")
        with self._lock:
            self._drafter = self._drafters.get(mode)
            self.draft_mode = mode

    # --- metadata -------------------------------------------------------------------------

    @property
    def info(self) -> ModelInfo:
        """Metadata of the loaded model."""
        return self._info

    @property
    def n_ctx(self) -> int:
        """The context size actually allocated."""
        return self._engine.n_ctx

    @property
    def cached_tokens(self) -> list[int]:
        """A copy of the tokens the live KV sequence holds."""
        with self._lock:
            return list(self._engine.tokens)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Return token ids for ``text`` without BOS; ``special`` parses special tokens."""
        return self._engine.tokenize(text, special=special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Return the text of ``tokens`` (special tokens rendered as their text)."""
        return self._engine.detokenize(tokens, special=True)

    # --- KV state ---------------------------------------------------------------------------

    def _activate(self, cache_key: str, prompt: Sequence[int]) -> None:
        """Make the live sequence the best starting point for ``prompt`` of ``cache_key``."""
        eng = self._engine
        if cache_key == self._active_key:
            return
        if self._active_key and eng.tokens:
            self.states.put(self._active_key, eng.state_save())
        self._active_key = cache_key
        live = common_prefix_len(eng.tokens, prompt)
        candidate: tuple[str, int] | None = None
        own = self.states.peek(cache_key) if cache_key else None
        if own is not None:
            candidate = (cache_key, common_prefix_len(own.tokens, prompt))
        other = self.states.best_match(prompt)
        if other is not None and (candidate is None or other[1] > candidate[1] + 32):
            candidate = other
        if candidate is not None and candidate[1] > live + 32:
            # the file's own state becomes the live one; another file's is copied and kept
            key = candidate[0]
            state = self.states.pop(key) if key == cache_key else self.states.peek(key)
            if state is not None and eng.state_restore(state):
                self._counters["state_restores"] += 1
                logger.debug("restored KV state of %s (%d tokens)", key, len(state.tokens))
        if cache_key:
            self.states.discard(cache_key)

    def _fit_prompt(self, prompt: list[int], reserve: int) -> list[int]:
        room = self._engine.n_ctx - reserve
        if len(prompt) <= room:
            return prompt
        logger.warning("prompt of %d tokens cut to %d to fit the context", len(prompt), room)
        bos = self._info.bos_id
        if prompt and bos is not None and prompt[0] == bos:
            return [bos, *prompt[len(prompt) - room + 1 :]]
        return prompt[len(prompt) - room :]

    def _start(self, prompt: list[int], cache_key: str) -> int:
        """Prepare the KV cache for ``prompt``; return how many prompt tokens are reused."""
        eng = self._engine
        if not self.kv_reuse:
            eng.clear()
            self._active_key = cache_key
            return 0
        self._activate(cache_key, prompt)
        reuse = common_prefix_len(eng.tokens, prompt)
        if reuse == len(prompt):
            reuse -= 1  # the last prompt token is evaluated again for its logits
        eng.truncate(reuse)
        return reuse

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        cache_key: str = "",
        cancel: CancelToken | None = None,
    ) -> int:
        """Evaluate ``tokens`` ahead of time; return how many were newly evaluated."""
        if not tokens:
            return 0
        with self._lock:
            eng = self._engine
            if not eng.ctx:
                raise BackendError("the backend is closed")
            prompt = self._fit_prompt(list(tokens), 1)
            self._activate(cache_key, prompt)
            reuse = common_prefix_len(eng.tokens, prompt) if self.kv_reuse else 0
            eng.truncate(reuse)
            self._counters["prefills"] += 1
            abort = (lambda: cancel.cancelled) if cancel is not None else None
            try:
                # between calls only: what is evaluated stays for the completion that
                # cancelled it, which shares the prefix
                eng.eval(prompt[reuse:], n_logits=0, stop=abort)
                model = self._drafters.get("model-only")
                if isinstance(model, DraftModelDrafter) and self.draft_mode.startswith("model"):
                    # the draft model needs the prompt too: without this its first
                    # request after didOpen would evaluate the whole file before drafting
                    model.prefill(prompt, abort)
            except DecodeAborted:
                logger.debug("prefill cancelled after %d tokens", len(eng.tokens) - reuse)
            return len(eng.tokens) - reuse

    # --- generation -------------------------------------------------------------------------

    def _want_draft(self, request: GenerationRequest) -> bool:
        if self._drafter is None:
            return False
        if request.draft is not None:
            return request.draft
        return self.acceptance.should_draft(request.task_type)

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Greedy generation with KV reuse, drafting, stops and cancellation; blocks."""
        t0 = time.perf_counter()
        with self._lock:
            self._engine._check_open()
            if not self._engine.ctx:
                raise BackendError("the backend is closed")
            result = self._generate_locked(request, t0)
        result.finish(t0)
        c = self._counters
        c["requests"] += 1
        c["prompt_tokens"] += result.prompt_tokens
        c["reused_tokens"] += result.reused_tokens
        c["generated_tokens"] += len(result.tokens)
        c["generated_tokens"] += sum(len(branch.tokens) for branch in result.alternatives)
        if result.stop_reason == "cancelled":
            c["cancelled"] += 1
        elif result.stop_reason == "timeout":
            c["timeouts"] += 1
        return result

    def _generate_locked(self, request: GenerationRequest, t0: float) -> GenerationResult:
        eng = self._engine
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        if request.cancel.cancelled:
            result.stop_reason = "cancelled"
            return result
        if not request.prompt_tokens:
            raise BackendError("empty prompt")
        draft_n, span_cap = draft_limits(self.settings.draft_tokens, eng.min_rows)
        reserve = min(max(1, request.max_tokens) + 2 * draft_n + 1, eng.n_ctx // 2)
        prompt = self._fit_prompt(list(request.prompt_tokens), reserve)
        loop = DecodeLoop(eng, request, result, caps=time_caps(self.settings, request), started=t0)
        reuse = self._start(prompt, request.cache_key)
        if not loop.evaluate_prompt(prompt, reuse):
            return result
        drafting = draft_n > 0 and self._drafter is not None and self._want_draft(request)
        drafter = self._drafter if drafting else None
        try:
            if not loop.prepare_drafter(prompt, drafter):
                return result
        except BackendError as exc:
            logger.warning("drafting failed, switched off for this request: %s", exc)
            drafter = None
        # prompt lookup's steps without a match guess one token in the padding row, and
        # with padded steps a span restarts at the one draft that rides on that row
        guess = self._prompt_lookup if drafter is self._prompt_lookup and self.pad_guess else None
        restart = PADDED_RESTART_SPAN if eng.min_rows > 1 and self.short_restart else None
        loop.decode(
            prompt, drafter, span=draft_n, span_cap=span_cap, pad_guess=guess, restart_span=restart
        )
        if request.alternatives > 1 and not result.cancelled:
            result.alternatives = loop.branches(
                prompt,
                drafter,
                span=draft_n,
                span_cap=span_cap,
                pad_guess=guess,
                restart_span=restart,
            )
        if result.drafting:
            self.acceptance.record(request.task_type, result.draft_proposed, result.draft_accepted)
        return result

    # --- status -------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Counters: requests, reuse, KV states held, drafting rate and switch per task type."""
        c = dict(self._counters)
        reuse = c["reused_tokens"] / c["prompt_tokens"] if c["prompt_tokens"] else 0.0
        out: dict[str, object] = {
            "backend": self.name,
            "model": self._info.path,
            **c,
            "kv_reuse": self.kv_reuse,
            "kv_reuse_ratio": reuse,
            "kv_live_tokens": len(self._engine.tokens),
            "active_cache_key": self._active_key,
            "draft_mode": self.draft_mode,
            "drafting": self.acceptance.stats(),
        }
        model = self._drafters.get("model-only")
        if isinstance(model, DraftModelDrafter):
            out.update(model.stats())
        out["pad_guesses"] = self._prompt_lookup.guesses
        out["pad_guesses_accepted"] = self._prompt_lookup.guesses_accepted
        combined = self._drafters.get("model")
        if isinstance(combined, CombinedDrafter):
            out["draft_lookup_steps"] = combined.lookup_steps
            out["draft_model_fallback_steps"] = combined.model_steps
        out.update(self.states.stats())
        return out

    def bounds(self) -> dict[str, Bounded]:
        """The saved KV states (``kvCacheMb``) and the token-healing indexes the process keeps."""
        indexes = Bounded(
            healing.piece_indexes(),
            healing.HEALING_INDEXES,
            "vocabularies",
            "backends/healing.py HEALING_INDEXES",
        )
        return {
            "kv_states.bytes": Bounded(
                self.states.bytes, self.states.max_bytes, "bytes", "kvCacheMb"
            ),
            "healing.indexes": indexes,
        }

    def prepare(self) -> None:
        """Build the token-healing index (~1.2 s for a 151,936-token vocabulary here).

        Built on first use, it landed on the first keystroke that ended in a partial
        token (``print(`` in ``make demo``: 1.0 s of its 1.04 s to the first token).
        """
        with self._lock:
            if self._engine.ctx:
                self._engine.piece_index()

    def close(self) -> None:
        """Free the models and drop saved states."""
        with self._lock:
            if getattr(self, "_draft_engine", None) is not None:
                assert self._draft_engine is not None
                self._draft_engine.close()
                self._draft_engine = None
            if getattr(self, "_engine", None) is not None:
                self._engine.close()
            if hasattr(self, "states"):
                self.states.clear()
