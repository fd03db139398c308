"""The completion fallback's label: it starts with the word typed before the cursor.

eglot 1.9 (lisp/eglot.el, `eglot-completion-at-point`'s exit function) replaces the
symbol before point with the item's insertText (or label), deletes all of it but its
first len(symbol) characters, then applies the textEdit at the cursor. ``eglot_result``
replays that on a line; the real thing runs in tests/editors/test_emacs.py.
"""

from __future__ import annotations

import re

import pytest

from lsp_assist.lsp.features.completion import LABEL_CHARS, item_label


def eglot_result(line: str, column: int, proxy: str, new_text: str) -> str:
    """The line after eglot 1.9 completes ``proxy`` at ``column`` with ``new_text``."""
    before, after = line[:column], line[column:]
    symbol = re.search(r"\w*\Z", before)
    start = symbol.start() if symbol else column
    kept = proxy[: column - start]  # what the exit function leaves of the proxy
    return before[:start] + kept + new_text + after


@pytest.mark.parametrize(
    ("line", "column", "text"),
    [
        ("    ret", 7, " = scale(result, 10)"),  # a typed prefix at the end of a line
        ("    print(tot)", 13, "als(numbers)"),  # a typed prefix in the middle of a line
        ("", 0, "def main() -> None:"),  # the start of an empty line
        ("    x = ", 8, "add(1, 2)"),  # after a space: no word
        ("    self.na", 11, "me = name\n    self.age = age"),  # after a dot, multi-line
        ("    if ok", 9, "\n        return 1"),  # the suggestion starts on the next line
        ("    naïve_ß", 11, "_count += 1"),  # non-ASCII word characters
    ],
)
def test_eglot_keeps_the_typed_word(line: str, column: int, text: str) -> None:
    label = item_label(line[:column], text)
    word = re.search(r"\w*\Z", line[:column])
    assert word is not None
    assert label.startswith(word.group(0))
    assert "✨" not in label
    assert eglot_result(line, column, label, text) == line[:column] + text + line[column:]


def test_the_label_shows_the_line_as_it_will_read() -> None:
    assert item_label("    ret", " = scale(result, 10)") == "ret = scale(result, 10)"
    assert item_label("", "    return total\n") == "return total"
    assert item_label("    if ok", "\n        return 1") == "ok⏎ return 1"
    assert item_label("x", "\n\n") == "x⏎"
    long = item_label("", "y" * 200)
    assert len(long) == LABEL_CHARS
