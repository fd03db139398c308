"""The prompt is a query: what a build keeps for the next one is a ``PromptMemory`` it is
handed, read by the build and written only by its owner (``remember``).

Typing new lines into a long file is where the memory shows: a build that reads the
last build's note keeps its zone start and head, a fresh build chooses again (the new
line calls another file's definition, which a fresh build adds to the related layer).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lsp_assist.config import ContextSettings
from lsp_assist.context import AssembledPrompt, ContextEngine, Cursor, PromptMemory
from lsp_assist.context.tokens import ApproxTokenizer
from lsp_assist.index.workspace import WorkspaceIndex
from tests.support.workspace import scanned_index

from .completions import Completions
from .fakes import QWEN_LIKE

BODY = "\n".join(
    f"def part_{i}(items):\n    count_{i} = len(items) + {i}\n    return count_{i}\n\n"
    for i in range(60)
)
HELPER = "def scale_total(values, factor):\n    return [v * factor for v in values]\n"
TYPED = "    first = scale_total(values, 2)"


def _workspace(root: Path) -> tuple[WorkspaceIndex, Path]:
    files = {"pkg/long.py": BODY + "\ndef work(values):\n    pass\n", "pkg/scale.py": HELPER}
    return scanned_index(root, files), root / "pkg" / "long.py"


def _engine(index: WorkspaceIndex) -> ContextEngine:
    settings = dataclasses.replace(ContextSettings(), context_budget=600)
    return ContextEngine(index, ApproxTokenizer(QWEN_LIKE.special_tokens), QWEN_LIKE, settings)


def _cursors(index: WorkspaceIndex, path: Path) -> list[Cursor]:
    """TYPED key by key on a new line of ``work``, then the first key of the next line."""
    base = (BODY + "\ndef work(values):\n").split("\n")
    at = len(base) - 1
    out = []
    lines = [*base[:at], "    ", "    pass", ""]
    for end in range(4, len(TYPED) + 1):
        lines[at] = TYPED[:end]
        out.append(Cursor(path=path, language="python", text="\n".join(lines), line=at, column=end))
    lines = [*base[:at], TYPED, "    ", "    pass", ""]
    out.append(Cursor(path=path, language="python", text="\n".join(lines), line=at + 1, column=4))
    index.open_buffer(path, out[-1].text)
    return out


def _related(prompt: AssembledPrompt) -> str:
    return {layer.name: layer for layer in prompt.layers}["related"].text


def _typed(root: Path) -> tuple[WorkspaceIndex, list[Cursor], Completions]:
    """The workspace, its cursors, and completions made at all of them but the last."""
    index, path = _workspace(root)
    cursors = _cursors(index, path)
    typing = Completions(_engine(index))
    for cursor in cursors[:-1]:
        typing.build(cursor)
    return index, cursors, typing


def test_a_build_without_memory_is_the_same_whatever_was_built_before(tmp_path: Path) -> None:
    index, cursors, typing = _typed(tmp_path)
    engine = typing.engine
    for cursor in cursors[:-1]:
        engine.build(cursor)
    after = cursors[-1]
    kept = typing.build(after)
    pure = engine.build(after)
    assert pure.prompt == _engine(index).build(after).prompt  # a new engine: no history
    assert pure.tokens == engine.build(after).tokens
    # the memory is what made the difference: the kept build kept the line's related layer
    assert "scale_total" in _related(pure) and "scale_total" not in _related(kept)


def test_a_build_reads_the_memory_and_never_writes_it(tmp_path: Path) -> None:
    _, cursors, typing = _typed(tmp_path / "read" / "ws")
    engine, path = typing.engine, cursors[0].path
    memory = typing.memory
    slot = str(path)
    note = memory.recall(slot)
    assert note is not None and len(memory) == 1
    elsewhere = dataclasses.replace(cursors[-1], line=20, column=4)
    read = engine.build(elsewhere, memory=memory)  # read, not remembered
    assert read.note is not None and read.note is not note
    assert memory.recall(slot) is note and len(memory) == 1
    # the next completion keeps what the last one kept, as if the read never happened
    _, others, alone = _typed(tmp_path / "alone" / "ws")
    assert typing.build(cursors[-1]).prompt == alone.build(others[-1]).prompt


def test_the_memory_keeps_the_most_recently_remembered_slots(tmp_path: Path) -> None:
    index, path = _workspace(tmp_path)
    engine = _engine(index)
    cursor = _cursors(index, path)[0]
    notes = [engine.build(cursor, slot=f"file:///{n}.py").note for n in range(3)]
    assert all(note is not None for note in notes)
    memory = PromptMemory(slots=2)
    memory.remember(notes[0])
    memory.remember(notes[1])
    assert memory.recall("file:///0.py") is notes[0]  # reading does not make it recent
    memory.remember(notes[2])
    assert len(memory) == 2 and memory.recall("file:///0.py") is None
    assert memory.recall("file:///1.py") is notes[1] and memory.recall("file:///2.py") is notes[2]
    memory.remember(None)  # a baseline build keeps nothing
    memory.forget("file:///1.py")
    assert len(memory) == 1
    assert engine.build(cursor, strategy="baseline").note is None


def test_related_definitions_are_the_related_layer_of_a_fresh_build(tmp_path: Path) -> None:
    index, path = _workspace(tmp_path)
    engine = _engine(index)
    after = _cursors(index, path)[-1]
    items = engine.related_definitions(after)
    layer = {layer.name: layer for layer in engine.build(after).layers}["related"]
    assert [(i.source, i.symbol, i.text) for i in items] == [
        (i.source, i.symbol, i.text) for i in layer.items
    ]
    assert any(i.symbol == "scale_total" and "def scale_total(values" in i.text for i in items)
    small = engine.related_definitions(after, budget=200)
    assert sum(i.tokens for i in small) <= sum(i.tokens for i in items)
