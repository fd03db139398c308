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


def test_crlf_line_end_excludes_the_break() -> None:
    doc = Document("file:///t.py", "ab\r\ncd\r\n")
    assert doc.line(0) == "ab" and doc.line_count == 3
    # Past the end of line 0 is before "\r\n", never between "\r" and "\n".
    end = doc.from_lsp(0, 10)
    doc.apply_change(end, end, "X")
    assert doc.text == "abX\r\ncd\r\n"


def test_cr_only_breaks_are_lines_and_tree_sitter_rows_are_not() -> None:
    doc = Document("file:///t.py", "a\rbc\rd")
    assert [doc.line(i) for i in range(doc.line_count)] == ["a", "bc", "d"]
    edit = doc.apply_change(Position(1, 1), Position(2, 0), "Z\n")
    assert doc.text == "a\rbZ\nd"
    # tree-sitter counts rows at "\n" only: "a\rb" is one row.
    assert edit.start_point == (0, 3)
    assert edit.new_end_point == (1, 0)


def test_joining_cr_and_lf_makes_one_break() -> None:
    doc = Document("file:///t.py", "a\rb")
    doc.apply_change(Position(1, 0), Position(1, 0), "\n")
    assert doc.text == "a\r\nb"
    assert doc.line_count == 2


def test_snapshot_does_not_change_with_the_document() -> None:
    doc = Document("file:///t.py", "x = 1\n", version=3)
    snap = doc.snapshot()
    doc.apply_change(Position(0, 4), Position(0, 5), "2")
    doc.version = 4
    assert (snap.text, snap.version, snap.line(0)) == ("x = 1\n", 3, "x = 1")
    assert doc.text == "x = 2\n"
    assert snap.offset_at(Position(0, 4)) == 4


def test_lone_surrogates_are_replaced_keeping_utf16_positions() -> None:
    doc = Document("file:///t.py", "a\ud800b")
    assert doc.text == "a\ufffdb"
    doc.apply_change(Position(0, 3), Position(0, 3), "\udc00")
    assert doc.text == "a\ufffdb\ufffd"
    assert doc.from_lsp(0, 2) == Position(0, 2)
