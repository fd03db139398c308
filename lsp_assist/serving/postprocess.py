"""Post-processing: turn raw model text into a suggestion that fits the code around it.

:func:`postprocess` is applied to every generation before the editor sees it:

1. single-line mode keeps the first line only;
2. the model looping (the same line, or block of up to three lines, again) is cut;
3. at most ``max_lines`` lines are kept;
4. brackets stay balanced: a closer that closes something opened before the cursor is
   cut when the text after the cursor already closes it, and a closer that does not
   match what is open is cut;
5. a line already present right below the cursor ends the suggestion (a suggestion
   that is only that line is dropped);
6. what overlaps the start of the rest of the line is trimmed (``foo(a, b)`` before a
   suffix ``)`` becomes ``foo(a, b``), choosing the trim that leaves the line best
   balanced;
7. trailing whitespace goes, and an empty or whitespace-only result becomes ''.

Before it, a block that a token or time cap cut short loses its unfinished last line
(:func:`complete_lines`, applied by the engine, which knows why generation stopped).

It never returns text that the document already has right after the cursor.
:func:`decide_multiline` says whether a position wants a block (the start of an empty
block body) or a single line (mid-line), from the syntax tree when one is given.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from lsp_assist.documents import canonical_language

log = logging.getLogger(__name__)

_PAIRS = {")": "(", "]": "[", "}": "{"}
_OPENERS = frozenset("([{")

_QUOTES: dict[str, tuple[str, ...]] = {
    "python": ('"""', "'''", '"', "'"),
    "javascript": ('"', "'", "`"),
    "typescript": ('"', "'", "`"),
    "tsx": ('"', "'", "`"),
    "go": ('"', "`", "'"),
    "rust": ('"',),
    "java": ('"""', '"', "'"),
    "c": ('"', "'"),
    "cpp": ('"', "'"),
}
_DEFAULT_QUOTES = ('"', "'")
_HASH_COMMENT = frozenset({"python", "shellscript", "ruby", "perl", "r", "yaml", "toml"})

# tree-sitter node types that hold a block body, per family of grammars.
_BLOCK_TYPES = frozenset(
    {
        "block",
        "statement_block",
        "compound_statement",
        "class_body",
        "declaration_list",
        "field_declaration_list",
        "interface_body",
        "enum_body",
        "switch_body",
        "object",
        "dictionary",
        "list",
        "array",
        "literal_value",
        "constructor_body",
        "function_body",
    }
)


# -- scanning -------------------------------------------------------------------------


def _quotes(language: str) -> tuple[str, ...]:
    return _QUOTES.get(canonical_language(language), _DEFAULT_QUOTES)


def _comment(language: str) -> str:
    return "#" if canonical_language(language) in _HASH_COMMENT else "//"


def _scan(text: str, stack: list[str], language: str) -> Iterator[tuple[int, str, str | None, int]]:
    """Walk ``text`` updating ``stack``; yield closers that reach below the starting depth.

    Yields ``(index, closer, expected_opener_or_None, length)`` for each closing bracket
    or quote whose opener is not in ``text`` itself (it was open before ``text``). The
    caller decides; when it keeps going, the opener is popped here.
    """
    base = len(stack)
    quotes = _quotes(language)
    comment = _comment(language)
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        top = stack[-1] if stack else ""
        if top and top[0] in "\"'`":
            if ch == "\\" and top != "`":
                i += 2
                continue
            if text.startswith(top, i):
                if len(stack) <= base:
                    yield i, top, top, len(top)
                    base -= 1
                stack.pop()
                i += len(top)
                continue
            if ch == "\n" and len(top) == 1 and top != "`":
                stack.pop()  # an unterminated one-line string: recover at the line end
                base = min(base, len(stack))
            i += 1
            continue
        if text.startswith(comment, i):
            nl = text.find("\n", i)
            if nl < 0:
                return
            i = nl
            continue
        quote = next((q for q in quotes if text.startswith(q, i)), "")
        if quote:
            stack.append(quote)
            i += len(quote)
            continue
        if ch in _OPENERS:
            stack.append(ch)
        elif ch in _PAIRS:
            if len(stack) > base:
                if stack[-1] == _PAIRS[ch]:
                    stack.pop()
                else:
                    yield i, ch, stack[-1], 1  # mismatch inside the text itself
                    stack.pop()
            else:
                yield i, ch, (stack[-1] if stack else None), 1
                if stack:
                    stack.pop()
                    base -= 1
        i += 1


def _open_stack(text: str, language: str) -> list[str]:
    """Return the brackets and quotes still open at the end of ``text``."""
    stack: list[str] = []
    for _ in _scan(text, stack, language):
        pass
    return stack


def _errors(text: str, language: str) -> int:
    """Return unmatched or mismatched closers plus what is left open in ``text``."""
    stack: list[str] = []
    bad = 0
    for _, closer, expected, _len in _scan(text, stack, language):
        if expected is None or (closer in _PAIRS and expected != _PAIRS[closer]):
            bad += 1
    return bad + len(stack)


# -- the steps ------------------------------------------------------------------------


def _after_cursor(line_suffix: str, following_text: str) -> tuple[str, str]:
    """Return (all text after the cursor, the lines below the cursor's line)."""
    if following_text.startswith(line_suffix):
        after = following_text
        rest = following_text[len(line_suffix) :]
        below = rest[1:] if rest.startswith("\n") else rest
    else:
        after = line_suffix + "\n" + following_text
        below = following_text
    return after, below


def _meaningful(lines: list[str]) -> bool:
    return any(any(c.isalnum() for c in line) for line in lines)


def _cut_repeats(text: str, line_prefix: str) -> str:
    """Cut where a line or block of up to three lines repeats right after itself."""
    lines = text.split("\n")
    full = [(line_prefix + lines[0]).rstrip(), *(line.rstrip() for line in lines[1:])]
    for i in range(1, len(full)):
        for period in (1, 2, 3):
            if i - period < 0 or i + period > len(full):
                continue
            block = full[i - period : i]
            if full[i : i + period] == block and _meaningful(block):
                return "\n".join(lines[:i])
    return text


def _limit_lines(text: str, max_lines: int) -> str:
    return "\n".join(text.split("\n")[: max(1, max_lines)])


def _cut_outer_closers(text: str, line_prefix: str, after: str, language: str) -> str:
    """Cut at a closer of something opened before the cursor that ``after`` already closes."""
    stack = _open_stack(line_prefix, language)
    next_char = after.lstrip()[:1]
    for index, closer, expected, _length in _scan(text, stack, language):
        if closer[0] in "\"'`":
            if after.startswith(closer):
                return text[:index]
            continue
        if next_char == closer:
            return text[:index].rstrip()
        if expected is not None and expected != _PAIRS[closer]:
            return text[:index].rstrip()
    return text


def _cut_lines_below(text: str, line_prefix: str, line_suffix: str, below: str) -> str:
    """End the suggestion where it starts repeating the first line below the cursor."""
    first_below = next((line.rstrip() for line in below.split("\n") if line.strip()), "")
    if not first_below:
        return text
    lines = text.split("\n")
    if not line_suffix.strip() and (line_prefix + lines[0]).rstrip() == first_below:
        return ""
    for j in range(1, len(lines)):
        if lines[j].rstrip() == first_below:
            return "\n".join(lines[:j]).rstrip()
    return text


def _trim_end_overlap(text: str, line_prefix: str, line_suffix: str, language: str) -> str:
    """Trim the end of ``text`` that repeats the start of the rest of the line."""
    tail = line_suffix.lstrip()
    body = text.rstrip()
    if not tail or not body:
        return text
    best, best_errors = text, _errors(line_prefix + text + line_suffix, language)
    full_match = False
    for k in range(1, min(len(tail), len(body)) + 1):
        if not body.endswith(tail[:k]):
            continue
        candidate = body[:-k]
        errors = _errors(line_prefix + candidate + line_suffix, language)
        # A body ending in the tail twice over ("1aa" before "a") is ambiguous: trimming
        # one copy would leave a text that trims again (not idempotent), so only fewer
        # parse errors decide there.
        is_full = k == len(tail) and not candidate.rstrip().endswith(tail)
        if errors < best_errors or (errors == best_errors and is_full and not full_match):
            best, best_errors, full_match = candidate, errors, is_full
    return best


def _strip_trailing(text: str, line_suffix: str) -> str:
    lines = text.split("\n")
    lines = [line.rstrip() for line in lines[:-1]] + [lines[-1]]
    while len(lines) > 1 and not lines[-1].strip():
        lines.pop()
    if not line_suffix or line_suffix[0].isspace() or not line_suffix.strip():
        lines[-1] = lines[-1].rstrip()
    return "\n".join(lines)


def complete_lines(text: str) -> str:
    """Return a block that a token or time cap cut short without its unfinished last line.

    A block shown with its last statement half written (``int[] ans = new int``) leaves
    the program broken where the lines before it were whole; the first line with code is
    kept even when it is the cut one (nothing else would be shown).
    """
    head, sep, last = text.rpartition("\n")
    if not sep or not last.strip() or not head.strip():
        return text
    return head


def postprocess(
    text: str,
    *,
    line_prefix: str,
    line_suffix: str,
    following_text: str,
    multiline: bool,
    max_lines: int,
    language: str,
) -> str:
    """Return the suggestion to show for raw model ``text`` inserted at the cursor ('' = none).

    ``line_prefix``/``line_suffix`` are the cursor line before and after the cursor;
    ``following_text`` is the document after the cursor (``line_suffix`` first; the lines
    below alone are accepted too).
    """
    after, below = _after_cursor(line_suffix, following_text)
    out = text.replace("\r\n", "\n").replace("\r", "\n")
    if not multiline:
        out = out.split("\n", 1)[0]
    out = _cut_repeats(out, line_prefix)
    out = _limit_lines(out, max_lines)
    out = _cut_outer_closers(out, line_prefix, after, language)
    out = _cut_lines_below(out, line_prefix, line_suffix, below)
    out = _trim_end_overlap(out, line_prefix, line_suffix, language)
    out = _strip_trailing(out, line_suffix)
    if not out.strip():
        return ""
    if after.startswith(out):
        return ""
    return out


# -- single-line or multi-line ---------------------------------------------------------


def _indent(line: str) -> int:
    return len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())


def _code_part(line: str, language: str) -> str:
    """Return ``line`` without a trailing line comment (outside strings), right-stripped."""
    stack: list[str] = []
    comment = _comment(language)
    quotes = _quotes(language)
    i = 0
    while i < len(line):
        if stack:
            if line[i] == "\\":
                i += 2
                continue
            if line.startswith(stack[-1], i):
                i += len(stack.pop())
                continue
            i += 1
            continue
        if line.startswith(comment, i):
            return line[:i].rstrip()
        quote = next((q for q in quotes if line.startswith(q, i)), "")
        if quote:
            stack.append(quote)
            i += len(quote)
            continue
        i += 1
    return line.rstrip()


def _opens_block(code: str, language: str) -> bool:
    """True when a line (comment removed) ends by opening a block or bracketed body."""
    if not code:
        return False
    if code.endswith(("{", "(", "[")):
        return True
    if code.endswith(":"):
        if canonical_language(language) == "python":
            return True
        head = code.lstrip()
        return head.startswith(("case ", "default")) or head.endswith(("public:", "private:"))
    return code.endswith("=>")


def opens_block(line: str, language: str) -> bool:
    """True when ``line`` (a whole line, its comment left out) ends by opening a block (``:``
    in Python, ``{``, ``=>``, a ``case`` label), not a bracket."""
    code = _code_part(line, language)
    return _opens_block(code, language) and not code.endswith(("(", "["))


def _tree_matches(tree: Any, source: bytes) -> bool:
    """True when ``tree`` was parsed from ``source`` (a stale tree is not used)."""
    try:
        root = tree.root_node
        if root.end_byte > len(source):
            return False
        node_text = root.text
        if node_text is None:
            return True
        return bool(source[root.start_byte : root.end_byte] == node_text)
    except AttributeError:
        return False


def _is_empty_block(node: Any) -> bool:
    return node.type in _BLOCK_TYPES and not any(
        child.is_named and "comment" not in child.type for child in node.children
    )


def _tree_empty_block(tree: Any, lines: list[str], opener_line: int, cursor_line: int) -> bool:
    """True when the syntax tree has an empty block body opened on ``opener_line``."""
    text = lines[opener_line].rstrip()
    if not text:
        return False
    col = len(text[: len(text) - 1].encode())
    node = tree.root_node.descendant_for_point_range((opener_line, col), (opener_line, col))
    for _ in range(6):
        if node is None:
            return False
        for candidate in (node, *node.children):
            if not _is_empty_block(candidate):
                continue
            if candidate.start_point.row != opener_line:
                continue
            if candidate.end_point.row >= cursor_line or candidate.start_byte == candidate.end_byte:
                return True
        node = node.parent
    return False


def decide_multiline(tree_or_none: Any, text: str, line: int, column: int, language: str) -> bool:
    """Return True when the position starts an empty block body (multi-line suggestion)."""
    lines = text.split("\n")
    if not 0 <= line < len(lines):
        return False
    current = lines[line].rstrip("\r")
    column = max(0, min(column, len(current)))
    before, after = current[:column], current[column:]
    rest = after.strip()
    if rest and not (before.rstrip().endswith("{") and set(rest) <= set(")]};,")):
        return False  # mid-line: code right of the cursor
    if before.strip():
        code = _code_part(before, language)
        # Right after "(" or "[" on the same line the user is writing arguments: one
        # line. A block opener ("{", Python's ":") starts a body: several lines.
        if not _opens_block(code, language) or code.endswith(("(", "[")):
            return False
        opener = line
    else:
        opener = next((i for i in range(line - 1, -1, -1) if lines[i].strip()), -1)
        if opener < 0:
            return False
    tree_ok = tree_or_none is not None and _tree_matches(tree_or_none, text.encode())
    if tree_ok:
        try:
            if _tree_empty_block(tree_or_none, lines, opener, line):
                return True
        except (AttributeError, ValueError, TypeError) as exc:  # an unexpected tree API
            log.debug("tree check failed: %s", exc)
    opener_code = _code_part(before if opener == line else lines[opener].rstrip("\r"), language)
    if not _opens_block(opener_code, language):
        return False
    if rest:
        return True
    below = next((x for x in lines[line + 1 :] if x.strip()), None)
    return below is None or _indent(below) <= _indent(lines[opener])
