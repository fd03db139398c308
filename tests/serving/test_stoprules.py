"""Stop rules, fed the text token by token as a backend would."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lsp_assist.backends.base import StopRule
from lsp_assist.serving.stoprules import LoopFinder, indent_of, make_stop_rule, stop_strings


def stream(rule: StopRule, text: str, step: int = 1) -> str:
    """Feed ``text`` to ``rule`` in pieces; return what is kept when it stops (or all)."""
    for end in range(step, len(text) + step, step):
        cut = rule(text[:end])
        if cut is not None:
            return text[:cut]
    return text


def test_single_line_stops_at_end_of_line() -> None:
    rule = make_stop_rule(multiline=False, cursor_indent=4, line_prefix="    x = ", max_lines=8)
    assert rule("foo(a") is None
    assert stream(rule, "foo(a)\n    y = 2\n") == "foo(a)"
    assert rule("\nfoo") == 0


def test_python_body_stops_at_dedent() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=4, line_prefix="    ", max_lines=8)
    text = "total = 0\n    for x in xs:\n        total += x\n    return total\nprint(f(1))\n"
    assert stream(rule, text) == (
        "total = 0\n    for x in xs:\n        total += x\n    return total"
    )


def test_dedent_decided_before_the_line_is_complete() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=4, line_prefix="    ", max_lines=8)
    assert rule("return x\nd") == len("return x")
    assert rule("return x\n  ") is None  # indentation not known yet


def test_blank_line_after_complete_block() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="def area(r):", max_lines=8)
    text = "\n    if r < 0:\n\n        raise ValueError(r)\n    return 3.14 * r * r\n\nx = 1"
    # The blank line after "if r < 0:" opens a block: no stop there; the one after
    # the return closes the function.
    assert stream(rule, text) == (
        "\n    if r < 0:\n\n        raise ValueError(r)\n    return 3.14 * r * r"
    )


def test_blank_line_inside_open_brackets_does_not_stop() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="x = foo(", max_lines=20)
    text = "\n    a,\n\n    b,\n)\n\ny = 2"
    assert stream(rule, text) == "\n    a,\n\n    b,\n)"


def test_javascript_block_stops_at_closing_brace() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=2, line_prefix="  ", max_lines=8)
    text = "const y = x * 2;\n  return y;\n}\n\nfunction g() {\n"
    assert stream(rule, text) == "const y = x * 2;\n  return y;"


def test_go_tabs() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=1, line_prefix="\t", max_lines=8)
    text = "if err != nil {\n\t\treturn err\n\t}\n\treturn nil\n}\n"
    assert stream(rule, text) == "if err != nil {\n\t\treturn err\n\t}\n\treturn nil"


def test_max_lines() -> None:
    rule = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="", max_lines=3)
    assert stream(rule, "a = 1\nb = 2\nc = 3\nd = 4\n") == "a = 1\nb = 2\nc = 3"
    one = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="", max_lines=1)
    assert stream(one, "a = 1\nb = 2") == "a = 1"


def test_a_looping_identifier_stops_after_its_first_copy() -> None:
    # what Gemma-3-270M wrote at a half-typed name in the typing replay, up to 48 tokens
    looping = ".is_file_type_or_other_type_or_other_type_or_other_type_or_other_type"
    for multiline in (False, True):
        rule = make_stop_rule(
            multiline=multiline, cursor_indent=4, line_prefix="    if x", max_lines=8
        )
        for step in (1, 3, 7, len(looping)):
            assert stream(rule, looping, step) == ".is_file_type_or_other", (multiline, step)


def test_a_loop_and_a_line_cap_cut_alike_streamed_or_whole() -> None:
    # found by test_properties: the line cap decides before the loop's third copy ends
    text = "if y:\nif y:\nif y:\nx = 1"
    rule = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="", max_lines=2)
    cut = make_stop_rule(multiline=True, cursor_indent=0, line_prefix="", max_lines=2)(text)
    assert stream(rule, text) == "if y:\nif y:" == text[:cut]


def test_repetition_that_is_code_goes_on() -> None:
    rule = make_stop_rule(multiline=False, cursor_indent=0, line_prefix="x = ", max_lines=1)
    for text in ("[0, 0, 0, 0, 0, 0, 0, 0]", "'-' * 8 + '--------------'", "a + a + a + a"):
        assert stream(rule, text) == text
    assert stream(rule, "# " + "-" * 70) == "# " + "-" * 70


def test_a_run_of_digits_stops_the_generation_and_is_kept() -> None:
    # also seen in the replay: '150000000...' and 'f(x, 0, 0, 0, ...' to 48 tokens
    rule = make_stop_rule(multiline=False, cursor_indent=0, line_prefix="x = ", max_lines=1)
    assert stream(rule, "15" + "0" * 46) == "15" + "0" * 24
    assert stream(rule, "f(x" + ", 0" * 20) == "f(x" + ", 0" * 8
    assert stream(rule, "0x00000000") == "0x00000000"


def test_loop_finder_alone() -> None:
    finder = LoopFinder()
    assert finder("self.x, self.y, self.z") is None
    assert finder("abcdabcdabcd") == 4
    assert finder("zzz") is None  # a text that is not a continuation starts afresh


def test_stop_strings() -> None:
    py = stop_strings("python")
    assert "\ndef " in py and "<|endoftext|>" in py and "<file_sep>" in py
    assert "\nfunc " in stop_strings("go")
    assert "\nfunction " in stop_strings("javascript")
    assert "\ndef " not in stop_strings("unknown-language")
    assert all(stop_strings(lang) for lang in ("rust", "java", "c", "cpp", "typescript"))


def test_indent_of() -> None:
    assert indent_of("    x") == 4 and indent_of("\t\tx") == 2 and indent_of("x") == 0


lines = st.lists(
    st.tuples(st.integers(0, 12), st.sampled_from(["x = 1", "", "if y:", "}", "f(a,", "b)"])),
    max_size=15,
)


@given(
    body=lines,
    multiline=st.booleans(),
    indent=st.integers(0, 8),
    max_lines=st.integers(1, 10),
)
def test_properties(
    body: list[tuple[int, str]], multiline: bool, indent: int, max_lines: int
) -> None:
    text = "\n".join(" " * n + code for n, code in body)
    rule = make_stop_rule(
        multiline=multiline, cursor_indent=indent, line_prefix=" " * indent, max_lines=max_lines
    )
    kept = stream(rule, text)
    assert text.startswith(kept)
    if not multiline:
        assert "\n" not in kept
    else:
        assert kept.count("\n") < max_lines
        for line in kept.split("\n")[1:]:
            assert not line.strip() or indent_of(line) >= indent
    # The cut never moves: feeding everything at once cuts at the same place.
    cut = rule(text)
    assert (text if cut is None else text[:cut]) == kept
