"""Alternatives on the real model: branches on the runners-up of the first token.

A request for three suggestions must give, first, exactly what a one-item request gives,
then two branches whose first tokens are the next likeliest ones, each decoded
greedily from the same prompt (so it equals a one-item request on prompt + that token).
"""

from __future__ import annotations

from typing import Any

import pytest

from lsp_assist.backends.base import GenerationRequest
from lsp_assist.backends.llama import LocalBackend

from .conftest import code_text
from .identity import IDENTITY_CAP_S

pytestmark = pytest.mark.slow


def _uncapped(prompt: list[int], max_tokens: int, **extra: Any) -> GenerationRequest:
    """A request whose time caps cannot fire: a cap hit is not a divergence (identity.py)."""
    return GenerationRequest(
        prompt_tokens=prompt,
        max_tokens=max_tokens,
        prompt_timeout_s=IDENTITY_CAP_S,
        generation_timeout_s=IDENTITY_CAP_S,
        **extra,
    )


def test_greedy_first_then_branches_on_the_next_first_tokens(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(700))
    single = smol.generate(_uncapped(prompt, 10))
    streamed: list[str] = []
    multi = smol.generate(_uncapped(prompt, 10, alternatives=3, on_text=streamed.append))
    assert not single.cancelled and not multi.cancelled, (single.stop_reason, multi.stop_reason)
    assert single.tokens and single.alternatives == []
    assert (multi.text, multi.tokens) == (single.text, single.tokens)
    assert "".join(streamed) == multi.text  # only the first suggestion streams
    assert len(multi.alternatives) == 2
    firsts = [single.tokens[0], *(branch.tokens[0] for branch in multi.alternatives)]
    assert len(set(firsts)) == 3, firsts
    for branch in multi.alternatives:
        assert branch.complete and branch.text == smol.detokenize(branch.tokens)
        rest = smol.generate(_uncapped([*prompt, branch.tokens[0]], 9))
        assert not rest.cancelled, rest.stop_reason
        assert list(branch.tokens[1:]) == rest.tokens, (branch.text, rest.text)


def test_runners_up_are_in_logit_order(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(500, "lsp_assist/backends/streaming.py"))
    multi = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4, alternatives=4))
    engine = smol._engine
    engine.truncate(len(prompt) - 1)
    engine.eval(prompt[-1:], n_logits=1)
    ranked = [t for t in engine.top_tokens(0, 16) if not engine.is_eog(t)]
    ranked = [t for t in ranked if not engine.is_control(t)]
    assert ranked[0] == engine.argmax(0) == multi.tokens[0]
    assert [branch.tokens[0] for branch in multi.alternatives] == ranked[1:4]


def test_a_cancelled_request_has_no_branches(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(400))
    request = GenerationRequest(prompt_tokens=prompt, max_tokens=10, alternatives=3)
    request.cancel.cancel()
    result = smol.generate(request)
    assert result.cancelled and result.alternatives == []
