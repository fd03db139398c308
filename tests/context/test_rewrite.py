"""The next-edit prompt and the way back from a rewrite to edits (context/rewrite*.py)."""

from __future__ import annotations

from lsp_assist.backends.base import ModelInfo
from lsp_assist.context import (
    LineEdit,
    Rejoin,
    choose_rewrite_format,
    edit_window,
    fit_rewrite_prompt,
    original_window,
    recent_edits,
    rewrite_prompt,
    smallest_edits,
)
from lsp_assist.documents import EditHistory

CODE = "def f(total):\n    x = total\n    y = total + 1\n    return x, y\n"


def renamed_history(text: str, old: str, new: str, at: int) -> tuple[str, EditHistory]:
    """``text`` with ``old`` at offset ``at`` replaced by ``new``, and that one change."""
    history = EditHistory(text)
    history.record(at, old, new, now=1.0)
    return text[:at] + new + text[at + len(old) :], history


def test_the_window_is_clamped_to_the_document_and_knows_its_last_line() -> None:
    lines = [f"line {i}" for i in range(30)]
    window = edit_window(lines, 10, above=4, below=8)
    assert (window.first, window.end, window.last_of_document) == (6, 19, False)
    assert window.text.startswith("line 6\n") and window.text.endswith("line 18\n")
    top = edit_window(lines, 1, above=4, below=8)
    bottom = edit_window(lines, 29, above=4, below=8)
    assert (top.first, top.end) == (0, 10)
    assert (bottom.first, bottom.end, bottom.last_of_document) == (25, 30, True)


def test_recent_edits_show_each_change_against_the_text_it_was_made_in() -> None:
    history = EditHistory(CODE)
    history.record(6, "total", "count", now=1.0)  # the parameter, line 0
    text = CODE.replace("f(total)", "f(count)")
    at = text.index("x = total") + 4
    history.record(at, "total", "count", now=10.0)  # a later burst: the first use, line 1
    text = text[:at] + "count" + text[at + 5 :]
    shown = recent_edits(text, history.changes())
    assert [e.line for e in shown] == [0, 0]
    # the older change in the text it was made in: the use still says total
    assert shown[0].before == "def f(total):\n    x = total\n"
    assert shown[0].after == "def f(count):\n    x = total\n"
    assert shown[1].before == "def f(count):\n    x = total\n    y = total + 1\n"
    assert shown[1].after == "def f(count):\n    x = count\n    y = total + 1\n"
    assert recent_edits(text, history.changes(), limit=1) == shown[1:]


def test_a_history_that_no_longer_lines_up_shows_nothing_older() -> None:
    _, history = renamed_history(CODE, "total", "count", 6)
    assert recent_edits(CODE, history.changes()) == []  # the text is not the one after it


def test_the_original_window_undoes_the_newest_change_inside_it() -> None:
    text, history = renamed_history(CODE, "total", "count", 6)
    window = edit_window(text.split("\n"), 1)
    assert original_window(text, window, history.last()).startswith("def f(total):\n")
    far = edit_window([str(i) for i in range(40)], 30)
    assert original_window(text, far, history.last()) == far.text


def test_the_sweep_format_is_for_sweep_models_only() -> None:
    assert choose_rewrite_format(ModelInfo(path="m", name="sweep-next-edit-1.5B")) == "sweep"
    assert choose_rewrite_format(ModelInfo(path="m", name="Qwen2.5 Coder 1.5B")) == "instruct"


def test_the_sweep_prompt_has_its_blocks_in_order_and_ends_where_the_model_writes() -> None:
    text, history = renamed_history(CODE, "total", "count", 6)
    window = edit_window(text.split("\n"), 1)
    edits = recent_edits(text, history.changes())
    original = original_window(text, window, history.last())
    prompt = rewrite_prompt("sweep", "a.py", "python", window, original, edits, [("b.py", "X=1")])
    heads = ["<|file_sep|>b.py\n", "<|file_sep|>a.py.diff\noriginal:\n", "updated:\n"]
    heads += ["<|file_sep|>original/a.py\n", "<|file_sep|>current/a.py\n"]
    at = [prompt.index(h) for h in heads]
    assert at == sorted(at)
    assert prompt.endswith("<|file_sep|>updated/a.py\n")
    assert "current/a.py\n" + window.text in prompt


def test_the_instruct_prompt_asks_for_the_window_in_a_fence_it_opens() -> None:
    text, history = renamed_history(CODE, "total", "count", 6)
    window = edit_window(text.split("\n"), 1)
    edits = recent_edits(text, history.changes())
    prompt = rewrite_prompt("instruct", "a.py", "python", window, window.text, edits, [])
    assert prompt.endswith("<|im_start|>assistant\n```python\n")
    assert f"```python\n{window.text}```<|im_end|>" in prompt
    assert "Definitions from other files" not in prompt


def test_the_budget_drops_related_code_first_then_the_oldest_edits() -> None:
    calls: list[tuple[int, int]] = []

    def build(edits: object, related: object) -> str:
        calls.append((len(edits), len(related)))  # type: ignore[arg-type]
        return "x" * (10 * len(edits) + 100 * len(related))  # type: ignore[arg-type]

    prompt, tokens = fit_rewrite_prompt(build, len, 25, [1, 2, 3], ["a", "b"])  # type: ignore[list-item]
    assert calls == [(3, 2), (3, 1), (3, 0), (2, 0)]
    assert tokens == 20 and len(prompt) == 20
    calls.clear()
    _, tokens = fit_rewrite_prompt(build, len, 5, [1, 2], [])  # type: ignore[list-item]
    assert calls == [(2, 0), (1, 0)] and tokens == 10  # the newest edit always stays


def test_the_rewrite_stops_once_it_rejoined_the_window_after_a_change() -> None:
    window = ["a = 1", "b = total", "c = 3", "d = 4", "e = 5"]
    rule = Rejoin(window, lines=2)
    assert rule("a = 1\nb = count\n") is None
    assert rule("a = 1\nb = count\nc = 3\n") is None
    text = "a = 1\nb = count\nc = 3\nd = 4\n"
    assert rule(text) == len(text)
    assert rule.rest == ("e = 5",)


def test_a_copy_without_a_change_runs_to_the_windows_end_and_no_further() -> None:
    window = ["a = 1", "b = 2", "c = 3", "d = 4"]
    rule = Rejoin(window, lines=2)
    assert rule("a = 1\nb = 2\nc = 3\n") is None
    assert rule("a = 1\nb = 2\nc = 3\nd = 4\n") is not None
    assert rule.rest == ()
    assert rule("a = 1\nb = 2\nc = 3\nd = 4") is None  # a line still being written


def test_a_renamed_use_is_an_edit_of_the_name_not_of_its_line() -> None:
    window = edit_window(CODE.split("\n")[:-1], 1)
    rewritten = ["def f(count):", "    x = count", "    y = count + 1", "    return x, y"]
    assert smallest_edits(window, rewritten) == [
        LineEdit(0, 6, 0, 11, "count"),
        LineEdit(1, 8, 1, 13, "count"),
        LineEdit(2, 8, 2, 13, "count"),
    ]


def test_inserted_and_deleted_lines_are_whole_line_edits() -> None:
    lines = ["a", "b", "c", "d", "tail"]
    window = edit_window(lines, 1, above=1, below=2)  # a b c d, not the last line
    inserted = smallest_edits(window, ["a", "b", "new", "c", "d"])
    assert inserted == [LineEdit(2, 0, 2, 0, "new\n")]
    assert smallest_edits(window, ["a", "c", "d"]) == [LineEdit(1, 0, 2, 0, "")]


def test_the_documents_last_line_has_no_line_break_to_replace() -> None:
    window = edit_window(["a", "b"], 1)
    assert window.last_of_document
    assert smallest_edits(window, ["a", "b", "c"]) == [LineEdit(1, 1, 1, 1, "\nc")]
    assert smallest_edits(window, ["a", "x", "y"]) == [LineEdit(1, 0, 1, 1, "x\ny")]


def test_a_block_with_an_added_line_keeps_the_other_lines_word_edits() -> None:
    lines = ["x = total", "print(total)", "return total", "end"]
    window = edit_window(lines, 0, above=0, below=2)
    rewritten = ["x = count", "print(count)", "log(count)", "return count"]
    assert smallest_edits(window, rewritten) == [
        LineEdit(0, 4, 0, 9, "count"),
        LineEdit(1, 6, 1, 11, "count"),
        LineEdit(2, 0, 2, 0, "log(count)\n"),
        LineEdit(2, 7, 2, 12, "count"),
    ]
