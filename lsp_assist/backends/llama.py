"""The in-process backend: a GGUF model run by llama.cpp through llama-cpp-python's C API.

Why the low-level API rather than ``llama_cpp.Llama``:

- **Logits memory.** The decode loop asks llama.cpp for logits only at the positions it
  reads (the last prompt token, the token being decoded, the positions being verified
  when drafting), so it never allocates context x vocabulary floats (``logits_all``).
- **KV reuse.** The tokens held by the live sequence are tracked here; each request
  evaluates only what follows the longest common prefix with them.
- **Per-file state.** When the ``cache_key`` (a document URI) changes, the live
  sequence is serialised into :class:`~lsp_assist.backends.kv_states.KVStateCache` and
  the new file's state is restored from it when that beats re-evaluation.
- **Cancellation.** A cancel flag or a time cap is checked between tokens and, during
  prompt evaluation, inside ``llama_decode`` through llama.cpp's abort callback, so a
  long prefill stops within one graph node rather than at the end of the batch.
- **Speculative drafting** with verification in one batch and removal of rejected
  tokens from the KV cache (``llama_memory_seq_rm``).
- **Batch-invariant decoding.** Every decode step evaluates 2 to 7 rows (a lone token
  gets a padding row that is removed again), so plain decoding and draft verification
  run the same llama.cpp kernels and greedy output is identical with drafting on or
  off (see :data:`INVARIANT_MAX_ROWS`).
- **AMX.** ``use_extra_bufts`` is switched off in the model parameters, which avoids the
  AMX segfault of native builds on Xeons with AMX (see docs/backends.md).

Decoding is greedy (argmax): completions are deterministic, and drafting never changes
the output.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
)
from lsp_assist.backends.drafting import AcceptanceTracker, Drafter, PromptLookupDrafter
from lsp_assist.backends.kv_states import KVState, KVStateCache, common_prefix_len
from lsp_assist.backends.streaming import TextStream
from lsp_assist.backends.vocab import Vocabulary
from lsp_assist.backends.vocab import read_model_info as read_model_info  # for older callers
from lsp_assist.config import ModelSettings
from lsp_assist.errors import BackendError, DraftModelError, ModelLoadError

logger = logging.getLogger(__name__)
# llama.cpp checks vocabularies of a main and a draft model the same way (speculative.cpp)
VOCAB_MAX_SIZE_DIFFERENCE = 128
VOCAB_CHECK_START_TOKEN_ID = 5

INVARIANT_MIN_ROWS = 2
INVARIANT_MAX_ROWS = 7
"""Rows per decode step that keep llama.cpp's CPU kernels the same for every row.

llama.cpp's llamafile sgemm serves matmuls of 2 or more rows but not of 1 (that goes
to ggml's per-row dot products), and its tiled K-quant matmul starts at 8 rows; the
two round differently. Between 2 and 7 rows each row's result does not depend on the
other rows, which is what makes a token verified inside a draft batch bit-identical
to the same token decoded alone (checked with ggml's eval callback, docs/backends.md).
"""


class _Aborted(Exception):
    """llama_decode was aborted by the abort callback (cancel or time cap)."""


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


class LlamaEngine(Vocabulary):
    """One llama.cpp model and context with a single tracked sequence (seq 0).

    The model and its vocabulary are loaded by :class:`Vocabulary`; ``vocab_only``
    stops there (no context). ``tokens`` is exactly what the KV cache holds at
    positions 0..len-1.
    """

    def __init__(
        self,
        path: Path,
        *,
        n_ctx: int = 4096,
        n_batch: int = 512,
        threads: int = 0,
        gpu_layers: int = 0,
        vocab_only: bool = False,
        flash_attn: bool | None = None,
        max_outputs: int = 16,
        min_rows: int = 1,
    ) -> None:
        self.ctx: Any = None
        self._batch: Any = None
        super().__init__(path, vocab_only=vocab_only, gpu_layers=gpu_layers)
        ll = self._ll
        self.tokens: list[int] = []
        self.max_outputs = max(1, max_outputs)
        self.n_ctx = 0
        self.n_batch = 0
        self.evaluated = 0
        self.min_rows = max(1, min_rows)
        """Rows per ``llama_decode``: shorter steps are padded (see INVARIANT_MAX_ROWS)."""
        self.pad_logits = True
        """Whether padding rows need logits: set by :meth:`_output_rows_invariant` at load."""
        self._abort_check: Callable[[], bool] | None = None
        if vocab_only:
            return
        threads = threads or _default_threads()
        cparams = ll.llama_context_default_params()
        cparams.n_ctx = n_ctx
        cparams.n_batch = n_batch
        cparams.n_ubatch = min(n_batch, 512)
        cparams.n_seq_max = 1
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.no_perf = True
        if hasattr(cparams, "n_outputs_max"):
            # logits are read at a few positions per batch; reserving them for every
            # position of a ubatch costs n_ubatch x n_vocab floats (514 MB for Gemma)
            cparams.n_outputs_max = max(1, max_outputs)
        if hasattr(cparams, "flash_attn_type"):
            # off unless asked for: llama.cpp's CPU flash attention takes a split-KV path
            # for one row (KV >= 512) and a tiled one from its Q tile size, so it is
            # row-invariant only between those; plain attention needs no such care
            cparams.flash_attn_type = 0 if flash_attn is None or not flash_attn else 1
        if hasattr(cparams, "swa_full"):
            # keep every position of sliding-window layers so prefixes can be reused
            cparams.swa_full = True
        self.ctx = ll.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            self.close()
            raise ModelLoadError(f"llama.cpp could not create a context for {path} (n_ctx={n_ctx})")
        self.n_ctx = int(ll.llama_n_ctx(self.ctx))
        self.n_batch = int(ll.llama_n_batch(self.ctx))
        self.mem = ll.llama_get_memory(self.ctx)
        self._batch = ll.llama_batch_init(max(self.n_batch, self.min_rows), 0, 1)
        if self.min_rows > 1 and (
            ll.llama_model_is_recurrent(self.model) or ll.llama_model_is_hybrid(self.model)
        ):
            # a padding row cannot be removed from a recurrent state again
            self.min_rows = 1
        if self.min_rows > 1:
            self.pad_logits = not self._output_rows_invariant()

        def _abort(_data: ctypes.c_void_p) -> bool:
            check = self._abort_check
            try:
                return bool(check is not None and check())
            except Exception:  # pragma: no cover - never raise into C
                return True

        self._abort_cb = ll.ggml_abort_callback(_abort)
        ll.llama_set_abort_callback(self.ctx, self._abort_cb, None)

    # --- KV cache ---------------------------------------------------------------------

    def truncate(self, n: int) -> None:
        """Keep only the first ``n`` tokens of the sequence in the KV cache."""
        if n >= len(self.tokens):
            return
        ok = self._ll.llama_memory_seq_rm(self.mem, 0, n, -1)
        if ok:
            del self.tokens[n:]
        else:  # partial removal unsupported (recurrent models): start over
            self.clear()

    def clear(self) -> None:
        """Empty the sequence."""
        self._ll.llama_memory_seq_rm(self.mem, 0, -1, -1)
        self.tokens = []

    def eval(
        self,
        tokens: Sequence[int],
        *,
        n_logits: int = 1,
        abort: Callable[[], bool] | None = None,
    ) -> None:
        """Append ``tokens`` to the sequence, with logits for the last ``n_logits`` of them.

        Read the logits with :meth:`argmax` (index 0..n_logits-1). Raises ``_Aborted``
        when ``abort`` returns true (the KV cache then keeps what was evaluated).
        """
        ll = self._ll
        total = len(tokens)
        if total == 0:
            return
        if not self.ctx:
            raise BackendError(f"the model {self.path.name} is closed")
        if n_logits > self.max_outputs:
            raise BackendError(f"{n_logits} outputs requested, at most {self.max_outputs}")
        if len(self.tokens) + total > self.n_ctx:
            raise BackendError(
                f"context full: {len(self.tokens)} + {total} tokens > n_ctx {self.n_ctx}"
            )
        n_logits = max(0, min(n_logits, total))
        bounds = list(range(0, total, self.n_batch))
        if total - bounds[-1] < n_logits and len(bounds) > 1:
            bounds[-1] = total - n_logits
        bounds.append(total)
        self._abort_check = abort
        batch = self._batch
        pad_outputs = 0
        try:
            for start, end in itertools.pairwise(bounds):
                if abort is not None and abort():
                    raise _Aborted
                pos0 = len(self.tokens)
                real = end - start
                outputs = max(0, end - max(start, total - n_logits))
                rows = real
                pad_outputs = 0
                if real < self.min_rows and pos0 + self.min_rows <= self.n_ctx:
                    # padding rows repeat the last token; where a one-row output
                    # projection rounds differently (see pad_logits) they get logits too
                    rows = self.min_rows
                    if outputs and self.pad_logits:
                        pad_outputs = max(0, self.min_rows - outputs)
                for i in range(rows):
                    batch.token[i] = tokens[min(start + i, end - 1)]
                    batch.pos[i] = pos0 + i
                    batch.n_seq_id[i] = 1
                    batch.seq_id[i][0] = 0
                    if i < real:
                        batch.logits[i] = 1 if start + i >= total - n_logits else 0
                    else:
                        batch.logits[i] = 1 if i - real < pad_outputs else 0
                batch.n_tokens = rows
                rc = ll.llama_decode(self.ctx, batch)
                if rc == 0 and rows > real:
                    ll.llama_memory_seq_rm(self.mem, 0, pos0 + real, -1)
                if rc == 2:
                    self._sync_after_abort_chunk(list(tokens[start:end]))
                    raise _Aborted
                if rc != 0:
                    self._sync_after_abort_chunk(list(tokens[start:end]))
                    raise BackendError(f"llama_decode failed with code {rc}")
                self.tokens.extend(tokens[start:end])
                self.evaluated += real
            self._logit_base = n_logits + pad_outputs
        finally:
            self._abort_check = None

    def _sync_after_abort_chunk(self, chunk: list[int]) -> None:
        """After an aborted or failed decode, keep the tracked tokens equal to the cache."""
        base = len(self.tokens)
        pos_max = int(self._ll.llama_memory_seq_pos_max(self.mem, 0))
        if pos_max + 1 < base:  # llama.cpp dropped more than the failed batch
            del self.tokens[max(0, pos_max + 1) :]
            return
        kept = min(max(0, pos_max + 1 - base), len(chunk))
        self.tokens.extend(chunk[:kept])
        self._ll.llama_memory_seq_rm(self.mem, 0, len(self.tokens), -1)

    def check_sync(self) -> bool:
        """Return True when the cache holds exactly ``tokens``; repair the tracking if not."""
        pos_max = int(self._ll.llama_memory_seq_pos_max(self.mem, 0))
        if pos_max + 1 == len(self.tokens):
            return True
        logger.warning(
            "KV cache holds %d positions but %d tokens were tracked; resynchronised",
            pos_max + 1,
            len(self.tokens),
        )
        if pos_max + 1 < len(self.tokens):
            del self.tokens[max(0, pos_max + 1) :]
        else:
            self.clear()
        return False

    def _output_rows_invariant(self) -> bool:
        """Whether logits read from one output row equal those read from several, bit for bit.

        The output projection is a matmul over the rows that have logits: with an F32 or
        F16 output matrix llama.cpp's CPU backend computes one row with ggml's dot
        products and several with the llamafile sgemm, which round differently; with
        Q8_0 (the embedded Gemma) the two agree. A padding row with logits costs a whole
        extra row of the output projection (262,144 vocabulary rows for Gemma, about 40 %
        of a decode step), so it is only paid where this check at load says so.
        """
        probe = [t % self.n_vocab for t in range(100, 107)]
        try:
            self.pad_logits = False
            self.clear()
            self.eval(probe[:4], n_logits=0)
            alone = []
            for tok in probe[4:6]:
                self.eval([tok], n_logits=1)
                alone.append(self._logits_row(0).copy())
            self.truncate(4)
            self.eval(probe[4:7], n_logits=3)
            return all(np.array_equal(alone[i], self._logits_row(i)) for i in range(2))
        except BackendError:
            return False
        finally:
            self.clear()

    def _logits_row(self, i: int) -> Any:
        ptr = self._ll.llama_get_logits_ith(self.ctx, i - self._logit_base)
        if not ptr:
            raise BackendError(f"no logits for output {i}")
        return np.ctypeslib.as_array(ptr, shape=(self.n_vocab,))

    def argmax(self, i: int) -> int:
        """Return the greedy token of the ``i``-th logits row of the last :meth:`eval`."""
        return int(self._logits_row(i).argmax())

    def state_save(self) -> KVState:
        """Serialise the sequence (into a buffer kept as is: no extra copy)."""
        ll = self._ll
        self.check_sync()
        size = int(ll.llama_state_seq_get_size(self.ctx, 0))
        buf = (ctypes.c_uint8 * size)()
        written = int(ll.llama_state_seq_get_data(self.ctx, buf, size, 0))
        data: Any = buf if written == size else bytes(memoryview(buf)[:written])
        return KVState(tokens=list(self.tokens), data=data)

    def state_restore(self, state: KVState) -> bool:
        """Replace the sequence with a saved one; return False (and clear) on failure."""
        ll = self._ll
        self.clear()
        data: Any = state.data
        if isinstance(data, ctypes.Array):
            buf: Any = data
        else:
            buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        ok = int(ll.llama_state_seq_set_data(self.ctx, buf, len(data), 0))
        if ok == 0:
            self.clear()
            return False
        self.tokens = list(state.tokens)
        pos_max = int(ll.llama_memory_seq_pos_max(self.mem, 0))
        if pos_max + 1 != len(self.tokens):
            logger.warning(
                "restored KV state holds %d positions, expected %d", pos_max + 1, len(self.tokens)
            )
            self.clear()
            return False
        return True

    def close(self) -> None:
        """Free the context and the model (idempotent)."""
        ll = self._ll
        if self._batch is not None:
            ll.llama_batch_free(self._batch)
            self._batch = None
        if self.ctx:
            ll.llama_free(self.ctx)
            self.ctx = None
        super().close()


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


class LocalBackend(Backend):
    """A GGUF model in-process via llama.cpp: KV reuse, per-file states, drafting, cancel."""

    name = "local"

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
        self._drafter: Drafter | None
        if settings.draft == "model" and self._draft_engine is not None:
            self._drafter = DraftModelDrafter(self._draft_engine)
            self.draft_mode = "model"
        elif settings.draft == "off":
            self._drafter = None
            self.draft_mode = "off"
        else:
            self._drafter = self._prompt_lookup
            self.draft_mode = "prompt-lookup"
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
                eng.eval(prompt[reuse:], n_logits=0, abort=abort)
            except _Aborted:
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
        if result.stop_reason == "cancelled":
            c["cancelled"] += 1
        elif result.stop_reason == "timeout":
            c["timeouts"] += 1
        return result

    def _generate_locked(self, request: GenerationRequest, t0: float) -> GenerationResult:
        eng = self._engine
        settings = self.settings
        cancel = request.cancel
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        if cancel.cancelled:
            result.stop_reason = "cancelled"
            return result
        if not request.prompt_tokens:
            raise BackendError("empty prompt")
        draft_n = max(0, settings.draft_tokens)
        span_cap = 2 * draft_n
        if eng.min_rows > 1:
            # verification rows = pending token + drafts; 8 or more switch kernels
            draft_n = min(draft_n, INVARIANT_MAX_ROWS - 1)
            span_cap = min(span_cap, INVARIANT_MAX_ROWS - 1)
        reserve = min(max(1, request.max_tokens) + 2 * draft_n + 1, eng.n_ctx // 2)
        prompt = self._fit_prompt(list(request.prompt_tokens), reserve)
        prompt_timeout = (
            request.prompt_timeout_s
            if request.prompt_timeout_s is not None
            else settings.prompt_timeout_ms / 1000.0
        )
        gen_timeout = (
            request.generation_timeout_s
            if request.generation_timeout_s is not None
            else settings.generation_timeout_ms / 1000.0
        )
        prompt_deadline = t0 + prompt_timeout

        def prompt_abort() -> bool:
            return cancel.cancelled or time.perf_counter() > prompt_deadline

        reuse = self._start(prompt, request.cache_key)
        result.reused_tokens = reuse
        try:
            eng.eval(prompt[reuse:], n_logits=1, abort=prompt_abort)
        except _Aborted:
            result.stop_reason = "cancelled" if cancel.cancelled else "timeout"
            result.prefill_ms = (time.perf_counter() - t0) * 1000.0
            return result
        t_prefill = time.perf_counter()
        result.prefill_ms = (t_prefill - t0) * 1000.0
        gen_deadline = t_prefill + gen_timeout

        def step_abort() -> bool:
            # checked between graph nodes: a cancel lands within a step (a verification
            # batch of 7 rows takes ~60 ms here) rather than after it
            return cancel.cancelled or time.perf_counter() > gen_deadline

        pending = eng.argmax(0)
        result.ttft_ms = (time.perf_counter() - t0) * 1000.0

        drafting = draft_n > 0 and self._drafter is not None and self._want_draft(request)
        span = draft_n
        drafter = self._drafter
        if drafting and isinstance(drafter, PromptLookupDrafter):
            drafter.reset(prompt)
        result.drafting = drafting
        stream = TextStream(request)
        generated = result.tokens
        max_tokens = max(1, request.max_tokens)

        def emit(token: int) -> bool:
            """Accept one generated token; return True when generation is done."""
            if eng.is_eog(token) or eng.is_control(token):
                result.stop_reason = "eos"
                return True
            generated.append(token)
            if stream.feed(eng.piece(token, special=True)):
                result.stop_reason = stream.reason
                return True
            if len(generated) >= max_tokens:
                result.stop_reason = "length"
                return True
            return False

        while True:
            if emit(pending):
                break
            if cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            if time.perf_counter() > gen_deadline:
                result.stop_reason = "timeout"
                break
            base = len(eng.tokens)
            room = min(max_tokens - len(generated), eng.n_ctx - base - 1)
            if room <= 0:
                result.stop_reason = "length"
                break
            drafts: list[int] = []
            if drafting and drafter is not None:
                try:
                    drafts = drafter.propose([*prompt, *generated], min(span, room - 1))
                except (BackendError, _Aborted) as exc:
                    logger.warning("drafting failed, switched off for this request: %s", exc)
                    drafting = False
            try:
                eng.eval([pending, *drafts], n_logits=1 + len(drafts), abort=step_abort)
            except _Aborted:
                result.stop_reason = "cancelled" if cancel.cancelled else "timeout"
                break
            nxt = eng.argmax(0)
            accepted = 0
            done = False
            for i, d in enumerate(drafts):
                if nxt != d:
                    break
                accepted += 1
                done = emit(d)
                if done:
                    break
                nxt = eng.argmax(i + 1)
            if drafts:
                result.draft_proposed += len(drafts)
                result.draft_accepted += accepted
                # adaptive span: a run of full acceptances (code being copied) earns longer
                # drafts, up to twice draftTokens; a rejection falls back to draftTokens
                span = min(span_cap, span * 2) if accepted == len(drafts) else draft_n
            if done:
                break
            eng.truncate(base + 1 + accepted)
            pending = nxt

        result.text = stream.finish()
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
        out.update(self.states.stats())
        return out

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
