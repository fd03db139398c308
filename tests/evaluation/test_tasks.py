"""Task generation: deterministic, cross-file lines really call another file, holes are blank."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lsp_assist.config import IndexSettings
from lsp_assist.evaluation.peers.llmls_row import window_prompt
from lsp_assist.evaluation.tasks import (
    Task,
    blank_line,
    generate_tasks,
    identifiers,
    key_identifier,
    prompt_leaks,
)
from lsp_assist.evaluation.workspace import blanked_bytes, prepare_workspace, siblings
from lsp_assist.index.workspace import WorkspaceIndex
from tests.evaluation import python_task

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ws"


def scanned(root: Path = FIXTURE) -> WorkspaceIndex:
    index = WorkspaceIndex([root], IndexSettings(watch=False))
    index.scan()
    return index


def tasks_of(seed: int, **counts: int) -> list[Task]:
    index = scanned()
    try:
        return generate_tasks(index, seed=seed, **counts)
    finally:
        index.stop()


COUNTS = {"cross_file": 6, "in_file": 4, "typing": 2}


def test_the_same_seed_gives_the_same_tasks_from_a_fresh_index() -> None:
    first = [t.to_json() for t in tasks_of(14, **COUNTS)]
    second = [t.to_json() for t in tasks_of(14, **COUNTS)]
    assert first == second
    assert [Task.from_json(t) for t in first] == tasks_of(14, **COUNTS)
    others = [[t.to_json() for t in tasks_of(seed, **COUNTS)] for seed in (1, 2, 3)]
    assert any(other != first for other in others)


def test_counts_kinds_and_ids() -> None:
    tasks = tasks_of(14, **COUNTS)
    by_kind = {k: [t for t in tasks if t.kind == k] for k in COUNTS}
    assert {k: len(v) for k, v in by_kind.items()} == COUNTS
    assert [t.id for t in by_kind["cross_file"]] == [f"x{i:03d}" for i in range(1, 7)]
    spots = [(t.path, t.line) for t in tasks]
    assert len(spots) == len(set(spots))


def test_cross_file_lines_call_a_definition_of_another_file() -> None:
    index = scanned()
    try:
        tasks = generate_tasks(index, seed=14, **COUNTS)
        cross = [t for t in tasks if t.kind == "cross_file"]
        for task in cross:
            assert task.definition and task.definition != task.path
            assert re.search(rf"\b{re.escape(task.called)}\s*\(", task.target), task
            assert task.key == task.called
            definition = index.text_of(FIXTURE / task.definition) or ""
            assert any(n in definition for n in task.needles), task
            assert task.called in " ".join(task.needles)
        # both languages of the fixture, and the module form (pricing.tax_for)
        assert {t.language for t in cross} == {"python", "javascript"}
        everything = generate_tasks(index, seed=14, cross_file=50, in_file=0, per_file=50)
        forms = {t.target.strip() for t in everything}
        assert "tax = pricing.tax_for(shop.region, item.price)" in forms
        assert "const shown = formatPrice(sum, this.currency);" in forms
        # a call of a name defined in the same file is not cross-file
        assert "owed = tax_for(region, amount)" not in forms
    finally:
        index.stop()


def test_lines_are_unique_whole_statements_never_definitions_or_imports() -> None:
    tasks = tasks_of(14, cross_file=50, in_file=50, typing=0)
    for task in tasks:
        stripped = task.target.strip()
        assert not stripped.startswith(("def ", "class ", "import ", "from ", "#", "//"))
        assert not stripped.startswith(('"""', "export function"))
        assert not stripped.endswith(("(", ",", ":", "{"))
    texts = [p.read_text() for p in FIXTURE.rglob("*.*")]
    for task in tasks:
        count = sum(x.strip() == task.target.strip() for t in texts for x in t.split("\n"))
        assert count == 1, task


def test_typed_lines_are_inside_a_block_and_not_a_hole() -> None:
    tasks = tasks_of(14, cross_file=20, in_file=20, typing=4)
    holes = {(t.path, t.line) for t in tasks if t.kind != "typing"}
    typed = [t for t in tasks if t.kind == "typing"]
    assert typed
    for task in typed:
        assert task.indent > 0 and 16 <= len(task.expected) <= 60
        assert (task.path, task.line) not in holes


def test_blanking_keeps_the_indentation_and_the_line_breaks() -> None:
    text = "def f():\r\n    return g(1)\r\n"
    assert blank_line(text, 1, 4) == "def f():\r\n    \r\n"
    task = python_task("x", "in_file", "a.py", 1, "    return g(1)")
    assert blanked_bytes(text.encode(), task) == b"def f():\r\n    \r\n"
    assert task.expected == "return g(1)"


def test_the_leak_check_finds_the_line_only_as_a_whole_line() -> None:
    target = "    shop = Shop(region)"
    assert prompt_leaks("a\n  shop = Shop(region)  \nb", target)
    assert not prompt_leaks("a\nshop = Shop(region) + 1\nb", target)
    assert not prompt_leaks("anything", "   ")
    # next to the special tokens of a prompt format: a FIM suffix starts on the cursor line
    assert prompt_leaks("<fim_prefix>a\n    <fim_suffix>shop = Shop(region)\nb", target)
    assert prompt_leaks("x\nshop = Shop(region)<|fim_middle|>", target)
    assert not prompt_leaks("<fim_suffix>shop = Shop(region, 2)", target)


def test_key_identifiers_skip_keywords() -> None:
    assert key_identifier("return round(x, 2)") == "round"
    assert key_identifier("y = func(*args)") == "func"
    assert key_identifier("const id = slugify(name);", "javascript") == "slugify"
    assert identifiers("return self.x if y else None") == ["self", "x", "y"]


def test_prepare_copies_indexes_and_never_touches_the_source(tmp_path: Path) -> None:
    before = {p: p.read_bytes() for p in FIXTURE.rglob("*") if p.is_file()}
    workspace, tasks = prepare_workspace(
        FIXTURE, [], cross_file=3, in_file=2, typing=1, seed=14, scratch=tmp_path / "s"
    )
    try:
        assert tasks == tasks_of(14, cross_file=3, in_file=2, typing=1)
        copied = {p.relative_to(workspace.root) for p in workspace.root.rglob("*") if p.is_file()}
        assert copied == {p.relative_to(FIXTURE) for p in before}
        for task in tasks:
            assert workspace.originals[task.path] == (FIXTURE / task.path).read_bytes()
            others = siblings(workspace, task, 2, 14)
            assert task.path not in others and len(others) <= 2
            assert all(o.rsplit("/", 1)[0] == task.path.rsplit("/", 1)[0] for o in others)
        assert workspace.scratch.parent == tmp_path / "s"
        # the index the servers will start from is on disk already
        assert any(p.is_file() for p in workspace.cache_dir.rglob("*"))
    finally:
        workspace.cleanup()
    assert (tmp_path / "s").is_dir() and not workspace.scratch.exists()
    assert {p: p.read_bytes() for p in FIXTURE.rglob("*") if p.is_file()} == before


def _count(text: str) -> int:
    return len(text)


def test_the_peer_window_is_llm_ls_prompt() -> None:
    text = "a = 1\nb = 2\nc = 3\nd = 4\ne = 5\n"
    # prefix only: whole lines before the cursor, the cursor line cut at the column
    assert window_prompt(text, 3, 2, _count, window=100) == "a = 1\nb = 2\nc = 3\nd "
    # the window drops whole lines from the top once it is full
    assert window_prompt(text, 3, 2, _count, window=14) == "b = 2\nc = 3\nd "
    assert window_prompt(text, 3, 2, _count, window=13) == "c = 3\nd "
    fim = ("<P>", "<S>", "<M>")
    # FIM: a line before and a line after in turn, 3 tokens kept for the markers
    got = window_prompt(text, 2, 0, _count, window=3 + 6 + 6 + 6, fim=fim)
    assert got == "<P>b = 2\n<S>c = 3\nd = 4\n<M>"
    whole = window_prompt(text, 2, 0, _count, window=1000, fim=fim)
    assert whole == "<P>a = 1\nb = 2\n<S>c = 3\nd = 4\ne = 5\n<M>"


@pytest.mark.parametrize("seed", [14, 99])
def test_tasks_of_a_workspace_without_imports_are_in_file(tmp_path: Path, seed: int) -> None:
    (tmp_path / "solo.py").write_text(
        "def double(x):\n    value = x * 2\n    return value + 0\n\n\nresult = double(21)\n"
    )
    index = scanned(tmp_path)
    try:
        tasks = generate_tasks(index, seed=seed, cross_file=3, in_file=3)
    finally:
        index.stop()
    assert tasks and all(t.kind == "in_file" for t in tasks)
