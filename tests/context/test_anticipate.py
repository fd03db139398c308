"""The related layer at the start of a statement: which workspace definitions it anticipates.

A fixture workspace goes through the real WorkspaceIndex; the cursor sits at the
indentation of an empty line, so nothing of the next call is typed yet.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from lsp_assist.config import ContextSettings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.model import AssembledPrompt, Cursor, LayerItem
from lsp_assist.context.retrieval import Candidate, Retriever
from lsp_assist.context.tokens import ApproxTokenizer
from lsp_assist.index.model import Symbol
from tests.support.workspace import scanned_index

from .fakes import GEMMA_LIKE

CURSOR = "<|>"

GEOMETRY = '''"""Shapes and their measures."""


def area(shape):
    """Return the area of a shape."""
    return shape.width * shape.height


def perimeter(shape):
    return 2 * (shape.width + shape.height)


class Square:
    def __init__(self, side):
        self.width = self.height = side
'''

RENDER = '''"""Drawing on a canvas."""


def draw(shape, canvas):
    """Draw one shape."""
    canvas.append(("shape", shape))


def clear(canvas):
    canvas.clear()


def flush(canvas):
    return list(canvas)
'''

LEGACY = '''"""Not imported by anyone."""


def tally(rows):
    return [LEGACY_SENTINEL for _ in rows]
'''

MAIN = '''"""Reports and pictures."""
from app import render
from app.geometry import Square, area, perimeter
from app.render import clear, draw


def report(shape):
    size = area(shape)
    edge = perimeter(shape)
    return size, edge


def paint(canvas, shapes):
    tally = 0
    clear(canvas)
    canvas.append("start")
    for shape in shapes:
        <|>
        tally += 1
    for shape in shapes:
        draw(shape, canvas)
    return tally


def picture(canvas, shapes):
    for shape in shapes:
        draw(shape, canvas)
    return render.flush(canvas)
'''


def workspace(tmp_path: Path, main: str = MAIN) -> tuple[object, Cursor]:
    """Write the fixture, scan it, and return the index and the cursor (at ``<|>``)."""
    files = {
        "app/__init__.py": "",
        "app/geometry.py": GEOMETRY,
        "app/render.py": RENDER,
        "app/legacy.py": LEGACY,
    }
    offset = main.index(CURSOR)
    text = main.replace(CURSOR, "")
    index = scanned_index(tmp_path, {**files, "app/main.py": text})
    path = (tmp_path / "app" / "main.py").resolve()
    line = main.count("\n", 0, offset)
    column = offset - (main.rfind("\n", 0, offset) + 1)
    return index, Cursor(path=path, language="python", text=text, line=line, column=column)


def build(index: object, cursor: Cursor, **changes: object) -> AssembledPrompt:
    settings = dataclasses.replace(ContextSettings(), **changes)  # type: ignore[arg-type]
    engine = ContextEngine(
        index,  # type: ignore[arg-type]
        ApproxTokenizer(GEMMA_LIKE.special_tokens),
        GEMMA_LIKE,
        settings,
        relative=index.relative,  # type: ignore[attr-defined]
    )
    return engine.build(cursor)


def related(prompt: AssembledPrompt) -> dict[str, LayerItem]:
    layer = next(x for x in prompt.layers if x.name == "related")
    return {item.symbol: item for item in layer.items}


def test_a_call_later_in_the_function_ranks_first(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    prompt = build(index, cursor)
    items = related(prompt)
    # draw is called further down in paint (after the cursor, which a prefix-only
    # prompt does not show), area and perimeter only in another function
    assert "draw" in items and "used in this function" in items["draw"].reason
    assert items["draw"].score > items["area"].score
    assert items["draw"].score > items["perimeter"].score
    assert "def draw(shape, canvas):" in prompt.prompt
    assert prompt.total_tokens <= prompt.budget


def test_an_import_nothing_uses_yet_is_anticipated(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    items = related(build(index, cursor))
    assert "imported, not used yet" in items["Square"].reason
    # it outranks a function used only in another function
    assert items["Square"].score > items["perimeter"].score


def test_a_module_member_used_by_a_similar_function(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    items = related(build(index, cursor))
    # render.flush is reached through the imported module, in picture(), which
    # handles the same objects as paint()
    assert "render.flush of an imported file" in items["flush"].reason
    assert "similar function" in items["flush"].reason


def test_an_unrelated_definition_under_the_threshold_stays_out(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    # paint's local variable ``tally`` shares its name with legacy.py's function (a
    # file nothing imports): found by name only, it scores under the threshold
    loose = related(build(index, cursor, related_threshold=0.0))
    assert "tally" in loose and loose["tally"].score < ContextSettings().related_threshold
    prompt = build(index, cursor)
    assert "tally" not in related(prompt)
    assert "LEGACY_SENTINEL" not in prompt.prompt and "app/legacy.py" not in prompt.prompt


def test_typing_within_the_line_keeps_the_layer(tmp_path: Path) -> None:
    index, cursor = workspace(tmp_path)
    lines = cursor.text.split("\n")
    texts = []
    for typed in ("", "d", "dr", "dra"):
        row = lines[cursor.line][: cursor.column] + typed
        text = "\n".join([*lines[: cursor.line], row, *lines[cursor.line + 1 :]])
        moved = dataclasses.replace(cursor, text=text, column=cursor.column + len(typed))
        layer = next(x for x in build(index, moved).layers if x.name == "related")
        texts.append(layer.text)
    assert texts[0] and all(t == texts[0] for t in texts)


def test_signatures_of_all_before_any_body() -> None:
    def sym(name: str, line: int) -> Symbol:
        return Symbol(
            name, "function", Path("/ws/a.py"), line, line + 9, signature=f"def {name}():"
        )

    class Lines:
        text = "\n".join(
            f"def f{i}():" if i % 10 == 0 else f"    x{i} = {i}  # body" for i in range(40)
        )

        def file(self, path: Path) -> None:
            return None

        def text_of(self, path: Path) -> str:
            return self.text

        def symbols_of(self, path: Path) -> list[Symbol]:
            return []

    retriever = Retriever(Lines(), lambda p: p.name)  # type: ignore[arg-type]
    scores = [0.9, 0.7, 0.5, 0.4]
    cands = [Candidate(sym(f"f{k}", k * 10), "a.py", s, "", "python") for k, s in enumerate(scores)]

    def count(text: str) -> int:
        return len(text) // 2

    sig_cost = count("def f0(): ...\n")
    chosen = retriever.select(cands, 4 * sig_cost + 2, count, lambda source: 2)
    # the budget holds four signatures or one body: every candidate gets its signature
    assert [c.candidate.symbol.name for c in chosen] == ["f0", "f1", "f2", "f3"]
    assert {c.form for c in chosen} == {"signature"}
    roomy = retriever.select(cands, 1000, count, lambda source: 2)
    # with room, bodies go to the candidates that score at least BODY_SCORE
    assert [c.form for c in roomy] == ["full", "full", "signature", "signature"]
