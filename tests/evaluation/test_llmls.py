"""llm.nvim on llm-ls (the replay's llm-ls peer): its completion type, debounce, cancels, its
window in bytes, and a real ``llama-server`` answering through it."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.evaluation.peers import llmls
from lsp_assist.evaluation.peers.llmls import (
    EMPTY,
    MULTI_LINE,
    SINGLE_LINE,
    LlmLsSuggester,
    completion_type,
)
from lsp_assist.evaluation.suggester import Answer
from lsp_assist.index.languages import parse

CODE = "import os\n\n\ndef f(a):\n    x = g(a)\n    return \n\n\nclass C:\n    pass\n"


def _type(text: str, row: int, column: int) -> str:
    return completion_type(text, parse("python", text.encode()), row, column)


def test_completion_type_follows_the_node_at_the_cursor() -> None:
    assert _type(CODE, 1, 0) == MULTI_LINE  # between top-level statements: the module node
    assert _type(CODE, 5, 11) == MULTI_LINE  # the end of "    return "
    assert _type(CODE, 4, 10) == SINGLE_LINE  # inside a one-character identifier
    assert _type(CODE, 5, 4) == EMPTY  # before "return": a word right of the cursor
    assert _type("def f():\n    \n", 1, 4) == MULTI_LINE  # an empty body


def test_completion_type_without_a_grammar_reads_the_next_character() -> None:
    assert completion_type(CODE, None, 4, 10) == EMPTY
    assert completion_type(CODE, None, 5, 11) == SINGLE_LINE
    assert completion_type(CODE, None, 9, 99) == SINGLE_LINE  # past the end of the text
    assert completion_type("", None, 0, 0) == EMPTY


class FakeLlmLs(LlmLsSuggester):
    """The client with its HTTP recorded instead of sent."""

    def __init__(self) -> None:
        super().__init__(model_path=Path("model.gguf"), threads=1, seed=3)
        self.posted: list[tuple[dict[str, Any], llmls._Request, Any]] = []

    def _launch(self) -> None:
        self.url = "http://127.0.0.1:1"

    def _post(self, body: dict[str, Any], request: llmls._Request, done: Any) -> None:
        self.posted.append((body, request, done))

    def answer(self, index: int, text: str) -> None:
        _, _, done = self.posted[index]
        done(json.dumps({"choices": [{"text": text}]}))


async def _started(tmp_path: Path) -> FakeLlmLs:
    s = FakeLlmLs()
    s.debounce_s = 0.05
    await s.start(tmp_path)
    return s


async def _until(done: Callable[[], bool], what: str) -> None:
    """Let the loop run until ``done()`` (the debounce timers fire); fail after 30 s."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, f"never: {what}"
        await asyncio.sleep(0.01)


async def test_a_request_goes_out_a_debounce_after_the_last_key(tmp_path: Path) -> None:
    s = await _started(tmp_path)
    path = tmp_path / "a.py"
    await s.open(path, CODE, 0)
    s.key(path, CODE, 5, 11, 1, lambda a: None)
    first = s._timer
    assert first is not None and s.posted == []
    # the next key before the debounce (the loop has not run): the timer restarts
    typed_at = asyncio.get_running_loop().time()
    s.key(path, CODE, 5, 11, 2, lambda a: None)
    second = s._timer
    assert first.cancelled() and second is not None and not second.cancelled()
    assert second.when() >= typed_at + s.debounce_s
    await _until(lambda: bool(s.posted), "a request")
    assert s._timer is None and len(s.posted) == 1  # the first key's timer never fired
    body, request, _ = s.posted[0]
    assert request.version == 2 and request.kind == MULTI_LINE
    # llm.nvim's llamacpp backend has no default request body: no sampling, no max_tokens
    assert set(body) == {"prompt", "model", "stream", "seed"}
    assert body["stream"] is False and body["seed"] == 3
    assert body["prompt"].endswith("    return ")  # no FIM markers without a vocabulary
    await s.stop()


async def test_a_key_cancels_the_request_out_and_its_answer_is_never_shown(
    tmp_path: Path,
) -> None:
    s = await _started(tmp_path)
    path = tmp_path / "a.py"
    got: list[Answer] = []
    await s.open(path, CODE, 0)
    s.key(path, CODE, 5, 11, 1, got.append)
    await _until(lambda: len(s.posted) == 1, "the first request")
    s.key(path, CODE, 5, 11, 2, got.append)
    assert s.posted[0][1].cancelled and s.stats["cancelled"] == 1
    s.answer(0, "a + 1")
    assert got == []
    await _until(lambda: len(s.posted) == 2, "the second request")
    s.answer(1, "a\n    # done")
    assert [(a.version, a.text, a.replaces) for a in got] == [(2, "a\n    # done", 0)]
    await s.stop()


async def test_single_line_answers_are_cut_and_empty_ones_skipped(tmp_path: Path) -> None:
    s = await _started(tmp_path)
    path = tmp_path / "a.py"
    got: list[Answer] = []
    await s.open(path, CODE, 0)
    s.key(path, CODE, 5, 4, 1, got.append)  # "return" right of the cursor: no request
    await _until(lambda: s._timer is None, "the debounce")
    assert s.posted == [] and s.stats["skipped_empty"] == 1
    s.key(path, CODE, 4, 10, 2, got.append)  # single line
    await _until(lambda: len(s.posted) == 1, "the request")
    s.answer(0, "b + 1\n    y = 2")
    assert [a.text for a in got] == ["b + 1"]
    s.key(path, CODE, 4, 10, 3, got.append)
    await _until(lambda: len(s.posted) == 2, "the second request")
    s.answer(1, "\nnext line only")
    assert len(got) == 1 and s.stats["empty_answers"] == 1
    await s.stop()


async def test_the_window_counts_bytes_as_llm_ls_does_without_a_tokenizer(
    tmp_path: Path,
) -> None:
    s = await _started(tmp_path)
    s.window = 60
    path = tmp_path / "a.py"
    line = "s = 'ééééé'\n"  # 11 characters, 16 bytes
    text = line * 8 + "t = \n"
    await s.open(path, text, 0)
    s.key(path, text, 8, 4, 1, lambda a: None)
    await _until(lambda: bool(s.posted), "a request")
    # 4 + 3 x 16 bytes fit in 60, a fourth line does not (counted in characters, 5 would)
    assert s.posted[0][0]["prompt"] == line * 3 + "t = "
    await s.stop()


class FirstHeld(LlmLsSuggester):
    """The real client whose first request goes out only once the next key has come: a
    model slow by construction, whatever the machine (the real one may answer in 10 ms)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.held: tuple[dict[str, Any], llmls._Request, Callable[[str | None], None]] | None
        self.held = None

    def _post(
        self, body: dict[str, Any], request: llmls._Request, done: Callable[[str | None], None]
    ) -> None:
        if request.version == 1:
            self.held = (body, request, done)
        else:
            super()._post(body, request, done)

    def release(self) -> None:
        """Send the held request now (its HTTP call sees whether it was cancelled)."""
        assert self.held is not None
        super()._post(*self.held)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_llama_server_answers_through_the_client(tmp_path: Path) -> None:
    from lsp_assist.backends import small_model_path

    s = FirstHeld(model_path=small_model_path(), threads=2, seed=5)
    s.debounce_s = 0.0
    s.max_tokens = 16  # a model without FIM may write on until its context is full
    path = tmp_path / "calc.py"
    text = "def add(a, b):\n    return \n"
    path.write_text(text)
    got: list[Answer] = []
    await s.start(tmp_path)
    try:
        await s.open(path, text, 0)
        s.key(path, text, 1, 11, 1, got.append)  # cancelled by the next key
        await _until(lambda: s.held is not None, "the first request")
        s.key(path, text, 1, 11, 2, got.append)
        assert s.held is not None and s.held[1].cancelled
        s.release()  # too late: it is dropped, not drawn
        deadline = time.monotonic() + 120
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert got, f"no answer; stats {s.stats}"
        assert [a.version for a in got] == [2] and got[0].text
        assert s.stats["requests"] == 2 and s.stats["cancelled"] == 1
        assert s.stats["responses"] == 1
        assert s.stats["evaluated_tokens"] > 0 and s.stats["predicted_tokens"] > 0
    finally:
        await s.stop()
