"""Stop rules: when to end a generation, decided on the text generated so far.

A :data:`~lsp_assist.backends.base.StopRule` gets the text generated so far (the text
inserted at the cursor) and returns the index to cut it at, or None to go on. It is
called after every token, so it is pure and cheap (linear in a few hundred characters).

- single-line: stop at the end of the cursor's line;
- multi-line: stop when a non-blank line's indentation falls below the cursor's block
  (``cursor_indent``), at a blank line after a complete block (brackets closed, the last
  line does not open a block), or after ``max_lines`` lines;
- both: stop where the text first loops (:func:`loop_at_end`: a unit of 4-32
  characters with letters in it, three times in a row), keeping the first copy.

Each rule is a :class:`FirstCut`: its checks are asked about every prefix in turn, so
the cut does not depend on how the text is split into tokens. A small model
  at a half-typed identifier can go on ``_or_type_or_type_or_type...`` up to the token
  limit: that was the whole P99 of the typing replay (1.5 s for 48 tokens of it).

Indentation is counted in characters (a tab is one), the unit the caller uses for
``cursor_indent``. :func:`stop_strings` lists literal stop sequences per language.
"""

from __future__ import annotations

import logging

from lsp_assist.backends import StopRule
from lsp_assist.documents import canonical_language

log = logging.getLogger(__name__)

_OPENERS = "([{"
_CLOSERS = ")]}"
_CONTINUES = (":", "{", "(", "[", ",", "\\", "=", "=>", "+", "-", "*", "/", "&&", "||", ".")

# Special tokens of common code models that must never reach the editor.
_MODEL_STOPS = [
    "<|endoftext|>",
    "<|file_separator|>",
    "<file_sep>",
    "<|fim_prefix|>",
    "<|fim_suffix|>",
    "<|fim_middle|>",
    "<|fim_pad|>",
    "<fim_prefix>",
    "<fim_suffix>",
    "<fim_middle>",
    "<|repo_name|>",
    "<repo_name>",
    "<filename>",
    "<end_of_turn>",
    "<eos>",
    "</s>",
    "<|im_end|>",
    "```",
]

# Starts of top-level declarations: a completion that reaches one has left its block.
_LANGUAGE_STOPS: dict[str, list[str]] = {
    "python": ["\ndef ", "\nclass ", "\nasync def ", "\nif __name__"],
    "javascript": ["\nfunction ", "\nexport ", "\nclass ", "\nmodule.exports"],
    "typescript": ["\nfunction ", "\nexport ", "\nclass ", "\ninterface ", "\ntype "],
    "tsx": ["\nfunction ", "\nexport ", "\nclass ", "\ninterface "],
    "go": ["\nfunc ", "\ntype ", "\npackage ", "\nimport "],
    "rust": ["\nfn ", "\npub fn ", "\nimpl ", "\nmod ", "\nstruct ", "\n#["],
    "java": ["\npublic class ", "\nclass ", "\nimport ", "\npackage "],
    "c": ["\n#include", "\n#define", "\nint main("],
    "cpp": ["\n#include", "\n#define", "\nint main(", "\nnamespace "],
}


def stop_strings(language: str) -> list[str]:
    """Return the literal stop sequences for ``language`` (model special tokens included)."""
    language = canonical_language(language)
    return [*_MODEL_STOPS, *_LANGUAGE_STOPS.get(language, [])]


def indent_of(line: str) -> int:
    """Return the indentation of ``line`` in characters (a tab counts as one)."""
    return len(line) - len(line.lstrip(" \t"))


def _depth(text: str) -> int:
    """Return openers minus closers in ``text``, skipping quoted strings roughly."""
    depth = 0
    quote = ""
    escaped = False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote or ch == "\n":
                quote = ""
        elif ch in "\"'`":
            quote = ch
        elif ch in _OPENERS:
            depth += 1
        elif ch in _CLOSERS:
            depth -= 1
    return depth


def _opens_block(line: str) -> bool:
    stripped = line.rstrip()
    return stripped.endswith(_CONTINUES)


LOOP_MIN_UNIT = 4
LOOP_MAX_UNIT = 32
LOOP_COPIES = 3
RUN_CHARS = 24
"""A unit of digits without letters stops the generation once it repeats this many characters."""


def loop_at_end(text: str) -> int | None:
    """Return the cut for a loop that ends ``text`` exactly, else None.

    A unit of 4-32 characters with at least two letters in it, three times in a row,
    is cut back to its first copy (``_or_type_or_type_or_type``). A unit of digits and
    punctuation without letters (``0``, ``0, ``) is what code does repeat, so it only
    stops the generation once its run reaches :data:`RUN_CHARS` characters, keeping the
    run (``0, 0, 0, 0`` and ``0x00000000`` are left alone); rulers without digits
    (``# -----``) never stop it.
    """
    end = len(text)
    for unit in range(1, min(LOOP_MAX_UNIT, end // LOOP_COPIES) + 1):
        last = text[end - unit : end]
        letters = sum(ch.isalpha() for ch in last)
        if letters >= 2 and unit >= LOOP_MIN_UNIT:
            copies, cut = LOOP_COPIES, end - (LOOP_COPIES - 1) * unit
        elif letters == 0 and any(ch.isdigit() for ch in last):
            copies, cut = -(-RUN_CHARS // unit), end
        else:
            continue
        if copies * unit > end:
            continue
        if all(text[end - (k + 1) * unit : end - k * unit] == last for k in range(1, copies)):
            return cut
    return None


class FirstCut:
    """A stop rule made of checks, each asked about every prefix of the text in turn.

    The first check to answer at the shortest prefix decides, as if the text had arrived
    one character at a time, so the cut is the same whether it arrives a character or a
    token at a time, or whole. Called with the growing text of one generation it asks
    only about the new prefixes (the answer never depends on what was asked before, only
    the work does).
    """

    def __init__(self, checks: list[StopRule]) -> None:
        self._checks = checks
        self._text = ""
        self._cut: int | None = None

    def __call__(self, text: str) -> int | None:
        """Return the cut for ``text``, or None to go on."""
        if not text.startswith(self._text):
            self._text, self._cut = "", None
        if self._cut is not None:
            return self._cut
        for end in range(len(self._text) + 1, len(text) + 1):
            prefix = text[:end]
            for check in self._checks:
                cut = check(prefix)
                if cut is not None:
                    self._text, self._cut = prefix, cut
                    return cut
        self._text = text
        return None


class LoopFinder(FirstCut):
    """Where a text first loops (:func:`loop_at_end` at its shortest prefix)."""

    def __init__(self) -> None:
        super().__init__([loop_at_end])


def make_stop_rule(
    *, multiline: bool, cursor_indent: int, line_prefix: str, max_lines: int
) -> StopRule:
    """Return a stop rule for a suggestion inserted after ``line_prefix``."""
    max_lines = max(1, max_lines)

    if not multiline:

        def single_line(text: str) -> int | None:
            cut = text.find("\n")
            return None if cut < 0 else cut

        return FirstCut([loop_at_end, single_line])

    prefix_depth = _depth(line_prefix)

    def multi_line(text: str) -> int | None:
        lines = text.split("\n")
        # lines[0] continues the cursor's line; lines[1:] are new lines. A line is only
        # complete when a newline follows it (it is not the last element).
        seen_code = bool((line_prefix + lines[0]).strip())
        offset = len(lines[0])  # index of the newline that ends lines[i - 1]
        for i in range(1, len(lines)):
            line = lines[i]
            complete = i < len(lines) - 1
            if i >= max_lines:
                return offset
            if line.strip():
                if indent_of(line) < cursor_indent:
                    return offset
                seen_code = True
            elif complete and seen_code:
                before = text[:offset]
                written = (line_prefix + before).split("\n")
                last = next((x for x in reversed(written) if x.strip()), "")
                if prefix_depth + _depth(before) <= 0 and not _opens_block(last):
                    return offset
            offset += 1 + len(line)
        return None

    return FirstCut([loop_at_end, multi_line])
