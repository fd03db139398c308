"""The next-edit prompt: a window around the cursor for the model to rewrite.

Owns what the model source of next edits (issue 22, docs/serving.md "Next edits")
shows the model: :func:`edit_window` (whole lines around the cursor), :func:`recent_edits`
(the user's latest bursts of typing as before/after line blocks, rebuilt from the edit
history by undoing the changes newest first) and :func:`rewrite_prompt`, in one of two
formats (:data:`REWRITE_FORMATS`):

- ``sweep``: the format Sweep's next-edit models were trained on (Qwen2.5-Coder's
  repository tokens: related files, then ``{path}.diff`` blocks of ``original:`` /
  ``updated:`` lines, then ``original/{path}``, ``current/{path}`` and ``updated/{path}``,
  which the model completes with the rewritten window);
- ``instruct``: a chat turn for an instruction-tuned code model (Qwen2.5-Coder-Instruct's
  ``<|im_start|>`` turns), the window in a fenced block the answer repeats rewritten.

Which one a model gets is :func:`choose_rewrite_format`'s decision (docs/decisions.md).
Everything is plain text; the caller tokenizes and enforces the token budget by
dropping the related code first, then the oldest edits (:func:`fit_rewrite_prompt`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from lsp_assist.backends.base import ModelInfo
from lsp_assist.documents import TextChange

__all__ = [
    "REWRITE_FORMATS",
    "EditWindow",
    "RecentEdit",
    "RewriteFormat",
    "choose_rewrite_format",
    "edit_window",
    "fit_rewrite_prompt",
    "original_window",
    "recent_edits",
    "rewrite_prompt",
]

RewriteFormat = Literal["sweep", "instruct"]
REWRITE_FORMATS: tuple[RewriteFormat, ...] = ("sweep", "instruct")

LINES_ABOVE = 4
LINES_BELOW = 8
"""The window: the cursor's line, 4 lines above it and 8 below (next edits are mostly
below the edit that implies them: the uses after a renamed definition)."""
RECENT_EDITS = 3
"""Bursts of typing shown, newest last."""
EDIT_CONTEXT_LINES = 1
"""Unchanged lines shown around each recent edit."""


@dataclass(frozen=True, slots=True)
class EditWindow:
    """Whole lines ``first`` .. ``first + len(lines) - 1`` of a document."""

    first: int
    lines: tuple[str, ...]
    last_of_document: bool
    """True when the window's last line is the document's (no line break after it)."""

    @property
    def text(self) -> str:
        """The window as the model sees it: its lines, each ended by a line break."""
        return "".join(line + "\n" for line in self.lines)

    @property
    def end(self) -> int:
        """The line after the window."""
        return self.first + len(self.lines)


@dataclass(frozen=True, slots=True)
class RecentEdit:
    """One burst of typing as whole lines: ``before`` became ``after`` at line ``line``."""

    line: int
    """Where ``after`` begins in the text after this edit (0-based)."""
    before: str
    after: str


def edit_window(
    lines: Sequence[str], cursor_line: int, *, above: int = LINES_ABOVE, below: int = LINES_BELOW
) -> EditWindow:
    """The window of ``lines`` around ``cursor_line`` (clamped to the document)."""
    count = len(lines) - 1 if len(lines) > 1 and lines[-1] == "" else len(lines)
    cursor_line = max(0, min(cursor_line, count - 1))
    first = max(0, cursor_line - above)
    end = min(count, cursor_line + below + 1)
    # the empty "line" after a final line break is not one: the window ends before it
    return EditWindow(first, tuple(lines[first:end]), end == len(lines))


def _line_span(text: str, start: int, end: int, context: int) -> tuple[int, int, int]:
    """The offsets of the whole lines holding ``start``-``end``, ``context`` lines more
    each side, and the number of the first of them."""
    lo = text.rfind("\n", 0, start) + 1
    for _ in range(context):
        if lo == 0:
            break
        lo = text.rfind("\n", 0, lo - 1) + 1
    hi = end
    for _ in range(context + 1):
        found = text.find("\n", hi)
        hi = len(text) if found < 0 else found + 1
        if found < 0:
            break
    return lo, hi, text.count("\n", 0, lo)


def recent_edits(
    text: str, changes: Sequence[TextChange], *, limit: int = RECENT_EDITS
) -> list[RecentEdit]:
    """The newest ``limit`` changes of ``text`` as line blocks, oldest first.

    ``changes`` is the document's history, oldest first, ``text`` the document now (after
    the newest). Each change is undone in turn, newest first, so each is shown against
    the text it was made in.
    """
    shown: list[RecentEdit] = []
    after = text
    for change in reversed(changes):
        if len(shown) == limit:
            break
        start, end = change.start, change.end
        if end > len(after) or after[start:end] != change.inserted:
            break  # the history no longer lines up with the text
        before = after[:start] + change.removed + after[end:]
        lo, hi, line = _line_span(after, start, end, EDIT_CONTEXT_LINES)
        grown = len(change.removed) - len(change.inserted)
        shown.append(RecentEdit(line, before[lo : hi + grown], after[lo:hi]))
        after = before
    shown.reverse()
    return shown


def original_window(text: str, window: EditWindow, change: TextChange | None) -> str:
    """The window's text before ``change`` (the newest edit), ``window.text`` when the
    change is outside it or does not line up with ``text``."""
    if change is None or text[change.start : change.end] != change.inserted:
        return window.text
    first_line = text.count("\n", 0, change.start)
    last_line = first_line + change.inserted.count("\n")
    if last_line < window.first or first_line >= window.end:
        return window.text
    before = text[: change.start] + change.removed + text[change.end :]
    shift = change.removed.count("\n") - change.inserted.count("\n")
    lines = before.split("\n")[window.first : window.end + shift]
    return "".join(line + "\n" for line in lines)


def choose_rewrite_format(info: ModelInfo) -> RewriteFormat:
    """``sweep`` for a model trained on it (Sweep's next-edit GGUFs), else ``instruct``."""
    name = info.name.lower().replace("_", "-")
    if "sweep" in name or "next-edit" in name:
        return "sweep"
    return "instruct"


def _block(text: str) -> str:
    return text if text.endswith("\n") or not text else text + "\n"


def rewrite_prompt(
    fmt: RewriteFormat,
    path: str,
    language: str,
    window: EditWindow,
    original: str,
    edits: Sequence[RecentEdit],
    related: Sequence[tuple[str, str]],
) -> str:
    """The prompt text for ``fmt`` (special tokens written out; tokenize with special).

    ``original`` is the window's text before the newest edit, ``related`` (path, code)
    chunks of other files' definitions.
    """
    if fmt == "sweep":
        out = [f"<|file_sep|>{source}\n{_block(code)}" for source, code in related]
        for edit in edits:
            out.append(
                f"<|file_sep|>{path}.diff\noriginal:\n{_block(edit.before)}"
                f"updated:\n{_block(edit.after)}"
            )
        out.append(f"<|file_sep|>original/{path}\n{_block(original)}")
        out.append(f"<|file_sep|>current/{path}\n{window.text}")
        out.append(f"<|file_sep|>updated/{path}\n")
        return "".join(out)
    fence = f"```{language}\n"
    parts = []
    if related:
        chunks = "".join(f"# {source}\n{_block(code)}" for source, code in related)
        parts.append(f"Definitions from other files:\n{fence}{chunks}```\n")
    shown = "".join(f"original:\n{_block(e.before)}updated:\n{_block(e.after)}" for e in edits)
    parts.append(f"My edit:\n{shown}Code:\n{fence}{window.text}```")
    return (
        f"<|im_start|>system\n{_INSTRUCTIONS}<|im_end|>\n"
        f"<|im_start|>user\n{_EXAMPLE_ASK}<|im_end|>\n"
        f"<|im_start|>assistant\n{_EXAMPLE_ANSWER}<|im_end|>\n"
        f"<|im_start|>user\n{''.join(parts)}<|im_end|>\n<|im_start|>assistant\n{fence}"
    )


_INSTRUCTIONS = (
    "You update code after a programmer's edit. Rewrite the code so that the rest of it "
    "agrees with the edit: the other uses of a renamed name, the calls of a changed "
    "function. Change nothing else and never undo the edit."
)
_EXAMPLE_ASK = """My edit:
original:
def area(w, h):
updated:
def area(width, h):
Code:
```
def area(width, h):
    if w < 0:
        raise ValueError(w)
    return w * h
```"""
_EXAMPLE_ANSWER = """```
def area(width, h):
    if width < 0:
        raise ValueError(width)
    return width * h
```"""


def fit_rewrite_prompt(
    build: Callable[[Sequence[RecentEdit], Sequence[tuple[str, str]]], str],
    count: Callable[[str], int],
    budget: int,
    edits: Sequence[RecentEdit],
    related: Sequence[tuple[str, str]],
) -> tuple[str, int]:
    """The fullest prompt within ``budget`` tokens: related chunks dropped from the last,
    then the oldest edits (the newest and the window always stay); with its token count."""
    kept_related, kept_edits = list(related), list(edits)
    while True:
        prompt = build(kept_edits, kept_related)
        tokens = count(prompt)
        if tokens <= budget:
            return prompt, tokens
        if kept_related:
            kept_related.pop()
        elif len(kept_edits) > 1:
            kept_edits.pop(0)
        else:
            return prompt, tokens
