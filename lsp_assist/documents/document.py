"""One open document: text, line index, position encodings, and edits with byte offsets.

Positions inside lsp-assist are (line, column) with the column counted in Unicode code
points (Python ``str`` indices). LSP positions arrive in UTF-16 code units (the default)
or UTF-8 bytes and are converted here. Every edit is returned as a :class:`ByteEdit`
carrying the *old* byte offsets, which tree-sitter's ``Tree.edit`` needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsp_assist.errors import DocumentError

EXTENSION_LANGUAGES: dict[str, str] = {
    ".py": "python",
    ".pyi": "python",
    ".js": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".jsx": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
    ".java": "java",
    ".c": "c",
    ".h": "c",
    ".cc": "cpp",
    ".cpp": "cpp",
    ".cxx": "cpp",
    ".hpp": "cpp",
    ".hh": "cpp",
    ".hxx": "cpp",
}


def language_for_path(path: str | Path) -> str | None:
    """Return the language id lsp-assist uses for a file name, or None if unsupported."""
    return EXTENSION_LANGUAGES.get(Path(path).suffix.lower())


def uri_to_path(uri: str) -> Path:
    """Return the filesystem path of a file:// URI (other schemes map to their path part)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path))


@dataclass(frozen=True, slots=True)
class Position:
    """A position in a document: 0-based line, column in code points."""

    line: int
    column: int


@dataclass(frozen=True, slots=True)
class ByteEdit:
    """One edit in tree-sitter's terms: byte offsets and (row, byte column) points."""

    start_byte: int
    old_end_byte: int
    new_end_byte: int
    start_point: tuple[int, int]
    old_end_point: tuple[int, int]
    new_end_point: tuple[int, int]


def _units_to_column(line: str, units: int, encoding: str) -> int:
    """Convert a UTF-16 or UTF-8 offset within ``line`` to a code point column (clamped)."""
    if units <= 0:
        return 0
    if encoding == "utf-32":
        return min(units, len(line))
    count = 0
    for index, char in enumerate(line):
        if count >= units:
            return index
        code = ord(char)
        if encoding == "utf-16":
            count += 2 if code > 0xFFFF else 1
        else:
            count += len(char.encode("utf-8", "surrogatepass"))
    return len(line)


def _column_to_units(line: str, column: int, encoding: str) -> int:
    """Convert a code point column within ``line`` to UTF-16 or UTF-8 units."""
    prefix = line[: max(0, column)]
    if encoding == "utf-32":
        return len(prefix)
    if encoding == "utf-16":
        return len(prefix) + sum(1 for c in prefix if ord(c) > 0xFFFF)
    return len(prefix.encode("utf-8", "surrogatepass"))


class Document:
    """An open buffer: its text, version, and a line index kept current across edits."""

    def __init__(self, uri: str, text: str, *, version: int = 0, language_id: str = "") -> None:
        self.uri = uri
        self.path = uri_to_path(uri)
        self.version = version
        self.language_id = language_for_path(self.path) or language_id
        self._text = ""
        self._lines: list[str] = []
        self._line_starts: list[int] = []
        self._byte_line_starts: list[int] = []
        self._set_text(text)

    @property
    def text(self) -> str:
        """The whole current text."""
        return self._text

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing newline starts an empty last line)."""
        return len(self._lines)

    def line(self, index: int) -> str:
        """Return line ``index`` without its newline ('' past the end)."""
        if 0 <= index < len(self._lines):
            return self._lines[index]
        return ""

    def _set_text(self, text: str) -> None:
        self._text = text
        self._lines = text.split("\n")
        starts = [0]
        byte_starts = [0]
        for line in self._lines[:-1]:
            starts.append(starts[-1] + len(line) + 1)
            byte_starts.append(byte_starts[-1] + len(line.encode("utf-8", "surrogatepass")) + 1)
        self._line_starts = starts
        self._byte_line_starts = byte_starts

    def clamp(self, line: int, column: int) -> Position:
        """Return the nearest valid position (past the end clamps to the end)."""
        if line < 0:
            return Position(0, 0)
        if line >= len(self._lines):
            last = len(self._lines) - 1
            return Position(last, len(self._lines[last]))
        return Position(line, max(0, min(column, len(self._lines[line]))))

    def from_lsp(self, line: int, character: int, encoding: str = "utf-16") -> Position:
        """Convert an LSP position in ``encoding`` units to a clamped code point position."""
        if line >= len(self._lines):
            return self.clamp(line, 0)
        if line < 0:
            return Position(0, 0)
        return Position(line, _units_to_column(self._lines[line], character, encoding))

    def to_lsp(self, position: Position, encoding: str = "utf-16") -> tuple[int, int]:
        """Convert a code point position to an LSP (line, character) in ``encoding`` units."""
        pos = self.clamp(position.line, position.column)
        return pos.line, _column_to_units(self._lines[pos.line], pos.column, encoding)

    def offset_at(self, position: Position) -> int:
        """Return the code point offset of a position in the text."""
        pos = self.clamp(position.line, position.column)
        return self._line_starts[pos.line] + pos.column

    def byte_offset_at(self, position: Position) -> int:
        """Return the UTF-8 byte offset of a position in the text."""
        pos = self.clamp(position.line, position.column)
        line = self._lines[pos.line]
        return self._byte_line_starts[pos.line] + len(
            line[: pos.column].encode("utf-8", "surrogatepass")
        )

    def point_at(self, position: Position) -> tuple[int, int]:
        """Return tree-sitter's (row, byte column) point of a position."""
        pos = self.clamp(position.line, position.column)
        return pos.line, len(self._lines[pos.line][: pos.column].encode("utf-8", "surrogatepass"))

    def position_at_offset(self, offset: int) -> Position:
        """Return the position of a code point offset (clamped to the text)."""
        import bisect

        offset = max(0, min(offset, len(self._text)))
        line = bisect.bisect_right(self._line_starts, offset) - 1
        return Position(line, offset - self._line_starts[line])

    def apply_change(self, start: Position | None, end: Position | None, new_text: str) -> ByteEdit:
        """Replace the text between ``start`` and ``end`` (None: the whole text).

        Returns the edit with the old byte offsets for ``Tree.edit``.
        """
        if start is None or end is None:
            old_end_point = self.point_at(Position(len(self._lines) - 1, len(self._lines[-1])))
            old_end_byte = len(self._text.encode("utf-8", "surrogatepass"))
            self._set_text(new_text)
            new_end_byte = len(new_text.encode("utf-8", "surrogatepass"))
            return ByteEdit(
                0,
                old_end_byte,
                new_end_byte,
                (0, 0),
                old_end_point,
                self.point_at(Position(len(self._lines) - 1, len(self._lines[-1]))),
            )
        start = self.clamp(start.line, start.column)
        end = self.clamp(end.line, end.column)
        if (end.line, end.column) < (start.line, start.column):
            raise DocumentError(f"edit range ends before it starts: {start} > {end}")
        start_byte = self.byte_offset_at(start)
        old_end_byte = self.byte_offset_at(end)
        start_point = self.point_at(start)
        old_end_point = self.point_at(end)
        start_offset = self.offset_at(start)
        end_offset = self.offset_at(end)
        self._set_text(self._text[:start_offset] + new_text + self._text[end_offset:])
        new_end = self.position_at_offset(start_offset + len(new_text))
        return ByteEdit(
            start_byte,
            old_end_byte,
            start_byte + len(new_text.encode("utf-8", "surrogatepass")),
            start_point,
            old_end_point,
            self.point_at(new_end),
        )
