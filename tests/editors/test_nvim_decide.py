"""The Neovim plugin's request/show decisions (editors/nvim/lua/lsp-assist/decide.lua).

The module is pure: nvim_decide.lua loads it with the Lua standard library only (no
``vim``, so a decision that reaches for the editor fails) and runs the calls each test
sends, in ``nvim --headless -l``; the tests assert what each decision returns. The
headless and tmux tests of test_nvim.py check the same decisions through the editor.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .support.nvim import HERE, headless, needs_nvim
from .support.project import EDITORS

pytestmark = [pytest.mark.editor, needs_nvim]

INLINE = "textDocument/inlineCompletion"
COMPLETION = "textDocument/completion"


def place(tick: int = 7, row: int = 4, col: int = 10, bufnr: int = 1) -> dict[str, int]:
    """The cursor at byte ``col`` of line ``row`` (0-based) in ``bufnr`` at ``tick``."""
    return {"bufnr": bufnr, "tick": tick, "row": row, "col": col}


def ghost(text: str = "abc", typed: bool = False, **where: Any) -> dict[str, Any]:
    """The suggestion on screen: ``text`` at a place (``place()`` by default)."""
    return {**place(), **where, "text": text, "typed": typed}


def run(tmp_path: Path, *calls: tuple[Any, ...]) -> list[list[Any]]:
    """Run ``(fn, *args)`` calls of decide.lua in one nvim; each call's return values."""
    sent = [{"fn": fn, "args": list(args), "n": len(args)} for fn, *args in calls]
    calls_path, out = tmp_path / "calls.json", tmp_path / "out.json"
    calls_path.write_text(json.dumps(sent))
    script = HERE / "nvim_decide.lua"
    proc = headless(["-l", str(script), str(EDITORS / "nvim"), str(calls_path), str(out)], tmp_path)
    assert out.exists(), f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    results = json.loads(out.read_text())
    for call, result in zip(calls, results, strict=True):
        assert result["ok"], (call, result.get("error"))
    return [r["values"] for r in results]


def one(tmp_path: Path, *calls: tuple[Any, ...]) -> list[Any]:
    """The first return value of each call."""
    return [values[0] if values else None for values in run(tmp_path, *calls)]


def test_ask_skips_a_place_already_asked_or_shown(tmp_path: Path) -> None:
    here = place()
    assert one(
        tmp_path,
        ("ask", {"place": here}),
        # a request for this text and place is out
        ("ask", {"place": here, "pending": place()}),
        # ... for the text before the last keystroke: ask again
        ("ask", {"place": here, "pending": place(tick=6)}),
        # its suggestion shows here
        ("ask", {"place": here, "ghost": ghost()}),
        # the user typed into it: ask once, keeping it unless the answer differs
        ("ask", {"place": here, "ghost": ghost(typed=True)}),
        # a suggestion elsewhere on the line, or one whose typed character is not in yet
        ("ask", {"place": here, "ghost": ghost(col=9)}),
        ("ask", {"place": here, "ghost": {**ghost(typed=True), "tick": None}}),
    ) == ["ask", "skip", "ask", "skip", "typed", "ask", "ask"]


def test_ask_always_sends_what_the_user_or_a_notice_asked(tmp_path: Path) -> None:
    here, shown = place(), ghost()
    assert one(
        tmp_path,
        ("ask", {"place": here, "pending": place(), "ghost": shown, "invoked": True}),
        ("ask", {"place": here, "ghost": shown, "step": 1}),
        ("ask", {"place": here, "ghost": shown, "refresh": True}),
    ) == ["ask", "ask", "refresh"]


def test_an_answer_is_stale_once_the_text_or_cursor_moved(tmp_path: Path) -> None:
    sent = place()
    assert one(
        tmp_path,
        ("stale", sent, place()),
        ("stale", sent, place(tick=8)),
        ("stale", sent, place(col=11)),
        ("stale", sent, place(row=5)),
        ("stale", sent, place(bufnr=2)),
        ("stale", sent, None),  # the buffer is gone, or not the current one
    ) == [False, True, True, True, True, True]


def answer(**facts: Any) -> dict[str, Any]:
    return {"stale": False, "enabled": True, "insert": True, "count": 3, "shown": 1, **facts}


def test_what_an_answer_does(tmp_path: Path) -> None:
    assert run(
        tmp_path,
        ("answer", answer()),
        ("answer", answer(stale=True)),
        ("answer", answer(enabled=False)),
        ("answer", answer(insert=False)),
        # nothing: leave the screen; asked for alternatives and got none: clear it
        ("answer", answer(count=0)),
        ("answer", answer(count=0, step=1)),
        # cycling: `step` places after the one shown, wrapping around
        ("answer", answer(step=1, shown=1)),
        ("answer", answer(step=1, shown=3)),
        ("answer", answer(step=-1, shown=1)),
        # a request made to keep the ghost compares first (a refresh's empty answer too)
        ("answer", answer(keep=True)),
        ("answer", answer(keep=True, refresh=True, count=0)),
        ("answer", answer(keep=True, stale=True)),
    ) == [
        ["show", 1],
        ["drop"],
        ["drop"],
        ["drop"],
        ["drop"],
        ["clear"],
        ["show", 2],
        ["show", 1],
        ["show", 3],
        ["compare"],
        ["compare"],
        ["drop"],
    ]


def test_a_kept_ghost_is_redrawn_only_when_the_answer_differs(tmp_path: Path) -> None:
    assert one(
        tmp_path,
        ("compared", 1, True, True),  # the same text: no redraw, no flicker
        ("compared", 1, False, True),
        ("compared", 1, False, False),  # the answer does not fit at the cursor
        ("compared", 0, False, False),  # the whole is nothing here: the start goes too
    ) == ["keep", "show", "keep", "clear"]


def test_cycle_order_visits_every_other_item(tmp_path: Path) -> None:
    assert one(
        tmp_path,
        ("cycle_order", 1, 1, 3),
        ("cycle_order", 1, -1, 3),
        ("cycle_order", 2, 1, 2),
        ("cycle_order", 1, 1, 1),
    ) == [[2, 3], [3, 2], [1], []]


def test_type_through_keeps_the_rest_of_the_ghost(tmp_path: Path) -> None:
    here = place()
    assert one(
        tmp_path,
        ("type_through", ghost("abc"), here, "a"),
        ("type_through", ghost("abc"), here, "x"),  # not its next character
        ("type_through", ghost("a"), here, "a"),  # its last: nothing left to show
        ("type_through", ghost("abc"), place(tick=8), "a"),  # the text changed under it
        ("type_through", ghost("abc"), place(col=11), "a"),  # the cursor is elsewhere
        ("type_through", ghost("éx"), here, "é"),  # a multibyte character
        ("type_through", None, here, "a"),
        ("type_through", ghost("abc"), here, ""),
    ) == ["bc", None, None, None, None, "x", None, None]


def test_enter_carries_a_ghost_that_starts_with_the_line_break(tmp_path: Path) -> None:
    kept = ghost("\n    second = 2", col=10)
    below = place(tick=8, row=5, col=4)
    assert one(
        tmp_path,
        ("newline_through", kept, below, "    ", 10),
        ("newline_through", kept, place(tick=8, row=5, col=8), "        ", 10),  # deeper
        ("newline_through", kept, below, "    ", 9),  # the old line is not what it was
        ("newline_through", kept, place(tick=8, row=6, col=4), "    ", 10),  # not the next row
        ("newline_through", ghost("second = 2", col=10), below, "    ", 10),  # no line break
        ("newline_through", ghost("\n    ", col=10), below, "    ", 10),  # nothing left
        ("newline_through", None, below, "    ", 10),
    ) == ["second = 2", None, None, None, None, None, None]


def test_a_ready_notice_applies_to_the_ghost_it_is_about(tmp_path: Path) -> None:
    shown = ghost(row=4, col=10)
    assert one(
        tmp_path,
        ("ready_place", shown, place(), {"row": 4, "col": 10}),
        # asked before the cursor, on the way typed since (or on an earlier line)
        ("ready_place", shown, place(), {"row": 4, "col": 7}),
        ("ready_place", shown, place(), {"row": 3, "col": 40}),
        ("ready_place", shown, place(), {"row": 4, "col": 11}),
        ("ready_place", shown, place(), {"row": 5, "col": 0}),
        ("ready_place", shown, place(tick=8), {"row": 4, "col": 10}),
        ("ready_place", None, place(), {"row": 4, "col": 10}),
    ) == [
        None,
        None,
        None,
        "another place",
        "another place",
        "no suggestion shown",
        "no suggestion shown",
    ]


def test_remaining_shows_what_is_still_to_insert(tmp_path: Path) -> None:
    line = "    total = sum("
    col = len(line)
    assert one(
        tmp_path,
        ("remaining", "x)", None, 0, col, line),
        # the item replaces "sum(" typed since its range start: the rest shows
        ("remaining", "sum(x)", {"row": 0, "col": col - 4}, 0, col, line),
        ("remaining", "max(x)", {"row": 0, "col": col - 4}, 0, col, line),
        ("remaining", "x)", {"row": 0, "col": col + 1}, 0, col, line),
        ("remaining", "x)", {"row": 1, "col": 0}, 0, col, line),
        ("remaining", "sum(", {"row": 0, "col": col - 4}, 0, col, line),
        ("remaining", "", None, 0, col, line),
    ) == ["x)", "x)", None, None, None, None, None]


def test_accept_word_and_line_units(tmp_path: Path) -> None:
    text = "total(xs, 2))\n    return t"
    assert run(
        tmp_path,
        ("next_word", text),
        ("next_word", ", 2))"),
        ("next_word", "\n    return t"),
        ("next_line", text),
        ("next_line", "\n    return t\nx"),
        ("accept_part", text, "word"),
        ("accept_part", text, "line"),
        ("accept_part", text, None),
    ) == [
        ["total"],
        [", 2"],
        ["\n    "],
        ["total(xs, 2))"],
        ["\n    return t"],
        ["total", "(xs, 2))\n    return t"],
        ["total(xs, 2))", "\n    return t"],
        [text, ""],
    ]


def test_items_of_inline_and_completion_answers(tmp_path: Path) -> None:
    command = {"title": "accept", "command": "lspAssist.accept", "arguments": ["id1"]}
    rng = {"start": {"line": 0, "character": 4}, "end": {"line": 0, "character": 6}}
    inline = {
        "items": [
            {"insertText": "a(b)", "range": rng, "command": command},
            {"insertText": {"kind": "snippet", "value": "f(${1:x}, $2)$0"}},
            {"range": rng},  # no text: left out
        ]
    }
    completion = [
        {"label": "total", "textEdit": {"newText": "total(xs)", "range": rng}},
        {"label": "scale", "insertText": "scale(${1:v})", "insertTextFormat": 2},
        {"label": "plain"},
        {"label": "", "insertText": ""},  # empty: left out
    ]
    inline_items, completion_items, nothing = one(
        tmp_path,
        ("items", INLINE, inline),
        ("items", COMPLETION, completion),
        ("items", INLINE, None),
    )
    assert [i["text"] for i in inline_items] == ["a(b)", "f(x, )"]
    assert inline_items[0]["range"] == rng and inline_items[0]["command"] == command
    assert [i["text"] for i in completion_items] == ["total(xs)", "scale(v)", "plain"]
    assert completion_items[0]["range"] == rng
    assert nothing in ([], {})
