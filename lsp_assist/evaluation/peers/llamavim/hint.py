"""llama.vim's hint rules (``s:fim_render`` without the drawing): what an answer shows at
a position, and whether it can be accepted. The client is ``client.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lsp_assist.evaluation.peers.llamavim.context import getline, is_blank, leading


@dataclass(frozen=True)
class Hint:
    """``s:fim_render``'s outcome: the hint's lines (the rest of the line appended to the
    last), whether it can be accepted, and the line it is drawn on."""

    content: tuple[str, ...]
    can_accept: bool
    line_cur: str
    line_cur_suffix: str


def render_hint(content_text: str, lines: Sequence[str], x: int, y: int) -> Hint:
    """``s:fim_render`` without the drawing: what the hint at (``x``, ``y``) is."""
    content = content_text.split("\n")
    while content and content[-1] == "":
        content.pop()
    can_accept = True
    if not content:
        content = [""]
        can_accept = False
    line_cur = getline(lines, y)
    if is_blank(line_cur):
        # a whitespace-only line: the suggestion's own indentation takes its place
        lead = min(leading(content[0]), len(line_cur))
        line_cur = content[0][:lead]
        content[0] = content[0][lead:]
    line_cur_prefix = line_cur[:x]
    line_cur_suffix = line_cur[x:]
    if len(content) == 1 and content[0] == "":
        content = [""]
    if (
        len(content) > 1
        and content[0] == ""
        and content[1:] == list(lines[y + 1 : y + len(content)])
    ):
        content = [""]  # an empty first line, then the lines that follow anyway
    if len(content) == 1 and content[0] == line_cur_suffix:
        content = [""]  # the rest of the line, again
    cmp_y = y + 1
    while cmp_y < len(lines) - 1 and is_blank(getline(lines, cmp_y)):
        cmp_y += 1
    if line_cur_prefix + content[0] == getline(lines, cmp_y):
        # the next non-blank line, again
        if len(content) == 1:
            content = [""]
        if len(content) == 2:
            after = getline(lines, cmp_y + 1)
            # Vim's after[:len - 1] is the whole line when len is 0
            head = after[: len(content[-1])] if content[-1] else after
            if content[-1] == head:
                content = [""]
        if len(content) > 2 and "\n".join(content[1:]) == "\n".join(
            lines[cmp_y + 1 : cmp_y + len(content)]
        ):
            content = [""]
    content[-1] += line_cur_suffix
    if is_blank("\n".join(content)):
        can_accept = False
    return Hint(tuple(content), can_accept, line_cur, line_cur_suffix)
