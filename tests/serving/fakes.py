"""A fake backend for serving tests whose suggestion tells which text it was made for.

It tokenizes one character per token, sleeps per generated token (so edits can race a
running generation) and answers ``x<N>``, where N is the number of the last ``# edit N``
comment in the prompt: a test that edits that comment knows, from a suggestion alone,
which version of the buffer its prompt was built from. Timings are filled the way a real
backend fills them (from the start of ``generate``). ``SlowBackend`` only stands in for
time (the scheduler's, the load gate's and the oversized request's tests). The real
model runs the same paths in tests/e2e.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from pathlib import Path

from lsp_assist.backends.base import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    ModelInfo,
)
from lsp_assist.config import Settings, parse_settings
from lsp_assist.documents import DocumentSnapshot
from lsp_assist.errors import BackendError
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.session import Session

MARKER = re.compile(r"# edit (\d+)")

SOURCE = "def f():\n    return 1\n\n# edit 0\nvalue = \n"
"""The test buffer: the marker on line 3, the cursor at the end of line 4."""
MARKER_LINE, CURSOR_LINE, CURSOR_COLUMN = 3, 4, 8


def suggestion_for(text: str) -> str:
    """Return what the fake answers for a prompt (or buffer) holding ``text``."""
    found = MARKER.findall(text)
    return f"x{found[-1]}" if found else "x"


class CharBackend(Backend):
    """The fakes' model: no FIM tokens, one token per (ASCII) character."""

    @property
    def info(self) -> ModelInfo:
        """A model without FIM tokens."""
        return ModelInfo(path="fake.gguf", architecture="fake", vocab_size=256, bos_id=None)

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """One token per (ASCII) character."""
        return [ord(c) % 256 for c in text]

    def detokenize(self, tokens: Sequence[int]) -> str:
        """The inverse of :meth:`tokenize` for ASCII."""
        return "".join(chr(t) for t in tokens)


class SlowBackend(CharBackend):
    """Generates 'x' tokens slowly, honouring the cancel flag after each one."""

    def __init__(self, step_s: float = 0.02, tokens: int = 20) -> None:
        self.step_s = step_s
        self.n = tokens
        self.prefill_cancelled = 0
        self.calls = 0

    def generate(self, request: GenerationRequest) -> GenerationResult:
        self.calls += 1
        out: list[int] = []
        for _ in range(self.n):
            if request.cancel.cancelled:
                return GenerationResult(text="", tokens=out, stop_reason="cancelled")
            time.sleep(self.step_s)
            out.append(ord("x"))
        return GenerationResult(text="x" * len(out), tokens=out, stop_reason="length")

    def prefill(
        self, tokens: Sequence[int], *, cache_key: str = "", cancel: CancelToken | None = None
    ) -> int:
        for i in range(50):
            if cancel is not None and cancel.cancelled:
                self.prefill_cancelled += 1
                return i
            time.sleep(self.step_s)
        return 50


class MarkerBackend(CharBackend):
    """Answers ``x<N>`` one character per ``step_s``; honours the cancel flag per token."""

    def __init__(self, step_s: float = 0.002, prefill_s: float = 0.0) -> None:
        self.step_s = step_s
        self.prefill_s = prefill_s
        self.calls = 0
        self.fail_on: set[int] = set()
        """Call numbers (1-based) that raise a BackendError after the prompt arrived."""
        self.prompts: list[str] = []

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Evaluate the prompt for ``prefill_s``, then one character per ``step_s``.

        As with llama.cpp, the first token comes out of the prompt evaluation itself.
        """
        t0 = time.perf_counter()
        self.calls += 1
        prompt = self.detokenize(request.prompt_tokens)
        self.prompts.append(prompt)
        if self.calls in self.fail_on:
            raise BackendError("the fake backend failed on purpose")
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        time.sleep(self.prefill_s)
        result.prefill_ms = (time.perf_counter() - t0) * 1000
        for char in suggestion_for(prompt):
            if request.cancel.cancelled:
                result.stop_reason = "cancelled"
                break
            if result.tokens:
                time.sleep(self.step_s)
            else:
                result.ttft_ms = (time.perf_counter() - t0) * 1000
            result.tokens.append(ord(char))
        else:
            time.sleep(self.step_s)  # the step that samples the end of text
            result.stop_reason = "eos"
        result.text = "" if result.stop_reason == "cancelled" else self.detokenize(result.tokens)
        result.latency_ms = (time.perf_counter() - t0) * 1000
        if result.tokens:
            result.decode_ms = result.latency_ms - result.ttft_ms
        return result

    def prefill(
        self, tokens: Sequence[int], *, cache_key: str = "", cancel: CancelToken | None = None
    ) -> int:
        """Nothing to evaluate ahead of time."""
        return 0


def make_engine(
    tmp_path: Path, backend: Backend, **settings_overrides: object
) -> tuple[CompletionEngine, str]:
    """An engine over a session of a workspace holding :data:`SOURCE`, opened at version 1."""
    raw: dict[str, object] = {
        "metrics": False,
        "debounceMs": 0,
        "persist": False,
        "watch": False,
        "maxTokens": 20,
    }
    raw.update(settings_overrides)
    settings, warnings = parse_settings(raw)
    assert isinstance(settings, Settings) and not warnings, warnings
    path = tmp_path / "m.py"
    path.write_text(SOURCE)
    session = Session(settings, workspace=tmp_path, backend_factory=lambda s: backend)
    assert session.index is not None
    session.index.scan()
    doc = session.buffers.open(path.as_uri(), SOURCE, version=1)
    assert session.load_backend() is backend
    return CompletionEngine(session), doc.uri


def snapshot(engine: CompletionEngine, uri: str) -> DocumentSnapshot:
    """The buffer of ``uri`` in the engine's session, frozen now (the file if not open)."""
    doc = engine.session.buffers.snapshot(uri)
    assert doc is not None, uri
    return doc
