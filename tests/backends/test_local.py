"""The in-process backend on real models: reuse, per-file states, cancel, caps, drafting."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest
from lsp_assist.backends.llama import LocalBackend
from lsp_assist.backends.llama_engine import ABORTABLE_CHUNK
from lsp_assist.config import ModelSettings
from lsp_assist.errors import DraftModelError, ModelLoadError
from tests.support.tiny_gguf import default_words, write_tiny_gguf

from .conftest import COPY_SOURCE, code_text
from .identity import check_rows_bit_identical, plain_and_drafted

pytestmark = pytest.mark.slow


def _settings(**kw: Any) -> ModelSettings:
    base: dict[str, Any] = {
        "context_length": 1024,
        "prompt_timeout_ms": 60_000,
        "generation_timeout_ms": 60_000,
        # drafting is off by default; these tests are of drafting and its identity
        "draft": "prompt-lookup",
        "batch_invariant": True,
    }
    base.update(kw)
    return ModelSettings(**base)


# --- loading -------------------------------------------------------------------------


def test_missing_model_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        LocalBackend(_settings(), model_path=tmp_path / "nope.gguf")


def test_not_gguf_model(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_text("<html>404 not found</html>" * 10)
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        LocalBackend(_settings(), model_path=path)


def test_truncated_model(tmp_path: Path, smol_path: Path) -> None:
    path = tmp_path / "cut.gguf"
    with smol_path.open("rb") as fh:
        path.write_bytes(fh.read(5_000_000))
    with pytest.raises(ModelLoadError, match="truncated"):
        LocalBackend(_settings(), model_path=path)


def test_empty_model_path() -> None:
    with pytest.raises(ModelLoadError, match="no model path"):
        LocalBackend(_settings(model_path=""))


def test_tiny_gguf_metadata_and_fim(tmp_path: Path) -> None:
    backend = LocalBackend(
        _settings(context_length=256), model_path=write_tiny_gguf(tmp_path / "t.gguf")
    )
    try:
        info = backend.info
        assert info.architecture == "llama"
        assert info.has_fim and (info.fim_prefix_id, info.fim_suffix_id, info.fim_middle_id) == (
            3,
            4,
            5,
        )
        assert info.special_tokens["<fim_prefix>"] == 3
        assert info.vocab_size == 6 + 256 + 58
        assert info.quantization == "all F32"
        result = backend.generate(
            GenerationRequest(prompt_tokens=[1, *backend.tokenize("abc")], max_tokens=4)
        )
        assert result.stop_reason in ("length", "eos")
    finally:
        backend.close()


def test_closed_backend_raises(tmp_path: Path) -> None:
    from lsp_assist.errors import BackendError

    backend = LocalBackend(
        _settings(context_length=256), model_path=write_tiny_gguf(tmp_path / "c.gguf")
    )
    backend.close()
    backend.close()  # idempotent
    with pytest.raises(BackendError, match="closed"):
        backend.tokenize("abc")
    with pytest.raises(BackendError, match="closed"):
        backend.generate(GenerationRequest(prompt_tokens=[1, 262], max_tokens=2))


def test_mismatched_draft_vocabulary(tmp_path: Path) -> None:
    main = write_tiny_gguf(tmp_path / "main.gguf")
    other = write_tiny_gguf(tmp_path / "other.gguf", words=default_words("x"), seed=1)
    settings = _settings(context_length=256, draft="model", draft_model_path=str(other))
    with pytest.raises(DraftModelError, match="vocabularies differ"):
        LocalBackend(settings, model_path=main)
    same = write_tiny_gguf(tmp_path / "same.gguf", seed=2)
    settings = _settings(context_length=256, draft="model", draft_model_path=str(same))
    backend = LocalBackend(settings, model_path=main)
    try:
        assert backend.draft_mode == "model"
        prompt = [1, *backend.tokenize("abc def abc")]
        plain = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=8, draft=False))
        drafted = backend.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=8, draft=True)
        )
        assert drafted.drafting and drafted.draft_proposed > 0
        assert drafted.tokens == plain.tokens
    finally:
        backend.close()


def test_smollm2_info(smol: LocalBackend) -> None:
    info = smol.info
    assert info.architecture == "llama"
    assert info.quantization == "Q4_1"
    assert info.vocab_size == 49152
    assert info.special_tokens["<repo_name>"] == 3
    assert info.special_tokens["<file_sep>"] == 5
    assert info.special_tokens["<filename>"] == 6
    assert not info.has_fim
    assert smol.tokenize("<file_sep>", special=True) == [5]
    assert smol.detokenize(smol.tokenize("def f(x):\n    return x")) == "def f(x):\n    return x"


# --- generation and reuse ------------------------------------------------------------


def test_generate_and_kv_reuse(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(1200))
    first = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=6, cache_key="a.py"))
    assert first.stop_reason in ("length", "eos", "stop")
    assert 0 < first.ttft_ms <= first.latency_ms
    tail = smol.tokenize("\n\ndef helper(value):\n    return")
    second_prompt = [*prompt, *tail]
    before = smol._engine.evaluated
    second = smol.generate(
        GenerationRequest(prompt_tokens=second_prompt, max_tokens=1, cache_key="a.py")
    )
    assert second.reused_tokens >= len(prompt)
    # only what follows the common prefix was evaluated
    assert smol._engine.evaluated - before == len(second_prompt) - second.reused_tokens
    again = smol.generate(
        GenerationRequest(prompt_tokens=second_prompt, max_tokens=1, cache_key="a.py")
    )
    assert again.reused_tokens == len(second_prompt) - 1
    stats = smol.stats()
    assert stats["reused_tokens"] >= second.reused_tokens
    assert 0 < float(stats["kv_reuse_ratio"]) <= 1  # type: ignore[arg-type]


def test_each_token_has_its_log_probability(smol: LocalBackend) -> None:
    """The confidence gate's signal: one log probability per generated token, from the
    row that chose it. A copy of text already in the prompt is near certain; greedy
    choices are at least as likely as any other token (above log 1/n_vocab)."""
    text = code_text(900)
    prompt = smol.tokenize(text + "\n\n" + text[:300])
    copied = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=8))
    assert len(copied.token_logprobs) == len(copied.tokens) > 0
    floor = -math.log(smol.info.vocab_size)
    assert all(floor <= lp <= 0.0 for lp in copied.token_logprobs), copied.token_logprobs
    assert sum(copied.token_logprobs) / len(copied.token_logprobs) > math.log(0.5)
    vague = smol.generate(GenerationRequest(prompt_tokens=smol.tokenize("x"), max_tokens=8))
    assert min(vague.token_logprobs) < max(copied.token_logprobs)


def test_reuse_switch_off(smol_path: Path) -> None:
    backend = LocalBackend(_settings(), model_path=smol_path, kv_reuse=False)
    try:
        prompt = backend.tokenize(code_text(300))
        backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=2))
        again = backend.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=2))
        assert again.reused_tokens == 0
    finally:
        backend.close()


def test_stop_strings_rule_and_streaming(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(800))
    pieces: list[str] = []
    result = smol.generate(
        GenerationRequest(prompt_tokens=prompt, max_tokens=40, stop=["\n"], on_text=pieces.append)
    )
    assert "\n" not in result.text
    assert "".join(pieces) == result.text
    if result.stop_reason == "stop":
        assert len(result.tokens) < 40

    def rule(text: str) -> int | None:
        return 3 if len(text) >= 3 else None

    ruled = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=40, stop_rule=rule))
    assert ruled.stop_reason == "rule"
    assert len(ruled.text) == 3
    limited = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=3))
    assert limited.stop_reason in ("length", "eos") and len(limited.tokens) <= 3


def test_cancel_within_one_token(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(600))
    token = CancelToken()
    result = smol.generate(
        GenerationRequest(
            prompt_tokens=prompt,
            max_tokens=40,
            cancel=token,
            on_text=lambda _text: token.cancel("superseded"),
            draft=False,
        )
    )
    assert result.stop_reason == "cancelled" and result.cancelled
    assert len(result.tokens) <= 2
    pre = CancelToken()
    pre.cancel()
    assert (
        smol.generate(GenerationRequest(prompt_tokens=prompt, cancel=pre)).stop_reason
        == "cancelled"
    )


class _CancelInsideStep(CancelToken):
    """Cancels itself at the 50th check after being armed: inside llama_decode's graph."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.checks = 0

    @property
    def cancelled(self) -> bool:
        if self.armed:
            self.checks += 1
            if self.checks == 50:
                self.cancel()
        return super().cancelled


def test_cancel_inside_a_decode_step_keeps_kv_consistent(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(600))
    token = _CancelInsideStep()

    def arm(_text: str) -> None:
        token.armed = True

    result = smol.generate(
        GenerationRequest(prompt_tokens=prompt, max_tokens=40, cancel=token, on_text=arm)
    )
    assert result.stop_reason == "cancelled"
    assert token.checks >= 50  # the 50th check is inside a step: the graph has hundreds
    assert len(result.tokens) <= 2
    assert smol._engine.check_sync()
    held = smol.cached_tokens
    assert held == [*prompt, *result.tokens][: len(held)]
    follow = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=2))
    assert follow.reused_tokens >= len(prompt) - 1


class _DecodeCalls:
    """llama.cpp's API with every llama_decode call's size and start time recorded;
    ``cancel_at`` (call numbers from 1) cancels ``token`` as that call starts, inside it."""

    def __init__(self, real: Any, token: CancelToken | None = None, cancel_at: int = 0) -> None:
        self.real = real
        self.token = token
        self.cancel_at = cancel_at
        self.sizes: list[int] = []
        self.starts: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def llama_decode(self, ctx: Any, batch: Any) -> int:
        self.sizes.append(int(batch.n_tokens))
        self.starts.append(time.perf_counter())
        if self.token is not None and len(self.sizes) == self.cancel_at:
            self.token.cancel("superseded")
        return int(self.real.llama_decode(ctx, batch))


def test_cancel_during_prefill_keeps_kv_consistent(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(6000, "lsp_assist/backends/llama.py"))[:1500]
    smol.generate(GenerationRequest(prompt_tokens=smol.tokenize("x = 1"), max_tokens=1))
    engine = smol._engine
    calls = _DecodeCalls(engine._ll)
    token = CancelToken()
    timer = threading.Timer(0.3, token.cancel)
    timer.start()
    engine._ll = calls
    try:
        result = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=8, cancel=token))
    finally:
        engine._ll = calls.real
        timer.join()
    assert result.stop_reason == "cancelled"
    # the call the cancel landed in is finished and kept; no call starts after it
    assert calls.starts and all(start < token.cancelled_at for start in calls.starts)
    held = smol.cached_tokens
    assert held == prompt[: len(held)]  # what the KV cache holds is tracked exactly
    assert len(held) == sum(calls.sizes)
    follow = smol.generate(GenerationRequest(prompt_tokens=prompt[:40], max_tokens=2))
    assert follow.stop_reason in ("length", "eos", "stop")


def test_a_cancelled_prompt_keeps_what_it_evaluated_for_the_next_request(
    smol: LocalBackend,
) -> None:
    """Typing: each request is cancelled by the next key while its prompt is evaluated,
    and the next request has the same prompt. Each must reuse more than the one before:
    an abort inside a llama_decode call used to throw that call away, so every request
    started again from the same call boundary and none ever finished."""
    prompt = smol.tokenize(code_text(4000, "lsp_assist/backends/drafting.py"))[:420]
    smol.generate(GenerationRequest(prompt_tokens=smol.tokenize("w = 4"), max_tokens=1))
    engine = smol._engine
    real = engine._ll
    reused: list[int] = []
    try:
        for _ in range(3):
            token = CancelToken()
            engine._ll = _DecodeCalls(real, token, cancel_at=1)
            result = smol.generate(
                GenerationRequest(prompt_tokens=prompt, max_tokens=4, cancel=token)
            )
            assert result.stop_reason == "cancelled"
            reused.append(result.reused_tokens)
    finally:
        engine._ll = real
    assert reused[0] < reused[1] < reused[2], reused
    held = smol.cached_tokens
    assert held == prompt[: len(held)]
    follow = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=2))
    assert follow.reused_tokens == len(held) > reused[2]


def test_an_abort_keeps_the_whole_calls_evaluated_before_it(smol: LocalBackend) -> None:
    """A cold prompt cut by a cancel (or the prompt cap): the next request goes on from
    the last whole llama_decode call, and no call holds more than ABORTABLE_CHUNK tokens
    (one call of 512 lost everything a cut landed in)."""
    prompt = smol.tokenize(code_text(6000, "lsp_assist/backends/llama.py"))[:700]
    assert len(prompt) > 512  # more than one call of the default batch
    smol.generate(GenerationRequest(prompt_tokens=smol.tokenize("z = 3"), max_tokens=1))
    engine = smol._engine
    token = CancelToken()
    calls = _DecodeCalls(engine._ll, token, cancel_at=3)
    engine._ll = calls
    try:
        result = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=4, cancel=token))
    finally:
        engine._ll = calls.real
    sizes = calls.sizes
    assert result.stop_reason == "cancelled", result
    assert len(sizes) == 3 and max(sizes) <= ABORTABLE_CHUNK, sizes
    held = smol.cached_tokens
    assert held == prompt[: len(held)]
    assert len(held) == sum(sizes), (len(held), sizes)  # the call cancelled within kept too
    follow = smol.generate(GenerationRequest(prompt_tokens=prompt, max_tokens=2))
    assert follow.reused_tokens == len(held)


def test_time_caps(smol: LocalBackend) -> None:
    prompt = smol.tokenize(code_text(5000, "lsp_assist/backends/llama.py"))[:1200]
    smol.generate(GenerationRequest(prompt_tokens=smol.tokenize("y = 2"), max_tokens=1))
    slow = smol.generate(
        GenerationRequest(prompt_tokens=prompt, max_tokens=4, prompt_timeout_s=0.05)
    )
    assert slow.stop_reason == "timeout" and slow.cancelled
    assert slow.latency_ms < 1000
    capped = smol.generate(
        GenerationRequest(prompt_tokens=prompt[:50], max_tokens=40, generation_timeout_s=0.0)
    )
    assert capped.stop_reason == "timeout"
    assert len(capped.tokens) == 1


def test_prefill_then_generate(smol: LocalBackend) -> None:
    prefix = smol.tokenize(code_text(900, "lsp_assist/backends/drafting.py"))
    assert 0 < smol.prefill(prefix, cache_key="pre.py") <= len(prefix)
    assert smol.cached_tokens == prefix
    assert smol.prefill(prefix, cache_key="pre.py") == 0
    result = smol.generate(
        GenerationRequest(
            prompt_tokens=[*prefix, *smol.tokenize("\nx")], max_tokens=2, cache_key="pre.py"
        )
    )
    assert result.reused_tokens == len(prefix)


# --- per-file states -------------------------------------------------------------------


def test_file_switch_restores_state_and_lru_evicts(smol_path: Path) -> None:
    # SmolLM2 with an f16 KV cache: 30 layers x 192 x 2 x 2 bytes = 23 KB per token
    backend = LocalBackend(_settings(kv_cache_mb=6), model_path=smol_path)
    try:
        files = ["kv_states.py", "drafting.py", "gguf_meta.py", "base.py"]
        prompts = {
            name: backend.tokenize(code_text(420, f"lsp_assist/backends/{name}"))[:100]
            for name in files
        }
        for name in files[:2]:
            backend.generate(
                GenerationRequest(prompt_tokens=prompts[name], max_tokens=1, cache_key=name)
            )
        assert backend.states.keys() == ["kv_states.py"]
        back = backend.generate(
            GenerationRequest(
                prompt_tokens=prompts["kv_states.py"], max_tokens=1, cache_key="kv_states.py"
            )
        )
        assert back.reused_tokens == len(prompts["kv_states.py"]) - 1  # restored, not re-evaluated
        assert backend.stats()["state_restores"] == 1
        for name in files[2:]:
            backend.generate(
                GenerationRequest(prompt_tokens=prompts[name], max_tokens=1, cache_key=name)
            )
        # 6 MB holds two ~2.4 MB states: the least recently used (drafting.py) went first
        assert backend.states.keys() == ["kv_states.py", "gguf_meta.py"]
        assert backend.stats()["kv_state_evictions"] == 1
        assert int(backend.stats()["kv_state_bytes"]) <= 6 * 1024 * 1024  # type: ignore[call-overload]
        gone = backend.generate(
            GenerationRequest(
                prompt_tokens=prompts["drafting.py"], max_tokens=1, cache_key="drafting.py"
            )
        )
        assert gone.reused_tokens < 10
    finally:
        backend.close()


# --- drafting ---------------------------------------------------------------------------


def _copy_prompt(backend: LocalBackend) -> list[int]:
    return backend.tokenize(COPY_SOURCE)


@pytest.mark.parametrize("draft_seed", [0, 5])
def test_draft_model_identity_on_exact_kernels(tmp_path: Path, draft_seed: int) -> None:
    # a draft model: seed 0 = the main model itself (every draft accepted), seed 5 = a
    # different one (mostly rejected); either way the output is the main model's own
    main = write_tiny_gguf(tmp_path / "main.gguf")
    draft = write_tiny_gguf(tmp_path / "draft.gguf", seed=draft_seed)
    settings = _settings(context_length=512, draft="model", draft_model_path=str(draft))
    backend = LocalBackend(settings, model_path=main)
    try:
        prompt = [1, *backend.tokenize("abc def abc def ab")]
        plain, drafted = plain_and_drafted(backend, prompt, 40)
        assert drafted.draft_proposed > 0
        if draft_seed == 0:
            assert drafted.draft_accepted == drafted.draft_proposed
        assert drafted.tokens == plain.tokens
    finally:
        backend.close()


@pytest.fixture(scope="module")
def gemma() -> Iterator[LocalBackend]:
    """The embedded Gemma-3-270M Q4_K_M: its Q5_0/Q8_0 tensors take llamafile's sgemm."""
    from lsp_assist.backends.models import embedded_model_path

    backend = LocalBackend(_settings(context_length=2048), model_path=embedded_model_path())
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def tiny_f32(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalBackend]:
    """A 4-layer all-F32 GGUF: its output projection is an F32 matmul (llamafile sgemm)."""
    path = write_tiny_gguf(
        tmp_path_factory.mktemp("tiny") / "f32.gguf", n_embd=256, n_layers=4, n_ff=512
    )
    backend = LocalBackend(_settings(context_length=1024), model_path=path)
    yield backend
    backend.close()


@pytest.mark.parametrize("model", ["smol", "gemma", "tiny_f32"])
def test_verified_rows_are_bit_identical_to_single_decoding(
    model: str, request: pytest.FixtureRequest
) -> None:
    # the property drafting identity rests on: a token's logits do not depend on how
    # many other rows (2..7) its decode step had, including across a 256-cell KV block;
    # tiny_f32 also needs the padding row to have logits (a 1-row output projection
    # rounds differently from a 2-row one)
    backend: LocalBackend = request.getfixturevalue(model)
    assert backend._engine.min_rows == 2
    prompt = backend.tokenize(code_text(4000))[:252]
    follow = backend.tokenize(code_text(4400)[4000:])[:6]
    check_rows_bit_identical(backend, prompt, follow, (3, 6))


@pytest.mark.parametrize("model", ["smol", "gemma"])
def test_prompt_lookup_drafting_matches_greedy(model: str, request: pytest.FixtureRequest) -> None:
    backend: LocalBackend = request.getfixturevalue(model)
    plain, drafted = plain_and_drafted(backend, _copy_prompt(backend), 64)
    assert drafted.drafting and not plain.drafting
    assert drafted.draft_proposed > 0 and drafted.draft_accepted > 0
    assert len(plain.tokens) >= 32
    assert drafted.tokens == plain.tokens
    per_task = backend.stats()["drafting"]
    assert "completion" in per_task  # type: ignore[operator]


def test_the_gemma_preset_generates_with_reuse() -> None:
    from lsp_assist.backends.factory import create_backend

    backend = create_backend(_settings(context_length=1024, model="gemma-270m", model_path=""))
    assert isinstance(backend, LocalBackend)
    try:
        info = backend.info
        assert info.architecture == "gemma3" and info.bos_id == 2 and info.vocab_size == 262144
        assert info.quantization.startswith("Q4_K")
        prompt = [2, *backend.tokenize(code_text(700))]
        first = backend.generate(
            GenerationRequest(prompt_tokens=prompt, max_tokens=8, cache_key="g")
        )
        assert first.tokens
        second = backend.generate(
            GenerationRequest(prompt_tokens=[*prompt, *first.tokens], max_tokens=8, cache_key="g")
        )
        assert second.reused_tokens >= len(prompt)
    finally:
        backend.close()
