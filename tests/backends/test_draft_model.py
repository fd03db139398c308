"""Drafting with a draft model: the vocabulary check, confidence cut-off, the combined
drafter, the draft model's prompt under the request's cancel, and the off switch.

Tiny GGUFs (tests/support/tiny_gguf.py) for the behaviour; the real Qwen2.5-Coder pair's
vocabularies (vocabulary-only loads, fast) where they are installed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest
from lsp_assist.backends.drafting import (
    CombinedDrafter,
    DraftModelDrafter,
    check_draft_vocab,
)
from lsp_assist.backends.llama import LocalBackend
from lsp_assist.backends.llama_engine import LlamaEngine
from lsp_assist.config import ModelSettings
from lsp_assist.errors import BackendError, DraftModelError
from tests.support.tiny_gguf import default_words, write_tiny_gguf

from .conftest import COPY_SOURCE
from .identity import plain_and_drafted

pytestmark = pytest.mark.slow

QWEN = Path.home() / ".cache" / "lsp-assist" / "models"
QWEN_15 = QWEN / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_05 = QWEN / "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"


def _settings(**kw: Any) -> ModelSettings:
    base: dict[str, Any] = {
        "context_length": 512,
        "prompt_timeout_ms": 60_000,
        "generation_timeout_ms": 60_000,
        "draft": "prompt-lookup",
        "batch_invariant": True,
    }
    base.update(kw)
    return ModelSettings(**base)


def _pair(tmp_path: Path, draft_seed: int, **kw: Any) -> LocalBackend:
    main = write_tiny_gguf(tmp_path / "main.gguf")
    draft = write_tiny_gguf(tmp_path / f"draft{draft_seed}.gguf", seed=draft_seed)
    settings = _settings(draft="model", draft_model_path=str(draft), **kw)
    return LocalBackend(settings, model_path=main)


# --- the vocabulary check ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        (
            {"words": default_words("x")},
            r"differs from main.gguf at token \d+ .*vocabularies differ",
        ),
        (
            {"words": [*default_words(), *(f"w{i}" for i in range(200))]},
            r"has 520 tokens, main.gguf has 320: the vocabularies differ",
        ),
        ({"eos": "<fim_middle>"}, r"another EOS token \(5\) than main.gguf \(2\)"),
        ({"bos": "<fim_prefix>"}, r"another BOS token \(3\) than main.gguf \(1\)"),
    ],
    ids=["token-text", "size", "eos", "bos"],
)
def test_draft_vocab_check_names_each_mismatch(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    main = write_tiny_gguf(tmp_path / "main.gguf")
    other = write_tiny_gguf(tmp_path / "other.gguf", seed=1, **kwargs)
    settings = _settings(draft="model", draft_model_path=str(other))
    with pytest.raises(DraftModelError, match=message):
        LocalBackend(settings, model_path=main)


@pytest.mark.skipif(not (QWEN_15.is_file() and QWEN_05.is_file()), reason="Qwen pair absent")
def test_qwen_coder_pair_passes_the_check_and_smollm2_does_not() -> None:
    from lsp_assist.backends.models import small_model_path

    main = LlamaEngine(QWEN_15, vocab_only=True)
    draft = LlamaEngine(QWEN_05, vocab_only=True)
    smol = LlamaEngine(small_model_path(), vocab_only=True)
    try:
        assert main.n_vocab == draft.n_vocab == 151936
        check_draft_vocab(main, draft)  # every token text from id 5 on compared
        with pytest.raises(DraftModelError, match=r"SmolLM2.*another BOS token"):
            check_draft_vocab(main, smol)
    finally:
        for eng in (main, draft, smol):
            eng.close()


# --- the draft model drafter -------------------------------------------------------------


def test_draft_model_stops_drafting_below_p_min(tmp_path: Path) -> None:
    path = write_tiny_gguf(tmp_path / "d.gguf", seed=3)
    eng = LlamaEngine(path, n_ctx=256)
    try:
        history = [1, *eng.tokenize("abc def")]
        eager = DraftModelDrafter(eng, p_min=0.0)
        eager.reset(history)
        assert len(eager.propose(history, 4)) == 4
        # a random tiny model is never sure of anything: only the step's first token
        timid = DraftModelDrafter(eng, p_min=0.99)
        timid.reset(history)
        assert len(timid.propose(history, 4)) == 1
        # the prompt was evaluated once, by reset: propose used its logits
        assert eager.catchup_tokens == len(history) and eager.steps == 1 + 3
    finally:
        eng.close()


def test_combined_drafting_is_identical_and_uses_both_sources(tmp_path: Path) -> None:
    backend = _pair(tmp_path, draft_seed=0)  # the draft is the main model: all accepted
    try:
        assert backend.draft_mode == "model"
        combined = backend._drafters["model"]
        assert isinstance(combined, CombinedDrafter)
        prompt = [1, *backend.tokenize("abc def abc def ab abc def ghi abc")]
        plain, drafted = plain_and_drafted(backend, prompt, 48)
        assert drafted.tokens == plain.tokens
        assert drafted.draft_accepted > 0
        assert combined.lookup_steps > 0 and combined.model_steps > 0
        stats = backend.stats()
        assert stats["draft_lookup_steps"] == combined.lookup_steps
        assert stats["draft_model_steps"] > 0  # type: ignore[operator]
    finally:
        backend.close()


def test_draft_mode_switches_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    backend = _pair(tmp_path, draft_seed=5)
    try:
        assert backend.draft_modes == ["off", "prompt-lookup", "model-only", "model"]
        prompt = [1, *backend.tokenize("abc def abc def ab")]
        for mode in ("model-only", "prompt-lookup", "off"):
            backend.set_draft_mode(mode)
            result = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=12))
            assert result.drafting == (mode != "off"), mode
        with pytest.raises(BackendError, match="unavailable"):
            backend.set_draft_mode("eagle")
    finally:
        backend.close()


def test_prefill_evaluates_the_prompt_in_the_draft_model_too(tmp_path: Path) -> None:
    backend = _pair(tmp_path, draft_seed=5)
    try:
        draft = backend._draft_engine
        assert draft is not None
        prompt = [1, *backend.tokenize("abc def ghi jkl " * 8)]
        backend.prefill(prompt)
        assert draft.tokens == prompt
        before = backend.stats()["draft_model_catchup_tokens"]
        backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4, draft=True))
        after = backend.stats()["draft_model_catchup_tokens"]
        # the request re-evaluated the last prompt token, then caught up on at most the
        # 4 tokens generated: not the 33-token prompt
        assert 1 <= after - before <= 1 + 4  # type: ignore[operator]
    finally:
        backend.close()


def test_a_cancel_during_the_draft_models_prompt_ends_the_request(tmp_path: Path) -> None:
    backend = _pair(tmp_path, draft_seed=5)
    try:
        draft = backend._draft_engine
        assert draft is not None
        cancel = CancelToken()
        real_eval = draft.eval

        def cancelled_eval(tokens: Sequence[int], **kw: Any) -> None:
            cancel.cancel()  # the user typed on while the draft model read the prompt
            real_eval(tokens, **kw)

        draft.eval = cancelled_eval  # type: ignore[method-assign]
        prompt = [1, *backend.tokenize("abc def ghi")]
        result = backend.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=8, draft=True, cancel=cancel)
        )
        assert result.stop_reason == "cancelled" and result.tokens == []
        draft.eval = real_eval  # type: ignore[method-assign]
        assert draft.check_sync()
        again = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=8, draft=True))
        assert again.stop_reason in ("length", "eos") and again.draft_proposed > 0
    finally:
        backend.close()


def test_tracker_switches_a_failing_draft_model_off(tmp_path: Path) -> None:
    # seed 5 drafts for another model: its drafts are mostly rejected (rate < 0.5)
    backend = _pair(tmp_path, draft_seed=5, draft_min_acceptance=0.5)
    try:
        backend.set_draft_mode("model-only")
        drafting = []
        for i in range(6):
            prompt = [1, *backend.tokenize(f"abc def {'ghi ' * i}")]
            result = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=24))
            drafting.append(result.drafting)
        stats = backend.stats()["drafting"]["completion"]  # type: ignore[index]
        assert stats["acceptance_rate"] < 0.5
        assert stats["switched_off"] == 1 and not stats["enabled"]
        # drafted until the window held 24 proposed tokens, then not any more
        assert drafting[0] and not drafting[-1]
        assert drafting == sorted(drafting, reverse=True)
    finally:
        backend.close()


def test_padding_row_guesses_keep_the_output_and_stay_out_of_the_draft_figures(
    smol: LocalBackend,
) -> None:
    assert smol._engine.min_rows == 2
    prompt = smol.tokenize(COPY_SOURCE)
    smol.pad_guess = False
    plain, no_guess = plain_and_drafted(smol, prompt, 48)
    before = smol.stats()["pad_guesses"]
    assert before == 0
    smol.pad_guess = True
    _, guessing = plain_and_drafted(smol, prompt, 48)
    stats = smol.stats()
    assert guessing.tokens == no_guess.tokens == plain.tokens
    assert stats["pad_guesses"] > 0  # type: ignore[operator]
    assert 0 <= stats["pad_guesses_accepted"] <= stats["pad_guesses"]  # type: ignore[operator]
    # guesses fill steps the lookup had nothing for: they are not counted as its drafts
    assert guessing.draft_accepted <= guessing.draft_proposed
