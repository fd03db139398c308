"""llama.cpp's engine as lsp-assist drives it: one model, one context, one tracked sequence.

:class:`LlamaEngine` is a :class:`~lsp_assist.backends.vocab.Vocabulary` loaded with its
weights plus a llama.cpp context, driven through llama-cpp-python's C API rather than
``llama_cpp.Llama``:

- **Logits memory.** :meth:`LlamaEngine.eval` asks llama.cpp for logits only at the
  positions the caller reads (the last prompt token, the token being decoded, the
  positions being verified when drafting), so it never allocates context x vocabulary
  floats (``logits_all``), and the context reserves output rows for only a few
  positions per ubatch (``n_outputs_max``).
- **KV tracking.** ``tokens`` is exactly what the KV cache holds; :meth:`truncate`
  removes positions (``llama_memory_seq_rm``), :meth:`state_save` and
  :meth:`state_restore` serialise the sequence for the per-file state LRU.
- **Aborts.** The caller's abort check runs inside ``llama_decode`` through llama.cpp's
  abort callback, so a long prefill or a verification batch stops within one graph node
  (:class:`DecodeAborted`), and the tracked tokens stay equal to the cache.
- **Batch-invariant decoding.** With ``min_rows`` > 1 every decode step evaluates 2 to 7
  rows (a lone token gets a padding row that is removed again), so plain decoding and
  draft verification run the same llama.cpp kernels (see :data:`INVARIANT_MAX_ROWS`).
- **AMX.** ``use_extra_bufts`` is switched off in the model parameters (by
  :class:`~lsp_assist.backends.vocab.Vocabulary`), which avoids the AMX segfault of
  native builds on Xeons with AMX (see docs/backends.md).
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lsp_assist.backends.healing import PieceIndex, piece_index
from lsp_assist.backends.kv_states import KVState
from lsp_assist.backends.vocab import Vocabulary
from lsp_assist.errors import BackendError, GenerationCancelled, ModelLoadError

logger = logging.getLogger(__name__)

INVARIANT_MIN_ROWS = 2
INVARIANT_MAX_ROWS = 7
"""Rows per decode step that keep llama.cpp's CPU kernels the same for every row.

llama.cpp's llamafile sgemm serves matmuls of 2 or more rows but not of 1 (that goes
to ggml's per-row dot products), and its tiled K-quant matmul starts at 8 rows; the
two round differently. Between 2 and 7 rows each row's result does not depend on the
other rows, which is what makes a token verified inside a draft batch bit-identical
to the same token decoded alone (checked with ggml's eval callback, docs/backends.md).
"""
ABORTABLE_CHUNK = 128
"""Most tokens per llama_decode call when the evaluation may be aborted (a cancel or a
time cap): the next request goes on from the last whole call, and a prompt evaluates
within a few per cent of one call's speed."""
MIN_CHUNK = 32
"""Fewest tokens per abortable call (smaller calls lose more than they save)."""
CHUNK_TARGET_S = 0.25
"""About how long one abortable call of a prompt may take: the chunk is sized from the
prompt rate measured so far, so a cancel waits at most about this long for the chunk it
landed in to finish (see :meth:`LlamaEngine.eval`, ``stop``)."""


class DecodeAborted(GenerationCancelled):
    """llama_decode was aborted by the caller's abort check (a cancel or a time cap)."""


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
        self._prompt_rate = 0.0
        """Prompt tokens per second in calls of MIN_CHUNK or more (0: none measured yet)."""
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
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Append ``tokens`` to the sequence, with logits for the last ``n_logits`` of them.

        Read the logits with :meth:`argmax` (index 0..n_logits-1). Raises ``DecodeAborted``
        when ``abort`` or ``stop`` returns true (the KV cache then keeps what was
        evaluated). With either, the tokens go in calls of :meth:`chunk_size`. ``abort``
        is also checked inside each call (within one graph node); ``stop`` only between
        calls, so it never throws away a call half evaluated. A prompt wants that for a
        cancel: the request cancelled by the next keystroke shares its prompt with the
        next request, and losing the call the cancel landed in meant every request
        started again from the same call boundary and none finished while the user typed.
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
        stoppable = abort is not None or stop is not None
        step = min(self.n_batch, self.chunk_size()) if stoppable else self.n_batch
        bounds = list(range(0, total, step))
        if total - bounds[-1] < n_logits and len(bounds) > 1:
            bounds[-1] = total - n_logits
        bounds.append(total)
        self._abort_check = abort
        batch = self._batch
        pad_outputs = 0
        try:
            for start, end in itertools.pairwise(bounds):
                if (abort is not None and abort()) or (stop is not None and stop()):
                    raise DecodeAborted
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
                t_call = time.perf_counter()
                rc = ll.llama_decode(self.ctx, batch)
                if rc == 0 and real >= MIN_CHUNK:
                    self._observe_rate(real, time.perf_counter() - t_call)
                if rc == 0 and rows > real:
                    ll.llama_memory_seq_rm(self.mem, 0, pos0 + real, -1)
                if rc == 2:
                    self._sync_after_abort_chunk(list(tokens[start:end]))
                    raise DecodeAborted
                if rc != 0:
                    self._sync_after_abort_chunk(list(tokens[start:end]))
                    raise BackendError(f"llama_decode failed with code {rc}")
                self.tokens.extend(tokens[start:end])
                self.evaluated += real
            self._logit_base = n_logits + pad_outputs
        finally:
            self._abort_check = None

    def chunk_size(self) -> int:
        """Tokens per abortable llama_decode call: about CHUNK_TARGET_S of prompt at the
        rate measured so far, between MIN_CHUNK and ABORTABLE_CHUNK."""
        if self._prompt_rate <= 0:
            return ABORTABLE_CHUNK
        sized = int(self._prompt_rate * CHUNK_TARGET_S)
        return max(MIN_CHUNK, min(ABORTABLE_CHUNK, sized // 16 * 16))

    def _observe_rate(self, tokens: int, seconds: float) -> None:
        """Fold one prompt call's speed into the running rate (tokens per second)."""
        if seconds <= 0:
            return
        rate = tokens / seconds
        self._prompt_rate = rate if self._prompt_rate <= 0 else 0.7 * self._prompt_rate + 0.3 * rate

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

    def logits(self, i: int) -> Any:
        """Return the ``i``-th logits row of the last :meth:`eval` (a view: read it at once)."""
        return self._logits_row(i)

    def piece_index(self) -> PieceIndex:
        """Return this vocabulary's :class:`PieceIndex` (token healing), built on first use."""
        return piece_index(
            f"{self.path}:{self.n_vocab}",
            self.n_vocab,
            lambda token: self.piece(token, special=False),
            lambda token: not (self.is_eog(token) or self.is_control(token)),
        )

    def top_tokens(self, i: int, n: int) -> list[int]:
        """Return the ``n`` likeliest tokens of the ``i``-th logits row, best first.

        Ties go to the lower id, as in :meth:`argmax`: the first is always its token.
        """
        row = self._logits_row(i)
        n = max(1, min(n, row.shape[0]))
        best = np.argpartition(-row, n - 1)[:n]
        return [int(t) for t in best[np.lexsort((best, -row[best]))]]

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
