"""Checks shared by the CPU and GPU tests of drafting identity and batch invariance."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.backends.llama import LocalBackend


def logits_row(backend: LocalBackend, i: int) -> Any:
    """Return a copy of the ``i``-th logits row of the backend's last decode."""
    return backend._engine._logits_row(i).copy()


def check_rows_bit_identical(
    backend: LocalBackend, prompt: Sequence[int], follow: Sequence[int], row_counts: Sequence[int]
) -> None:
    """Assert ``follow``'s logits are the same bits decoded one by one or ``rows`` at once."""
    eng = backend._engine
    eng.clear()
    eng.eval(prompt, n_logits=0)
    alone = []
    for tok in follow:
        eng.eval([tok], n_logits=1)
        alone.append(logits_row(backend, 0))
    assert len(eng.tokens) == len(prompt) + len(follow)  # the padding row was removed
    assert eng.check_sync()
    for rows in row_counts:
        eng.truncate(len(prompt))
        eng.eval(follow[:rows], n_logits=rows)
        for i in range(rows):
            assert (logits_row(backend, i) == alone[i]).all(), f"row {i} of {rows} differs"


IDENTITY_CAP_S = 1800.0
"""Time caps of the identity runs: a cap hit is not a divergence, and on a shared 2-core
machine (load ~7) 64 greedy tokens took over the fixtures' 60 s."""


def plain_and_drafted(
    backend: LocalBackend, prompt: list[int], max_tokens: int
) -> tuple[GenerationResult, GenerationResult]:
    """Generate greedily without and with drafting, each from an empty KV cache.

    Both runs must end by themselves (end of generation, ``max_tokens`` or a stop), so
    that comparing their tokens compares the decoding, not how busy the machine was.
    """
    outputs = []
    for draft in (False, True):
        backend._engine.clear()
        result = backend.generate(
            GenerationRequest(
                prompt_tokens=prompt,
                max_tokens=max_tokens,
                draft=draft,
                prompt_timeout_s=IDENTITY_CAP_S,
                generation_timeout_s=IDENTITY_CAP_S,
            )
        )
        assert not result.cancelled, f"draft={draft}: stopped by {result.stop_reason}"
        outputs.append(result)
    return outputs[0], outputs[1]
