"""Model-free tests: GGUF validation, the KV state LRU, prompt lookup, acceptance tracking,
time caps, the model-free tokenizer, draft limits, the combined drafter."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest

from lsp_assist.backends.approx_tokens import ApproxTokenizer
from lsp_assist.backends.base import GenerationRequest, GenerationResult, time_caps
from lsp_assist.backends.decode import draft_limits
from lsp_assist.backends.drafting import AcceptanceTracker, CombinedDrafter, PromptLookupDrafter
from lsp_assist.backends.gguf_meta import read_gguf_header
from lsp_assist.backends.kv_states import KVState, KVStateCache, common_prefix_len
from lsp_assist.config import ModelSettings
from lsp_assist.errors import ModelLoadError
from tests.support.tiny_gguf import write_tiny_gguf


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        read_gguf_header(tmp_path / "missing.gguf")


def test_directory_is_not_a_model(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not a file"):
        read_gguf_header(tmp_path)


def test_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "model.bin"
    path.write_bytes(b"PK\x03\x04" + b"\0" * 100)
    with pytest.raises(ModelLoadError, match="not a GGUF"):
        read_gguf_header(path)


def test_bad_version(tmp_path: Path) -> None:
    path = tmp_path / "v99.gguf"
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 99, 0, 0) + b"\0" * 16)
    with pytest.raises(ModelLoadError, match="version 99"):
        read_gguf_header(path)


def test_truncated(tmp_path: Path) -> None:
    good = write_tiny_gguf(tmp_path / "tiny.gguf")
    header = read_gguf_header(good)
    assert header.architecture == "llama"
    assert header.required_size == header.file_size
    assert header.get_int("tokenizer.ggml.fim_pre_token_id") == 3
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(good.read_bytes()[: header.file_size - 1000])
    with pytest.raises(ModelLoadError, match="truncated"):
        read_gguf_header(cut)
    tiny = tmp_path / "header-only.gguf"
    tiny.write_bytes(good.read_bytes()[:200])
    with pytest.raises(ModelLoadError, match="truncated or corrupt"):
        read_gguf_header(tiny)


def test_header_cut_anywhere_is_a_clear_error(tmp_path: Path) -> None:
    """A file cut at any byte of its header (inside the vocabulary too) says truncated."""
    good = write_tiny_gguf(tmp_path / "tiny.gguf")
    data = good.read_bytes()
    end = read_gguf_header(good).data_offset
    for size in range(24, end, 7):
        cut = tmp_path / f"cut{size}.gguf"
        cut.write_bytes(data[:size])
        with pytest.raises(ModelLoadError, match="truncated or corrupt"):
            read_gguf_header(cut)


def test_header_is_read_again_when_the_file_changes(tmp_path: Path) -> None:
    """The kept header is the file's: the same file gives it back, a rewritten one is read."""
    path = write_tiny_gguf(tmp_path / "tiny.gguf")
    first = read_gguf_header(path)
    assert read_gguf_header(path) is first
    path.write_bytes(path.read_bytes()[: first.file_size - 1000])
    with pytest.raises(ModelLoadError, match="truncated"):
        read_gguf_header(path)


def test_common_prefix_len() -> None:
    a = list(range(1000))
    assert common_prefix_len(a, a) == 1000
    assert common_prefix_len(a, a[:10]) == 10
    b = [*a[:700], -1, *a[701:]]
    assert common_prefix_len(a, b) == 700
    assert common_prefix_len([], a) == 0
    assert common_prefix_len([5], [6]) == 0


def _state(n: int, fill: int = 0) -> KVState:
    return KVState(tokens=[fill] * 4, data=bytes(n))


def test_lru_byte_cap() -> None:
    cache = KVStateCache(250, memory_threshold=1.0)
    assert cache.put("a", _state(100))
    assert cache.put("b", _state(100))
    assert cache.put("c", _state(100))  # evicts a
    assert cache.keys() == ["b", "c"]
    assert cache.bytes == 200
    assert not cache.put("huge", _state(300))
    assert cache.evictions == 1 and cache.rejected == 1
    assert cache.pop("b") is not None
    assert cache.keys() == ["c"]


def test_lru_memory_threshold() -> None:
    usage = [0.95]

    def probe() -> float:
        return usage[0]

    cache = KVStateCache(10_000, memory_threshold=0.9, memory_probe=probe)
    usage[0] = 0.5
    assert cache.put("a", _state(10))
    assert cache.put("b", _state(10))
    usage[0] = 0.95
    assert not cache.put("c", _state(10))  # drops a and b, then refuses c
    assert len(cache) == 0
    assert cache.memory_evictions == 2


def test_best_match() -> None:
    cache = KVStateCache(10_000, memory_threshold=1.0)
    cache.put("x", KVState(tokens=[1, 2, 3, 4], data=b"x"))
    cache.put("y", KVState(tokens=[1, 2, 9], data=b"y"))
    assert cache.best_match([1, 2, 3, 4, 5]) == ("x", 4)
    assert cache.best_match([7]) is None


def test_prompt_lookup_proposes_continuation() -> None:
    drafter = PromptLookupDrafter()
    history = [1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3]
    drafter.reset(history)
    assert drafter.propose(history, 4) == [4, 5, 6, 7]
    history += [4, 5]
    assert drafter.propose(history, 4) == [6, 7, 8, 9]
    assert drafter.propose([10, 11, 12], 4) == []  # reindexes a new history; no match


def test_prompt_lookup_prefers_latest_match() -> None:
    drafter = PromptLookupDrafter()
    history = [1, 2, 10, 1, 2, 20, 1, 2]
    assert drafter.propose(history, 1) == [20]


def test_acceptance_switches_off_and_probes() -> None:
    tracker = AcceptanceTracker(min_acceptance=0.5, min_proposed=8, probe_after=3)
    assert tracker.should_draft("completion")
    tracker.record("completion", 8, 1)
    assert not tracker.enabled("completion")
    assert tracker.enabled("test")  # per task type
    assert [tracker.should_draft("completion") for _ in range(3)] == [False, False, True]
    tracker.record("completion", 8, 8)
    assert tracker.enabled("completion")
    stats = tracker.stats()["completion"]
    assert stats["switched_off"] == 1 and stats["proposed"] == 16


def test_time_caps_take_the_request_s_own_else_the_settings() -> None:
    settings = ModelSettings(prompt_timeout_ms=1500, generation_timeout_ms=2500)
    default = time_caps(settings)
    assert (default.prompt_s, default.generation_s) == (1.5, 2.5)
    own = time_caps(
        settings,
        GenerationRequest(prompt_tokens=[1], prompt_timeout_s=0.25, generation_timeout_s=0.0),
    )
    assert (own.prompt_s, own.generation_s) == (0.25, 0.0)  # 0 is a cap, not "unset"
    half = time_caps(settings, GenerationRequest(prompt_tokens=[1], generation_timeout_s=3.0))
    assert (half.prompt_s, half.generation_s) == (1.5, 3.0)


def test_approx_tokenizer_round_trips_text_and_special_tokens() -> None:
    specials = {"<file_sep>": 5, "▁<PRE>": 32007}
    tokenizer = ApproxTokenizer(specials)
    text = "<file_sep>x = f(42)\n\t\u00e9t\u00e9 \U0001f389▁<PRE>end"
    ids = tokenizer.tokenize(text, special=True)
    assert 5 in ids and 32007 in ids
    assert tokenizer.detokenize(ids) == text
    plain = tokenizer.tokenize(text)  # special text not parsed: plain pieces only
    assert 5 not in plain and 32007 not in plain and min(plain) >= 256
    assert tokenizer.detokenize(plain) == text
    assert tokenizer.tokenize("") == [] and tokenizer.detokenize([]) == ""


def test_draft_limits_keep_verification_batches_under_eight_rows() -> None:
    assert draft_limits(4, 1) == (4, 8)  # single-token steps: span up to 2 x draftTokens
    assert draft_limits(4, 2) == (4, 6)  # batch-invariant: pending + at most 6 drafts
    assert draft_limits(10, 2) == (6, 6)
    assert draft_limits(-1, 2) == (0, 0)


class _FakeModelDrafter:
    """A draft model stand-in: proposes a fixed run, records what it was handed."""

    def __init__(self) -> None:
        self.reset_with: list[int] | None = None
        self.asked = 0

    def reset(self, history: Sequence[int], abort: Callable[[], bool] | None = None) -> None:
        self.reset_with = list(history)

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        self.asked += 1
        return [99] * n


def test_combined_drafter_prefers_lookup_and_falls_back_to_the_model() -> None:
    model = _FakeModelDrafter()
    drafter = CombinedDrafter(PromptLookupDrafter(), model)
    history = [1, 2, 3, 4, 5, 6, 1, 2]
    drafter.reset(history)
    assert model.reset_with == history  # the draft model is handed the prompt too
    assert drafter.propose(history, 3) == [3, 4, 5]  # a lookup match: no model step
    assert model.asked == 0
    history = [*history, 3, 7, 8]  # (7, 8) occurs nowhere before: the model drafts
    assert drafter.propose(history, 2) == [99, 99]
    assert model.asked == 1
    assert drafter.stats() == {"lookup_steps": 1, "model_steps": 1}


def test_prompt_lookup_guess_is_the_latest_follower_of_the_last_token() -> None:
    drafter = PromptLookupDrafter()
    history = [1, 2, 5, 1, 3, 6, 7, 1]
    assert drafter.propose(history, 4) == []  # no 2- or 3-gram match: (7, 1) is new
    assert drafter.guess(history) == [3]  # 1 was last followed by 3
    assert drafter.guess([*history, 9]) == []  # 9 never occurred before


class _CountingEngine:
    """A stand-in for LlamaEngine whose greedy next token is ``last + 1`` (mod ``cycle``)."""

    n_ctx = 4096
    min_rows = 2
    cycle = 10_000

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.rows: list[int] = []
        self._next: list[int] = []

    def eval(
        self, tokens: Sequence[int], *, n_logits: int = 1, abort: object = None, stop: object = None
    ) -> None:
        self.tokens.extend(tokens)
        self.rows.append(len(tokens))
        self._next = [(t + 1) % self.cycle for t in tokens[len(tokens) - n_logits :]]

    def argmax(self, i: int) -> int:
        return self._next[i]

    def logits(self, i: int) -> Any:
        """A row whose likeliest token is :meth:`argmax`'s (the decode loop's log
        probabilities read it)."""
        import numpy as np

        row = np.zeros(self.cycle)
        row[self.argmax(i)] = 1.0
        return row

    def truncate(self, n: int) -> None:
        del self.tokens[n:]

    def is_eog(self, token: int) -> bool:
        return False

    def is_control(self, token: int) -> bool:
        return False

    def piece(self, token: int, *, special: bool = True) -> bytes:
        return b"x"


class _Oracle:
    """Proposes the right continuation (``right``) or a wrong one; records each ``n``."""

    def __init__(self, *, right: bool) -> None:
        self.right = right
        self.asked: list[int] = []

    def reset(self, history: Sequence[int], abort: Callable[[], bool] | None = None) -> None:
        pass

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        self.asked.append(n)
        first = history[-1] + (1 if self.right else 1000)
        return list(range(first, first + n))


def _decode(
    drafter: object, restart: int | None, cycle: int = 10_000, **kw: Any
) -> tuple[Any, GenerationResult]:
    from lsp_assist.backends.base import TimeCaps
    from lsp_assist.backends.decode import DecodeLoop

    eng = _CountingEngine()
    eng.cycle = cycle
    result = GenerationResult()
    request = GenerationRequest(prompt_tokens=[1, 2, 3], max_tokens=40)
    loop = DecodeLoop(eng, request, result, caps=TimeCaps(60.0, 60.0), started=time.perf_counter())  # type: ignore[arg-type]
    assert loop.evaluate_prompt([1, 2, 3], 0)
    loop.decode([1, 2, 3], drafter, span=4, span_cap=6, restart_span=restart, **kw)  # type: ignore[arg-type]
    return eng, result


def test_spans_restart_at_one_draft_and_double_on_full_acceptance() -> None:
    right = _Oracle(right=True)
    _, result = _decode(right, 1)
    assert result.tokens == list(range(4, 44))  # what plain decoding gives
    assert right.asked[:5] == [1, 2, 4, 6, 6]
    assert result.draft_accepted == result.draft_proposed
    wrong = _Oracle(right=False)
    _, result = _decode(wrong, 1)
    assert result.tokens == list(range(4, 44)) and result.draft_accepted == 0
    assert set(wrong.asked) == {1}  # every step after a rejection risks one row only
    before = _Oracle(right=False)
    _decode(before, None)
    assert set(before.asked[:-4]) == {4}  # without a restart span: draftTokens a step


def test_padding_row_guess_is_used_only_when_the_drafter_has_nothing() -> None:
    class _Nothing(_Oracle):
        def propose(self, history: Sequence[int], n: int) -> list[int]:
            self.asked.append(n)
            return []

    guess = PromptLookupDrafter()
    guess.reset([1, 2, 3])
    eng, result = _decode(_Nothing(right=True), 1, cycle=7, pad_guess=guess)
    assert result.tokens == [(t + 1) % 7 for t in range(3, 43)]  # what plain decoding gives
    # once the cycle has come round, the token after the last one is known: guessed right
    assert 0 < guess.guesses_accepted <= guess.guesses
    assert result.draft_proposed == 0  # guesses are not the drafter's proposals
    assert max(eng.rows[1:]) == 2  # a guess rides in the padding row: never a third row
    assert len(eng.rows) < 1 + 40  # accepted guesses saved decode steps


class _BlankLineEngine(_CountingEngine):
    """The first step's likeliest tokens: a line break (1), the end (2), then code (5)."""

    def argmax(self, i: int) -> int:
        return 1 if len(self.rows) == 1 else super().argmax(i)

    def top_tokens(self, i: int, n: int) -> list[int]:
        return [1, 2, 5][:n]

    def is_eog(self, token: int) -> bool:
        return token == 2

    def piece(self, token: int, *, special: bool = True) -> bytes:
        return b"\n    " if token == 1 else b"x"


@pytest.mark.parametrize("code_first", [False, True])
def test_code_first_skips_a_leading_line_break_and_the_end(code_first: bool) -> None:
    from lsp_assist.backends.base import TimeCaps
    from lsp_assist.backends.decode import DecodeLoop

    eng = _BlankLineEngine()
    result = GenerationResult()
    request = GenerationRequest(prompt_tokens=[1, 2, 3], max_tokens=3, code_first=code_first)
    loop = DecodeLoop(eng, request, result, caps=TimeCaps(60.0, 60.0), started=time.perf_counter())  # type: ignore[arg-type]
    assert loop.evaluate_prompt([7, 8, 9], 0)
    loop.decode([7, 8, 9], None, span=4, span_cap=6, restart_span=1)  # type: ignore[arg-type]
    # the blank line's code (5, then 6, 7 by the counting rule), or the line break
    assert result.tokens[0] == (5 if code_first else 1), result.tokens


class _HealedLineBreakEngine(_CountingEngine):
    """An empty line healed as its line break (issue 24): after the prompt the likeliest
    token is that line break (1); after it the end (2), then another line break (3),
    then code (5: ``"x"``)."""

    PIECES: ClassVar[dict[int, bytes]] = {1: b"\n", 3: b" \n", 5: b"x"}

    def argmax(self, i: int) -> int:
        return self.top_tokens(i, 1)[0]

    def top_tokens(self, i: int, n: int) -> list[int]:
        return ([1, 5] if len(self.rows) == 1 else [2, 3, 5])[:n]

    def logits(self, i: int) -> Any:
        import numpy as np

        row = np.zeros(8)
        for rank, token in enumerate(self.top_tokens(i, 3)):
            row[token] = 3 - rank
        return row

    def is_eog(self, token: int) -> bool:
        return token == 2

    def piece(self, token: int, *, special: bool = True) -> bytes:
        return self.PIECES.get(token, b"x")

    def piece_index(self) -> Any:
        from lsp_assist.backends.healing import PieceIndex

        return PieceIndex(8, lambda t: self.PIECES.get(t, b""), lambda t: t != 2)


@pytest.mark.parametrize("code_first", [False, True])
def test_code_first_holds_after_the_healed_text(code_first: bool) -> None:
    from lsp_assist.backends.base import TimeCaps
    from lsp_assist.backends.decode import DecodeLoop

    eng = _HealedLineBreakEngine()
    result = GenerationResult()
    request = GenerationRequest(
        prompt_tokens=[7, 8, 9], max_tokens=3, forced_prefix="\n", code_first=code_first
    )
    loop = DecodeLoop(eng, request, result, caps=TimeCaps(60.0, 60.0), started=time.perf_counter())  # type: ignore[arg-type]
    assert loop.evaluate_prompt([7, 8, 9], 0)
    loop.decode([7, 8, 9], None, span=0, span_cap=0)  # type: ignore[arg-type]
    if code_first:
        # the healed line break, then code: neither the end nor the " \n" after it
        assert result.tokens[:2] == [1, 5] and result.text.startswith("x"), result.tokens
    else:
        # the healed line break and the end: one token and no text (what Emacs got)
        assert result.tokens == [1] and result.text == "" and result.stop_reason == "eos"
