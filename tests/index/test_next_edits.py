"""The symbolic next-edit engine on real code: renames and signature changes, Python's scopes."""

from __future__ import annotations

import inspect
import textwrap
import time

import pytest

from lsp_assist.index import classify, follow_ups, follow_ups_elsewhere
from lsp_assist.index.languages import parse

CODE = textwrap.dedent(
    """
    import os

    def helper(path, flag):
        total = len(path)
        for part in path:
            total += helper(part, flag)
        return total + flag

    class Box:
        def size(self, n):
            return self.size(n - 1) + helper(n, 1)

        def other(self):
            size = 3
            return self.size(size)

    def main():
        x = helper("a", 1)
        helper = 4
        return x + helper

    print(helper("c", 3))
    """
)


def edit(
    before: str, old: str, new: str, nth: int = 0, lead: str = ""
) -> tuple[str, list[tuple[int, str, str]]]:
    """Replace the nth ``old`` (after ``lead``) by ``new``; the edit's kind and follow-ups."""
    at = -1
    for _ in range(nth + 1):
        at = before.index(lead + old, at + 1)
    at += len(lead)
    after = before[:at] + new + before[at + len(old) :]
    src = after.encode()
    tree = parse("python", src)
    user = classify("python", src, tree, len(before[:at].encode()), old.encode(), new.encode())
    if user is None:
        return "", []
    found = follow_ups(user, src, tree)
    return user.what, [
        (f.start_point[0], src[f.start_byte : f.end_byte].decode(), f.text) for f in found
    ]


def test_a_function_renamed_at_its_def_skips_a_scope_that_shadows_it() -> None:
    what, found = edit(CODE, "helper", "assist")
    assert what == "function"
    assert found == [(6, "helper", "assist"), (11, "helper", "assist"), (22, "helper", "assist")]


def test_a_parameter_and_a_local_rename_stay_in_their_function() -> None:
    assert edit(CODE, "flag", "mode") == ("parameter", [(6, "flag", "mode"), (7, "flag", "mode")])
    what, found = edit(CODE, "total", "count", nth=1)  # a use, not the binding
    assert what == "local variable"
    assert found == [(4, "total", "count"), (7, "total", "count")]


def test_a_method_rename_follows_self_calls_not_a_local_of_the_same_name() -> None:
    what, found = edit(CODE, "size", "measure", lead="def ")
    assert what == "method"
    assert [(row, text) for row, text, _ in found] == [(11, "size"), (15, "size")]


def test_a_name_switched_to_an_existing_one_is_not_a_rename() -> None:
    assert edit(CODE, "helper(part", "len(part") == ("", [])


def test_an_accepted_follow_up_at_a_rebinding_continues_the_rename() -> None:
    """``total = ...`` renamed, then its follow-up ``total += ...`` accepted: the last use
    follows (the new name is bound twice now, the old one nowhere)."""
    renamed = CODE.replace("total = len", "count = len")
    what, found = edit(renamed, "total", "count", lead="        ")
    assert what == "local variable"
    assert found == [(7, "total", "count")]
    # while the old name is still bound there, the same edit is a switch to another name
    assert edit(CODE.replace("total = len", "total = count = len"), "total", "count", nth=1) == (
        "",
        [],
    )


def test_a_parameter_added_then_one_call_updated_gives_the_other_calls() -> None:
    what, found = edit(CODE, "path, flag)", "path, flag, extra)")
    assert what == "function" and all(text == ", extra" for _, _, text in found)
    updated = CODE.replace("path, flag)", "path, flag, extra)")
    what, found = edit(updated, '"c", 3', '"c", 3, True')
    assert [(row, text) for row, _, text in found] == [
        (6, ", True"),
        (11, ", True"),
        (18, ", True"),
    ]


def test_a_parameter_removed_then_one_call_updated_gives_the_other_calls() -> None:
    """``flag`` removed from ``helper``, then one call's argument deleted (an accepted
    follow-up): the other calls that still pass two arguments follow."""
    what, found = edit(CODE, "path, flag)", "path)")
    assert what == "function" and [(row, old) for row, old, _ in found] == [
        (6, ", flag"),
        (11, ", 1"),
        (18, ", 1"),
        (22, ", 3"),
    ]
    updated = CODE.replace("path, flag)", "path)")
    what, found = edit(updated, '"c", 3', '"c"')
    assert what == "function"
    assert [(row, old, text) for row, old, text in found] == [
        (6, ", flag", ""),
        (11, ", 1", ""),
        (18, ", 1", ""),
    ]
    # removing an argument the definition still takes proposes nothing
    assert edit(CODE, '"c", 3', '"c"') == ("", [])


def test_a_rename_reaches_a_file_that_imports_it() -> None:
    src = CODE.replace("def helper", "def assist").encode()
    tree = parse("python", src)
    at = src.index(b"assist")
    user = classify("python", src, tree, at, b"helper", b"assist")
    assert user is not None and user.module_level
    other = b"from tools import helper\nimport tools\n\nprint(helper(1, 2), tools.helper(3, 4))\n"
    found = follow_ups_elsewhere(user, "tools", other, None)
    assert [(f.start_point, f.text) for f in found] == [
        ((0, 18), "assist"),
        ((3, 6), "assist"),
        ((3, 26), "assist"),
    ]


@pytest.mark.parametrize("module", [inspect, textwrap])
def test_renames_in_a_large_stdlib_file_take_milliseconds(module: object) -> None:
    source = inspect.getsource(module)  # type: ignore[arg-type]
    name = "getsourcelines" if module is inspect else "dedent"
    started = time.perf_counter()
    what, found = edit(source, name, f"{name}_v2", lead="def ")
    elapsed = time.perf_counter() - started
    assert what == "function" and found
    assert all(text == name for _, text, _ in found)
    assert elapsed < 1.0  # the parse included; the benchmark measures the real figures
