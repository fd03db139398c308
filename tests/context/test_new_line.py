"""A new line below the last build keeps the prompt's head and the zone's first line.

At the first keystroke of each new line the zone used to be chosen afresh around the
cursor (its first line moved) and the file summary with it, so ~300-400 tokens were
evaluated again: 1.3-1.7 s a new line with the embedded model on this CPU.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

from lsp_assist.config import ContextSettings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.memory import zone_growth
from lsp_assist.context.model import AssembledPrompt, Cursor
from lsp_assist.context.tokens import ApproxTokenizer
from tests.support.workspace import scanned_index

from .completions import Completions
from .fakes import GEMMA_LIKE, QWEN_LIKE

BODY = "\n".join(
    f"def step_{i}(values):\n    total_{i} = sum(values) * {i}\n    return total_{i}\n\n"
    for i in range(60)
)
TYPED = ["    first = len(values)", "    second = first * 2", "    third = second + first"]


def _engine(root: Path, **changes: object) -> tuple[Completions, Path]:
    index = scanned_index(root, {"pkg/long.py": BODY + "\ndef work(values):\n    pass\n"})
    settings = dataclasses.replace(ContextSettings(), context_budget=400, **changes)  # type: ignore[arg-type]
    engine = ContextEngine(index, ApproxTokenizer(GEMMA_LIKE.special_tokens), GEMMA_LIKE, settings)
    return Completions(engine), root / "pkg" / "long.py"


def _type_lines(engine: Completions, path: Path) -> list[AssembledPrompt]:
    """Type TYPED one line after another into ``work``; the prompt at each line's start."""
    base = (BODY + "\ndef work(values):\n").split("\n")
    first = len(base) - 1
    prompts = []
    for k, line in enumerate(TYPED):
        lines = base[:first] + TYPED[:k] + ["    "] + ["    pass", ""]
        text = "\n".join(lines)
        cursor = Cursor(path=path, language="python", text=text, line=first + k, column=4)
        prompts.append(engine.build(cursor))
        # the rest of the line, keystroke by keystroke, as an editor sends it
        for end in range(5, len(line) + 1):
            lines[first + k] = line[:end]
            engine.build(dataclasses.replace(cursor, text="\n".join(lines), column=end))
    return prompts


def _common(a: list[int], b: list[int]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def test_a_new_line_evaluates_only_what_was_typed_since(tmp_path: Path) -> None:
    engine, path = _engine(tmp_path)
    prompts = _type_lines(engine, path)
    for before, after in itertools.pairwise(prompts):
        zone = {layer.name: layer for layer in after.layers}["editing_zone"]
        new = len(after.tokens) - _common(before.tokens, after.tokens)
        assert new <= 24, (new, zone.items)
        assert len(after.tokens) <= 400


def test_a_fresh_build_leaves_room_to_grow(tmp_path: Path) -> None:
    engine, path = _engine(tmp_path)
    prompt = _type_lines(engine, path)[0]
    assert len(prompt.tokens) <= 400 - zone_growth(400)


def test_a_jump_down_the_file_builds_afresh(tmp_path: Path) -> None:
    # a prefill at the top of the file (as the server does at didOpen), then a request
    # further down: the prompt is the fresh build's, as `lsp-assist context` shows it
    engine, path = _engine(tmp_path)
    text = BODY + "\ndef work(values):\n    pass\n"
    top = Cursor(path=path, language="python", text=text, line=0, column=0)
    below = dataclasses.replace(top, line=20, column=4)
    engine.build(top)
    fresh, _ = _engine(tmp_path / "again")
    fresh_path = tmp_path / "again" / "pkg" / "long.py"
    expected = fresh.build(dataclasses.replace(below, path=fresh_path)).prompt
    assert engine.build(below).prompt == expected.replace(str(fresh_path), str(path))


def test_a_new_line_keeps_the_related_layer_a_typed_call_would_change(tmp_path: Path) -> None:
    """The first line typed calls a definition of another file: a fresh build at the next
    line would put it in the related layer and evaluate the whole prompt again; the
    build at the next line keeps the last one's layers and appends (issue 20, part 5)."""
    model = QWEN_LIKE  # the default's format (the comment format's zone here is at its line cap)
    helper = "def scale_total(values, factor):\n    return [v * factor for v in values]\n"
    index = scanned_index(
        tmp_path,
        {"pkg/long.py": BODY + "\ndef work(values):\n    pass\n", "pkg/scale.py": helper},
    )
    settings = dataclasses.replace(ContextSettings(), context_budget=600)
    engine = Completions(
        ContextEngine(index, ApproxTokenizer(model.special_tokens), model, settings)
    )
    path = tmp_path / "pkg" / "long.py"
    base = (BODY + "\ndef work(values):\n").split("\n")
    at = len(base) - 1
    typed = "    first = scale_total(values, 2)"

    def build(lines: list[str], line: int, column: int) -> AssembledPrompt:
        text = "\n".join(lines)
        index.open_buffer(path, text)
        return engine.build(
            Cursor(path=path, language="python", text=text, line=line, column=column)
        )

    lines = [*base[:at], "    ", "    pass", ""]
    for end in range(4, len(typed) + 1):
        lines[at] = typed[:end]
        last = build(lines, at, end)
    related = {layer.name: layer for layer in last.layers}["related"]
    lines = [*base[:at], typed, "    ", "    pass", ""]
    after = build(lines, at + 1, 4)
    assert {layer.name: layer for layer in after.layers}["related"].text == related.text
    assert len(after.tokens) - _common(last.tokens, after.tokens) <= 8
    # a fresh build at the same place (another engine, no history) chooses the call
    fresh_engine = ContextEngine(index, ApproxTokenizer(model.special_tokens), model, settings)
    text = "\n".join(lines)
    fresh = fresh_engine.build(
        Cursor(path=path, language="python", text=text, line=at + 1, column=4)
    )
    assert "scale_total" in {layer.name: layer for layer in fresh.layers}["related"].text
    assert "scale_total" not in related.text  # so keeping the layer is what was tested


def test_an_edit_after_the_cursor_keeps_the_head_of_the_build_at_that_line(
    tmp_path: Path,
) -> None:
    # A prefill where the cursor rests (lspAssist/didMoveCursor), then the user deletes
    # the statement there and the two lines below it and starts typing: the prompt keeps
    # the prefilled head and zone start (only the zone's end and the suffix change).
    for fmt in (GEMMA_LIKE, QWEN_LIKE):
        root = tmp_path / fmt.name
        index = scanned_index(root, {"pkg/long.py": BODY})
        settings = dataclasses.replace(ContextSettings(), context_budget=400)
        engine = Completions(
            ContextEngine(index, ApproxTokenizer(fmt.special_tokens), fmt, settings)
        )
        path = root / "pkg" / "long.py"
        lines = BODY.split("\n")
        row = 4 * 30 + 1  # "    total_30 = sum(values) * 30"
        rested = engine.build(Cursor(path=path, language="python", text=BODY, line=row, column=4))
        edited = [*lines[:row], "    ", *lines[row + 3 :]]
        cursor = Cursor(path=path, language="python", text="\n".join(edited), line=row, column=4)
        after = engine.build(cursor)
        head = {layer.name: layer.tokens for layer in rested.layers}
        before_zone = sum(v for k, v in head.items() if k != "editing_zone")
        assert head["file_summary"] > 0, head
        kept = _common(rested.tokens, after.tokens)
        assert kept >= before_zone + 20, (fmt.name, kept, head)
