"""Kept lines: what a single-line generation writes past the shown line, for the next lines.

On a CPU that affords one generation every few keys, a generation that stops at the end
of the shown line throws the model's next lines away, and every new line starts with a
fresh prompt that arrives after the user's first key there. So a single-line generation
at the end of a line goes on (the multi-line stop rules, ``keptLines`` lines at most)
while no newer request waits: a key the type-through cache cannot answer cancels it
within one decode step, as it cancels any generation. The suggestion shown is still the
first line; the lines after it are kept in its type-through entry
(serving/typethrough.py) and answered from memory, one at a time, once the user is on
the next line (Enter and the editor's auto-indent typed into them). Cody's "hot streak"
does the same with up to five lines. A shown line that opens a block takes its body from
the kept lines (:func:`block_body`, ``dynamicMultiline``). docs/serving.md, "Kept lines".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lsp_assist.backends import StopRule

_FUNCTIONS = ("function", "method", "constructor", "lambda", "closure")
"""A syntax node whose type contains one of these (and has a body) is a function."""


@dataclass(frozen=True, slots=True)
class KeptLines:
    """The lines kept after a shown line, from the raw text generated so far."""

    clean_block: Callable[[str], str]
    """Post-processing of the raw text as a block (multi-line, at most the shown line and
    ``keptLines`` more): loops, lines already below the cursor and unbalanced closers cut."""
    below: str = ""
    """The first line with code below the cursor's, stripped: a line being written that
    starts like it is most often a copy of it, which post-processing drops once whole."""

    def __call__(self, raw: str, shown: str, *, whole: bool, writing: bool = False) -> str:
        """The kept lines after ``shown`` ('' none; else starting with a line break).

        ``whole``: the generation ended where its last line ends (a stop rule, the end of
        text), so every line counts. ``writing``: the generation goes on, and the line it
        is writing counts too (shown as it grows, as an early answer's start is), unless
        it starts like the line below. Otherwise only the lines a line break has closed
        count (a line cut by a cap or a cancel is not kept).
        """
        if not shown or "\n" not in raw:
            return ""
        if not whole:
            head, _, last = raw.rpartition("\n")
            copying = bool(self.below) and self.below.startswith(last.strip())
            if not writing or not last.strip() or copying:
                raw = head
        if "\n" not in raw:
            return ""
        block = self.clean_block(raw)
        if not block.startswith(shown + "\n"):
            # post-processing changed the shown line: what follows was not written for it
            return ""
        kept = block[len(shown) :]
        return kept if kept.strip() else ""


def block_body(kept: str, indent: int) -> tuple[str, str]:
    """Split ``kept`` (lines after a line that opens a block, each after its line break)
    into the block's body and the rest: the lines indented deeper than ``indent`` (blank
    ones between them too) and a closer (``}``, ``)``, ``]``) at ``indent`` that ends it."""
    lines = kept.split("\n")[1:]
    body: list[str] = []
    for line in lines:
        if not line.strip() or len(line) - len(line.lstrip(" \t")) > indent:
            body.append(line)
            continue
        if line.lstrip(" \t")[:1] in ("}", ")", "]") and body:
            body.append(line)
        break
    while body and not body[-1].strip():
        body.pop()
    if not any(line.strip() for line in body):
        return "", kept
    head = "".join("\n" + line for line in body)
    return head, kept[len(head) :]


def kept_stop_rule(
    block_rule: StopRule,
    *,
    shows: Callable[[str], bool],
    line_end: Callable[[str], int] = lambda text: text.find("\n"),
) -> StopRule:
    """The stop rule of a generation that keeps lines: ``block_rule`` (the multi-line rules
    over the shown line and the kept ones), and a stop at the shown line's end (``line_end``:
    the first line's, or the next line's where the first adds nothing) when ``shows`` says
    post-processing leaves nothing of it (no suggestion to keep lines for).
    """

    last: list[tuple[str, bool]] = []  # the shown line asked about, and the answer

    def rule(text: str) -> int | None:
        first_end = line_end(text)
        if first_end >= 0:
            head = text[:first_end]
            if not last or last[0][0] != head:
                last[:] = [(head, shows(head))]
            if not last[0][1]:
                return first_end
        return block_rule(text)

    return rule


def kept_indent(tree: Any, line_text: Callable[[int], str], line: int, column: int) -> int | None:
    """The least indentation a kept line may have: deeper than the line of the function
    around (``line``, ``column``), so kept lines may leave a block (the next statement
    after an ``if`` body) but never the function; None without a tree or a function."""
    if tree is None:
        return None
    node = tree.root_node.named_descendant_for_point_range((line, column), (line, column))
    while node is not None:
        kind = str(node.type)
        if any(word in kind for word in _FUNCTIONS) and node.child_by_field_name("body"):
            head = node.start_point[0]
            if head >= line:
                return None  # the cursor is on the function's own first line
            text = line_text(head)
            return len(text) - len(text.lstrip(" \t")) + 1
        node = node.parent
    return None
