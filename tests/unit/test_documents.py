"""Documents: position encodings, clamping, and edits with tree-sitter byte offsets."""

from __future__ import annotations

import pytest

from lsp_assist.documents import Document, Position
from lsp_assist.errors import DocumentError


def test_utf16_and_utf8_positions_on_non_ascii_line() -> None:
    doc = Document("file:///t.py", "x = 'héllo 😀 wörld'\n")
    # 😀 is 2 UTF-16 units and 4 UTF-8 bytes; é is 1 unit / 2 bytes.
    line = doc.line(0)
    col = line.index("w")
    assert doc.from_lsp(0, col + 1, "utf-16") == Position(0, col)
    utf8 = len(line[:col].encode())
    assert doc.from_lsp(0, utf8, "utf-8") == Position(0, col)
    assert doc.to_lsp(Position(0, col), "utf-16") == (0, col + 1)
    assert doc.to_lsp(Position(0, col), "utf-8") == (0, utf8)


def test_positions_past_the_end_are_clamped() -> None:
    doc = Document("file:///t.py", "ab\ncd")
    assert doc.from_lsp(10, 3) == Position(1, 2)
    assert doc.from_lsp(0, 99) == Position(0, 2)
    assert doc.clamp(-1, 5) == Position(0, 0)


def test_edit_reports_old_byte_offsets() -> None:
    doc = Document("file:///t.py", "é = 1\nb = 2\n")
    edit = doc.apply_change(Position(1, 0), Position(1, 1), "ccc")
    assert doc.text == "é = 1\nccc = 2\n"
    assert edit.start_byte == len("é = 1\n".encode())
    assert edit.old_end_byte == edit.start_byte + 1
    assert edit.new_end_byte == edit.start_byte + 3
    assert edit.start_point == (1, 0)
    assert edit.old_end_point == (1, 1)
    assert edit.new_end_point == (1, 3)


def test_multiline_insert_and_full_replace() -> None:
    doc = Document("file:///t.py", "a\nb\n")
    edit = doc.apply_change(Position(0, 1), Position(0, 1), "x\ny")
    assert doc.text == "ax\ny\nb\n"
    assert edit.new_end_point == (1, 1)
    full = doc.apply_change(None, None, "new")
    assert doc.text == "new"
    assert full.old_end_byte == len("ax\ny\nb\n")
    assert doc.line_count == 1


def test_reversed_range_is_an_error() -> None:
    doc = Document("file:///t.py", "abc")
    with pytest.raises(DocumentError):
        doc.apply_change(Position(0, 2), Position(0, 1), "")


def test_language_from_extension() -> None:
    assert Document("file:///a/b.tsx", "").language_id == "tsx"
    assert Document("file:///a/b.unknown", "", language_id="x").language_id == "x"
