"""One open document: text, line index, position encodings, edits and snapshots.

Language ids are canonical here (:func:`canonical_language`: one alias table for the
editors' ids, ``typescriptreact`` is ``tsx``), from the file name first.

Positions inside lsp-assist are (line, column) with the column counted in Unicode code
points (Python ``str`` indices). LSP positions arrive in UTF-16 code units (the default)
or UTF-8 bytes and are converted here. Lines end at ``\\n``, ``\\r\\n`` or ``\\r``, as
the LSP specification says; a column past the end of a line means the line's end.
Every edit is returned as a :class:`ByteEdit` carrying the *old* byte offsets, which
tree-sitter's ``Tree.edit`` needs.

A document's text and line index live in one immutable :class:`TextState` that an
edit replaces in a single assignment, so a reader on another thread sees either the
old or the new text, never half of each. :meth:`Document.snapshot` freezes the
document (text, version, language) for the pipeline.
"""

from __future__ import annotations

import bisect
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from pathlib import Path
from urllib.parse import unquote, urlparse

from lsp_assist.errors import DocumentError

logger = logging.getLogger(__name__)

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

LANGUAGE_ALIASES: dict[str, str] = {
    "javascriptreact": "javascript",
    "jsx": "javascript",
    "typescriptreact": "tsx",
    "golang": "go",
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "c++": "cpp",
}
"""Editor language ids (and short names) for a language lsp-assist knows by another id."""

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SURROGATE = re.compile("[\ud800-\udfff]")


def language_for_path(path: str | Path) -> str | None:
    """Return the language id lsp-assist uses for a file name, or None if unsupported."""
    return EXTENSION_LANGUAGES.get(Path(path).suffix.lower())


def canonical_language(language: str) -> str:
    """Return the id lsp-assist uses for an editor's language id (others unchanged)."""
    return LANGUAGE_ALIASES.get(language, language)


def uri_to_path(uri: str) -> Path:
    """Return the filesystem path of a file:// URI (other schemes map to their path part)."""
    parsed = urlparse(uri)
    return Path(unquote(parsed.path))


def replace_lone_surrogates(text: str) -> str:
    """Return ``text`` with lone UTF-16 surrogates replaced by U+FFFD (same UTF-16 length)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


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


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True, eq=False)
class TextState:
    """A text and its line index; never changed after it is built."""

    text: str
    lines: list[str]
    """Line contents without their line breaks."""
    line_starts: list[int]
    """Code point offset where each line starts."""
    ascii: bool
    lone_cr: bool
    """True when some ``\\r`` is not followed by ``\\n`` (tree-sitter rows then differ)."""
    longest_line: int

    @classmethod
    def of(cls, text: str) -> TextState:
        """Split ``text`` into lines at ``\\n``, ``\\r\\n`` and ``\\r``."""
        lines: list[str]
        if "\r" not in text:
            lines = text.split("\n")
            starts = [0, *accumulate(len(line) + 1 for line in lines[:-1])]
            lone_cr = False
        else:
            lines = []
            starts = [0]
            pos = 0
            for match in _LINE_BREAK.finditer(text):
                lines.append(text[pos : match.start()])
                pos = match.end()
                starts.append(pos)
            lines.append(text[pos:])
            lone_cr = text.count("\r") != text.count("\r\n")
        return cls(text, lines, starts, text.isascii(), lone_cr, max(map(len, lines)))


class TextView:
    """Read access to a :class:`TextState`: lines, clamping, encodings, offsets, points."""

    _state: TextState

    @property
    def text(self) -> str:
        """The whole current text."""
        return self._state.text

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing line break starts an empty last line)."""
        return len(self._state.lines)

    @property
    def longest_line(self) -> int:
        """Length of the longest line in code points (minified files have huge ones)."""
        return self._state.longest_line

    def line(self, index: int) -> str:
        """Return line ``index`` without its line break ('' past the end)."""
        lines = self._state.lines
        if 0 <= index < len(lines):
            return lines[index]
        return ""

    def clamp(self, line: int, column: int) -> Position:
        """Return the nearest valid position (past the end clamps to the end)."""
        return _clamp(self._state, line, column)

    def from_lsp(self, line: int, character: int, encoding: str = "utf-16") -> Position:
        """Convert an LSP position in ``encoding`` units to a clamped code point position.

        A line past the last line means the end of the document; a character past the
        end of its line means the end of that line (LSP 3.17).
        """
        lines = self._state.lines
        if line >= len(lines):
            return _clamp(self._state, line, 0)
        if line < 0:
            return Position(0, 0)
        return Position(line, _units_to_column(lines[line], character, encoding))

    def to_lsp(self, position: Position, encoding: str = "utf-16") -> tuple[int, int]:
        """Convert a code point position to an LSP (line, character) in ``encoding`` units."""
        state = self._state
        pos = _clamp(state, position.line, position.column)
        return pos.line, _column_to_units(state.lines[pos.line], pos.column, encoding)

    def offset_at(self, position: Position) -> int:
        """Return the code point offset of a position in the text."""
        return _offset(self._state, position)

    def byte_offset_at(self, position: Position) -> int:
        """Return the UTF-8 byte offset of a position in the text."""
        return _byte_offset(self._state, position)

    def point_at(self, position: Position) -> tuple[int, int]:
        """Return tree-sitter's (row, byte column) point of a position."""
        return _point(self._state, position)

    def position_at_offset(self, offset: int) -> Position:
        """Return the position of a code point offset (clamped to the text)."""
        return _position_at(self._state, offset)


def clamp_position(lines: Sequence[str], line: int, column: int) -> Position:
    """Return the nearest valid position in ``lines`` (past the end clamps to the end)."""
    if line < 0:
        return Position(0, 0)
    if line >= len(lines):
        last = len(lines) - 1
        return Position(last, len(lines[last]))
    return Position(line, max(0, min(column, len(lines[line]))))


def _clamp(state: TextState, line: int, column: int) -> Position:
    return clamp_position(state.lines, line, column)


def _offset(state: TextState, position: Position) -> int:
    pos = _clamp(state, position.line, position.column)
    return state.line_starts[pos.line] + pos.column


def _byte_offset(state: TextState, position: Position) -> int:
    offset = _offset(state, position)
    return offset if state.ascii else _utf8_len(state.text[:offset])


def _point_at_offset(state: TextState, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of a code point offset; rows start after "\\n"."""
    if state.lone_cr:
        before = state.text[:offset]
        row_start = before.rfind("\n") + 1
        return before.count("\n"), _utf8_len(before[row_start:])
    line = bisect.bisect_right(state.line_starts, offset) - 1
    return line, _utf8_len(state.text[state.line_starts[line] : offset])


def _point(state: TextState, position: Position) -> tuple[int, int]:
    return _point_at_offset(state, _offset(state, position))


def _position_at(state: TextState, offset: int) -> Position:
    offset = max(0, min(offset, len(state.text)))
    line = bisect.bisect_right(state.line_starts, offset) - 1
    column = offset - state.line_starts[line]
    # An offset between "\r" and "\n" belongs to the end of its line.
    return Position(line, min(column, len(state.lines[line])))


class Document(TextView):
    """An open buffer: its text, version, and a line index kept current across edits."""

    def __init__(self, uri: str, text: str, *, version: int = 0, language_id: str = "") -> None:
        self.uri = uri
        self.path = uri_to_path(uri)
        self.version = version
        self.language_id = language_for_path(self.path) or canonical_language(language_id)
        self._warned_surrogates = False
        self._state = TextState.of(self._clean(text))

    def _clean(self, text: str) -> str:
        cleaned = replace_lone_surrogates(text)
        if cleaned is not text and not self._warned_surrogates:
            self._warned_surrogates = True
            logger.warning("%s: replaced lone UTF-16 surrogates with U+FFFD", self.uri)
        return cleaned

    def snapshot(self) -> DocumentSnapshot:
        """Return an immutable copy of the document as it is now (shares the text)."""
        return DocumentSnapshot(
            uri=self.uri,
            path=self.path,
            version=self.version,
            language_id=self.language_id,
            _state=self._state,
        )

    def apply_change(self, start: Position | None, end: Position | None, new_text: str) -> ByteEdit:
        """Replace the text between ``start`` and ``end`` (None: the whole text).

        Returns the edit with the old byte offsets for ``Tree.edit``.
        """
        old = self._state
        new_text = self._clean(new_text)
        if start is None or end is None:
            last = Position(len(old.lines) - 1, len(old.lines[-1]))
            new = TextState.of(new_text)
            self._state = new
            return ByteEdit(
                0,
                _utf8_len(old.text),
                _utf8_len(new_text),
                (0, 0),
                _point(old, last),
                _point(new, Position(len(new.lines) - 1, len(new.lines[-1]))),
            )
        start = _clamp(old, start.line, start.column)
        end = _clamp(old, end.line, end.column)
        if (end.line, end.column) < (start.line, start.column):
            raise DocumentError(f"edit range ends before it starts: {start} > {end}")
        start_offset = _offset(old, start)
        end_offset = _offset(old, end)
        new = TextState.of(old.text[:start_offset] + new_text + old.text[end_offset:])
        start_byte = _byte_offset(old, start)
        edit = ByteEdit(
            start_byte,
            _byte_offset(old, end),
            start_byte + _utf8_len(new_text),
            _point(old, start),
            _point(old, end),
            _point_at_offset(new, start_offset + len(new_text)),
        )
        self._state = new
        return edit


@dataclass(frozen=True, slots=True)
class DocumentSnapshot(TextView):
    """A document frozen at one version: what the pipeline reads on any thread."""

    uri: str
    path: Path
    version: int
    language_id: str
    _state: TextState
