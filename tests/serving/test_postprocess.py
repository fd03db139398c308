"""Post-processing of model text and the single-/multi-line decision (Python, JS, Go)."""

from __future__ import annotations

from typing import Any

import pytest
import tree_sitter
import tree_sitter_go
import tree_sitter_javascript
import tree_sitter_python
from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_assist.serving.postprocess import decide_multiline, postprocess

LANGUAGES = {
    "python": tree_sitter.Language(tree_sitter_python.language()),
    "javascript": tree_sitter.Language(tree_sitter_javascript.language()),
    "go": tree_sitter.Language(tree_sitter_go.language()),
}


def parse(source: str, language: str) -> tree_sitter.Tree:
    return tree_sitter.Parser(LANGUAGES[language]).parse(source.encode())


def at_cursor(document: str) -> tuple[str, int, int]:
    """Return (text, line, column) of a document with one '|' marking the cursor."""
    offset = document.index("|")
    text = document[:offset] + document[offset + 1 :]
    line = text.count("\n", 0, offset)
    column = offset - (text.rfind("\n", 0, offset) + 1)
    return text, line, column


def complete(
    document: str, raw: str, *, language: str, multiline: bool | None = None, max_lines: int = 8
) -> str:
    """Post-process ``raw`` at the '|' of ``document`` the way the engine calls it."""
    text, line, column = at_cursor(document)
    lines = text.split("\n")
    offset = sum(len(x) + 1 for x in lines[:line]) + column
    if multiline is None:
        multiline = decide_multiline(parse(text, language), text, line, column, language)
    return postprocess(
        raw,
        line_prefix=lines[line][:column],
        line_suffix=lines[line][column:],
        following_text=text[offset:],
        multiline=multiline,
        max_lines=max_lines,
        language=language,
    )


# -- overlap with the text after the cursor --------------------------------------------


def test_python_closing_paren_already_in_suffix() -> None:
    doc = "def f(items):\n    return sorted(|)\n"
    assert complete(doc, "items, key=len)", language="python") == "items, key=len"


def test_python_nested_call_keeps_its_own_closer() -> None:
    doc = "def f(items):\n    return sorted(|)\n"
    assert complete(doc, "set(items))", language="python") == "set(items)"
    assert complete(doc, "set(items)", language="python") == "set(items)"


def test_python_string_and_paren_closed_by_editor() -> None:
    doc = 'print("hel|")\n'
    assert complete(doc, 'lo, world")', language="python") == "lo, world"
    doc_no_autoclose = 'print("hel|\n'
    assert complete(doc_no_autoclose, 'lo, world")', language="python") == 'lo, world")'


def test_javascript_semicolon_and_paren_overlap() -> None:
    doc = "const total = items.reduce(|);\n"
    raw = "(a, b) => a + b, 0);"
    assert complete(doc, raw, language="javascript") == "(a, b) => a + b, 0"


def test_go_brace_overlap_single_line() -> None:
    doc = "package m\n\nfunc f() {\n\tif err != nil {|}\n}\n"
    # Multi-line between braces; the model closing the block twice is trimmed.
    out = complete(doc, "\n\t\treturn err\n\t}", language="go")
    assert out == "\n\t\treturn err"


def test_cut_at_closer_the_following_line_has() -> None:
    doc = "function add(a, b) {\n  |\n}\n"
    out = complete(doc, "return a + b;\n}\n", language="javascript")
    assert out == "return a + b;"


def test_closer_kept_when_nothing_follows() -> None:
    doc = "function add(a, b) {\n|"
    out = complete(doc, "  return a + b;\n}", language="javascript", multiline=True)
    assert out == "  return a + b;\n}"


def test_mismatched_closer_is_cut() -> None:
    doc = "x = foo(|\n"
    assert complete(doc, "a, b]", language="python") == "a, b"


def test_lines_already_below_are_not_repeated() -> None:
    doc = "def total(xs):\n    |\n    return result\n"
    raw = "result = sum(xs)\n    return result\n"
    assert complete(doc, raw, language="python", multiline=True) == "result = sum(xs)"


def test_suggestion_equal_to_what_follows_is_dropped() -> None:
    doc = "x = |foo(1)\n"
    assert complete(doc, "foo", language="python") == ""
    assert complete(doc, "foo(1)", language="python") == ""


# -- emptiness, repetition, limits, whitespace ------------------------------------------


@pytest.mark.parametrize("raw", ["", "   ", "\n\n", "\t \n  \n"])
def test_empty_and_whitespace_dropped(raw: str) -> None:
    assert complete("x = |\n", raw, language="python", multiline=True) == ""


def test_model_looping_is_cut() -> None:
    doc = "def f():\n|"
    raw = "    log('x')\n    log('x')\n    log('x')\n    log('x')"
    assert complete(doc, raw, language="python", multiline=True) == "    log('x')"


def test_repeated_block_of_two_lines_is_cut() -> None:
    doc = "func f() {\n|\n}\n"
    raw = "\ta := 1\n\tb := 2\n\ta := 1\n\tb := 2\n"
    assert complete(doc, raw, language="go", multiline=True) == "\ta := 1\n\tb := 2"


def test_closers_on_consecutive_lines_are_not_a_loop() -> None:
    doc = "function f() {\n|"
    raw = "  if (x) {\n    if (y) {\n      g();\n    }\n  }"
    out = complete(doc, raw, language="javascript", multiline=True)
    assert out == raw


def test_max_lines_and_single_line() -> None:
    doc = "def f():\n|"
    raw = "    a = 1\n    b = 2\n    c = 3\n    d = 4"
    assert complete(doc, raw, language="python", multiline=True, max_lines=2) == (
        "    a = 1\n    b = 2"
    )
    assert complete(doc, raw, language="python", multiline=False) == "    a = 1"


def test_trailing_whitespace_stripped() -> None:
    doc = "def f():\n|"
    raw = "    a = 1   \n    b = 2  \n\n  "
    assert complete(doc, raw, language="python", multiline=True) == "    a = 1\n    b = 2"


def test_trailing_space_kept_before_a_word() -> None:
    doc = "return |x\n"
    assert complete(doc, "not ", language="python") == "not "


def test_crlf_normalised() -> None:
    doc = "def f():\n|"
    assert complete(doc, "    a = 1\r\n    b = 2\r\n", language="python", multiline=True) == (
        "    a = 1\n    b = 2"
    )


def test_following_text_may_be_only_the_lines_below() -> None:
    out = postprocess(
        "items, key=len)",
        line_prefix="    return sorted(",
        line_suffix=")",
        following_text="\n",
        multiline=False,
        max_lines=8,
        language="python",
    )
    assert out == "items, key=len"


# -- single-line or multi-line --------------------------------------------------------


MULTI = [
    ("python", "def area(r):\n    |\n"),
    ("python", "def area(r):\n|\n"),
    ("python", "def area(r):|\n"),
    ("python", "class A:\n    def f(self):\n        |\n    x = 1\n"),
    ("python", "if x:  # why\n    |\n"),
    ("python", "config = {\n    |\n}\n"),
    ("javascript", "function f(x) {\n  |\n}\n"),
    ("javascript", "function f(x) {|}\n"),
    ("javascript", "if (x) {\n  |\n"),
    ("javascript", "const o = {\n  |\n};\n"),
    ("go", "package m\n\nfunc f() error {\n\t|\n}\n"),
    ("go", "package m\n\nfunc f() {\n\tfor i := range xs { // loop\n\t\t|\n\t}\n}\n"),
]

SINGLE = [
    ("python", "x = foo(|1, 2)\n"),
    ("python", "total = |\n"),
    ("python", "def f():\n    x = 1\n    |\n"),
    ("python", "def f():\n    |\n    return 1\n"),
    ("python", "|"),
    ("javascript", "const x = items.map(|);\n"),
    ("javascript", "function f(x) {\n  |\n  return x;\n}\n"),
    ("go", "package m\n\nfunc f() {\n\tx := |\n}\n"),
    ("go", "package m\n\nfunc f() {\n\tx := 1\n\t|\n}\n"),
]


@pytest.mark.parametrize(("language", "document"), MULTI)
@pytest.mark.parametrize("with_tree", [True, False])
def test_decide_multiline_at_empty_block(language: str, document: str, with_tree: bool) -> None:
    text, line, column = at_cursor(document)
    tree: Any = parse(text, language) if with_tree else None
    assert decide_multiline(tree, text, line, column, language) is True


@pytest.mark.parametrize(("language", "document"), SINGLE)
@pytest.mark.parametrize("with_tree", [True, False])
def test_decide_single_line(language: str, document: str, with_tree: bool) -> None:
    text, line, column = at_cursor(document)
    tree: Any = parse(text, language) if with_tree else None
    assert decide_multiline(tree, text, line, column, language) is False


def test_opener_behind_a_line_comment() -> None:
    text = "def f(x):  # TODO: write this (soon)\n    \n"
    assert decide_multiline(parse(text, "python"), text, 1, 4, "python") is True
    assert decide_multiline(None, text, 1, 4, "python") is True


def test_tree_sees_empty_body_text_cannot() -> None:
    # A block comment after the brace hides the opener from the text fallback.
    text = "function f(x) { /* later */\n  \n}\n"
    assert decide_multiline(None, text, 1, 2, "javascript") is False
    assert decide_multiline(parse(text, "javascript"), text, 1, 2, "javascript") is True


def test_stale_tree_is_ignored() -> None:
    old = "def f(x):\n    \n"
    new = "def f(x):\n    return x\n    \n"
    assert decide_multiline(parse(old, "python"), new, 2, 4, "python") is False


def test_out_of_range_position() -> None:
    assert decide_multiline(None, "x = 1\n", 7, 0, "python") is False


# -- properties -------------------------------------------------------------------------

code_text = st.text(alphabet="ab ()[]{}\"':;,\n\t=x1", max_size=60)


def test_a_suffix_repeated_twice_is_not_trimmed_twice() -> None:
    # found by test_postprocess_properties: "1aa" before "a" gave "1a", then "1"
    kwargs: dict[str, object] = {
        "line_prefix": "",
        "line_suffix": "a",
        "following_text": "a\n",
        "multiline": False,
        "max_lines": 1,
        "language": "python",
    }
    once = postprocess("1aa", **kwargs)  # type: ignore[arg-type]
    assert postprocess(once, **kwargs) == once  # type: ignore[arg-type]
    # and with a space between the copies: "; ;" before ";" gave "; ", then ""
    kwargs.update(line_suffix=";", following_text=";\n")
    once = postprocess("; ;", **kwargs)  # type: ignore[arg-type]
    assert postprocess(once, **kwargs) == once  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(
    raw=code_text,
    prefix=st.text(alphabet='ab (=" \t', max_size=12),
    suffix=st.text(alphabet='ab )];"', max_size=8),
    below=code_text,
    multiline=st.booleans(),
    max_lines=st.integers(1, 6),
    language=st.sampled_from(["python", "javascript", "go"]),
)
def test_postprocess_properties(
    raw: str,
    prefix: str,
    suffix: str,
    below: str,
    multiline: bool,
    max_lines: int,
    language: str,
) -> None:
    following = suffix + "\n" + below
    out = postprocess(
        raw,
        line_prefix=prefix,
        line_suffix=suffix,
        following_text=following,
        multiline=multiline,
        max_lines=max_lines,
        language=language,
    )
    if out:
        assert out.strip()
        assert not following.startswith(out)  # never just what follows the cursor
        assert not suffix.startswith(out)
    assert len(out.split("\n")) <= max_lines
    if not multiline:
        assert "\n" not in out
    for line in out.split("\n")[:-1]:
        assert line == line.rstrip()
    # Idempotent: post-processing a post-processed suggestion changes nothing more.
    again = postprocess(
        out,
        line_prefix=prefix,
        line_suffix=suffix,
        following_text=following,
        multiline=multiline,
        max_lines=max_lines,
        language=language,
    )
    assert again == out


def test_single_line_repeating_the_next_line_is_dropped() -> None:
    doc = "def f(xs):\n    |\n    return sum(xs)\n"
    assert complete(doc, "return sum(xs)", language="python", multiline=False) == ""
    assert complete(doc, "total = sum(xs)", language="python", multiline=False) == (
        "total = sum(xs)"
    )


def test_open_paren_at_cursor_is_single_line_but_block_opener_is_not() -> None:
    text = "def f(order):\n    print("
    assert decide_multiline(None, text, 1, len("    print("), "python") is False
    text = "def f(order):"
    assert decide_multiline(None, text + "\n", 0, len(text), "python") is True
    js = "function f() {"
    assert decide_multiline(None, js + "\n", 0, len(js), "javascript") is True
