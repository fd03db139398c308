"""Only a completion or a prefill changes what the next prompt keeps.

A completion's prompt keeps parts of the last one of its file (the line it was typed
on, the zone's first line, the layers before the zone) so the backend reuses its KV
cache. Other readers of the context (``lspAssist.explainContext``, the model source of
next edits) must leave that memory as it was: a completion at A, then an explain at B
and a model rewrite, then a completion at A+1 gives the same prompt, with the same
reuse, as without the middle calls.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lsp_assist.backends.base import CancelToken, GenerationRequest, GenerationResult
from lsp_assist.config import parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving import CompletionEngine, CompletionQuery, NextEdits, Session
from tests.serving.fakes import MarkerBackend

BODY = "\n".join(
    f"def step_{i}(values):\n    total_{i} = sum(values) * {i}\n    return total_{i}\n\n"
    for i in range(60)
)
HELPER = "def scale_total(values, factor):\n    return [v * factor for v in values]\n"
TYPED = "    first = scale_total(values, 2)"


class KVBackend(MarkerBackend):
    """The marker backend with a KV cache per ``cache_key``: each completion's reuse is
    the prefix it shares with the last prompt of its key (as ``LocalBackend`` keeps a
    state per file); a rewrite answers nothing."""

    def __init__(self) -> None:
        super().__init__(step_s=0.0)
        self.kv: dict[str, list[int]] = {}
        self.completions: list[tuple[str, int]] = []
        """Each completion's prompt and the tokens it reused."""

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Record the prompt and its reuse; a rewrite ends at once."""
        if request.task_type == "next_edit":
            return GenerationResult(prompt_tokens=len(request.prompt_tokens), stop_reason="eos")
        tokens = list(request.prompt_tokens)
        last = self.kv.get(request.cache_key, [])
        reused = next(
            (i for i, (a, b) in enumerate(zip(last, tokens, strict=False)) if a != b),
            min(len(last), len(tokens)),
        )
        self.kv[request.cache_key] = tokens
        self.completions.append((self.detokenize(tokens), reused))
        return super().generate(request)


def _session(root: Path, backend: KVBackend) -> tuple[Session, str]:
    settings, warnings = parse_settings(
        {"metrics": False, "persist": False, "watch": False, "nextEdit": "model", "debounceMs": 0}
    )
    assert not warnings, warnings
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "scale.py").write_text(HELPER)
    path = root / "pkg" / "long.py"
    text = BODY + "\ndef work(values):\n    \n    pass\n"
    path.write_text(text)
    session = Session(settings, workspace=root, backend_factory=lambda s: backend)
    assert session.index is not None
    session.index.scan()
    assert session.load_backend() is backend
    session.buffers.open(path.as_uri(), text, version=1)
    return session, path.as_uri()


def _complete(engine: CompletionEngine, uri: str, line: int, column: int) -> None:
    snapshot = engine.session.buffers.snapshot(uri)
    assert snapshot is not None
    engine.complete(CompletionQuery(snapshot=snapshot, line=line, column=column))


def _typing(root: Path, middle: tuple[str, ...]) -> tuple[str, int]:
    """Type TYPED key by key (a completion at each), run ``middle``, then a new line;
    return the last completion's prompt and the tokens it reused."""
    backend = KVBackend()
    session, uri = _session(root, backend)
    engine = CompletionEngine(session)
    at = (BODY + "\ndef work(values):\n").count("\n")
    version = 1
    for column in range(4, len(TYPED)):
        version += 1
        where = Position(at, column)
        session.buffers.change(uri, version, [(where, where, TYPED[column])])
        _complete(engine, uri, at, column + 1)
    for call in middle:
        if call == "explain":  # lspAssist.explainContext at B, further up the file
            snapshot = session.buffers.snapshot(uri)
            assert snapshot is not None
            engine.explain(snapshot, 20, 4)
        elif call.startswith("rewrite"):  # the model source of next edits, at A or at B
            next_edits = NextEdits(session)
            cursor = Position(at, len(TYPED)) if call == "rewrite at A" else Position(20, 4)
            answer = next_edits.propose(uri, version, cursor)
            assert answer.job is not None
            next_edits.merge(answer, next_edits.rewrite(answer.job, CancelToken()))
    end = Position(at, len(TYPED))
    session.buffers.change(uri, version + 1, [(end, end, "\n    ")])
    _complete(engine, uri, at + 1, 4)
    session.close()
    return backend.completions[-1]


@pytest.mark.parametrize(
    "middle",
    [("explain",), ("rewrite at A",), ("rewrite at B",), ("explain", "rewrite at A")],
    ids=lambda calls: " + ".join(calls),
)
def test_only_a_completion_or_a_prefill_changes_what_the_next_prompt_keeps(
    tmp_path: Path, middle: tuple[str, ...]
) -> None:
    alone_prompt, alone_reused = _typing(tmp_path / "alone" / "ws", ())
    prompt, reused = _typing(tmp_path / "between" / "ws", middle)
    assert prompt == alone_prompt
    assert reused == alone_reused
    assert alone_reused > len(alone_prompt) // 2  # so the kept prompt is what was compared


def test_the_session_keys_the_memory_as_the_kv_state_and_drops_it_with_the_model(
    tmp_path: Path,
) -> None:
    backend = KVBackend()
    session, uri = _session(tmp_path / "ws", backend)
    engine = CompletionEngine(session)
    try:
        at = (BODY + "\ndef work(values):\n").count("\n")
        _complete(engine, uri, at, 4)
        context = session.context_engine()
        assert context is not None
        memory = session.memory_for(context)
        assert memory is not None and len(memory) == 1
        note = memory.recall(uri)  # the completion's cache_key: the document's URI
        assert note is not None and note.line.line == at
        assert backend.kv.keys() == {uri}
        snapshot = session.buffers.snapshot(uri)
        assert snapshot is not None
        engine.explain(snapshot, 20, 4)
        assert memory.recall(uri) is note and len(memory) == 1  # an explain only reads
        engine.prefill(snapshot, 20, 4)  # a prefill writes, as a completion does
        prefilled = memory.recall(uri)
        assert prefilled is not None and prefilled.line.line == 20
        session.update_settings(
            dataclasses.replace(
                session.settings,
                model=dataclasses.replace(session.settings.model, model_path="other.gguf"),
            )
        )
        assert session.memory_for(context) is None  # dropped with the engine of that model
        assert session.load_backend() is backend
        again = session.context_engine()
        assert again is not None and again is not context
        fresh = session.memory_for(again)
        assert fresh is not None and len(fresh) == 0
    finally:
        session.close()
