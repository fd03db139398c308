"""Prompt layout: tokenized pieces, the parts of each layer, their order per format, assembly.

A prompt is a list of :class:`Piece` (a chunk of text, its token ids, its layer). The
layer renderers fill a :class:`Parts` with them; :func:`order` lays the parts out in
the format's order (plain, FIM prefix-suffix-middle, suffix-first, repository
tokens), most stable first and the typed part of the cursor line last; and
:func:`assemble` concatenates them into an :class:`AssembledPrompt`, dropping the
lowest-priority layers should the total exceed the budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from lsp_assist.context.budget import PRIORITY, PROMPT_ORDER, BudgetPlan
from lsp_assist.context.formats import PromptFormat, comment_prefix
from lsp_assist.context.model import AssembledPrompt, Layer, LayerItem
from lsp_assist.context.tokens import CachedCounter
from lsp_assist.errors import ContextError

SUFFIX_LINES = 10
"""Lines after the cursor line the prompt's ``suffix`` holds at least."""

_LAST_PRE_TOKEN = re.compile(r"(?:\s+|(?:[^\r\n\w]|_)?[^\W\d_]+|\d{1,3}| ?[^\s\w]+)\Z")
"""The last pre-token of a text as GPT-4-style byte-level BPE tokenizers (Qwen, StarCoder,
Llama 3) split it: a run of spaces, letters with the one other character before them
(``" ret"``, ``".bar"``, ``"\tif"``), up to three digits, a run of punctuation with its
space. That token is the one a model may continue differently from how it was cut."""


def heal_split(typed: str) -> tuple[str, str]:
    """Return ``typed`` as (the part kept in the prompt, the tail the model must write).

    Token healing (backends/healing.py): the typed indentation ``"    "`` tokenizes as
    one token the model rarely saw before code; the prompt keeps ``"   "`` and the model
    writes ``" return"`` itself.
    """
    if typed[-1:].isspace():
        # only the last white space character: "    " is written "   " + " return", and a
        # model made to write the whole run wrote it from single spaces and then more
        # spaces (Qwen2.5-Coder at a blanked HumanEval line: 42 spaces and nothing else)
        return typed[:-1], typed[-1:]
    found = _LAST_PRE_TOKEN.search(typed)
    if found is None:
        return typed, ""
    return typed[: found.start()], typed[found.start() :]


@dataclass(slots=True)
class Piece:
    """One tokenized chunk of the prompt."""

    layer: str
    text: str
    ids: tuple[int, ...]
    volatile: bool = False
    """Changes at every keystroke (the typed part of the cursor line)."""


def cost(pieces: Iterable[Piece]) -> int:
    """Return the tokens of ``pieces``."""
    return sum(len(p.ids) for p in pieces)


@dataclass(slots=True)
class Parts:
    """The selected pieces of each layer, before they are laid out in format order."""

    head: list[Piece] = field(default_factory=list)
    project: list[Piece] = field(default_factory=list)
    related: list[Piece] = field(default_factory=list)
    similar: list[Piece] = field(default_factory=list)
    file_header: list[Piece] = field(default_factory=list)
    file_summary: list[Piece] = field(default_factory=list)
    before: list[Piece] = field(default_factory=list)
    after: list[Piece] = field(default_factory=list)
    typed: list[Piece] = field(default_factory=list)
    pre: list[Piece] = field(default_factory=list)
    suf: list[Piece] = field(default_factory=list)
    mid: list[Piece] = field(default_factory=list)
    items: dict[str, list[LayerItem]] = field(default_factory=dict)
    healed: str = ""
    """The typed tail cut from the prompt for the model to write (token healing)."""


@dataclass(slots=True)
class Rendered:
    """What a layer renderer made: its pieces in prompt order and its explain items."""

    pieces: list[Piece] = field(default_factory=list)
    items: list[LayerItem] = field(default_factory=list)


class PieceMaker:
    """Makes the pieces of one prompt format with the model's (cached) tokenizer."""

    def __init__(self, counter: CachedCounter, fmt: PromptFormat) -> None:
        self.counter = counter
        self.format = fmt

    def piece(self, layer: str, text: str, *, special: bool = False) -> Piece:
        """Return ``text`` tokenized as a piece of ``layer`` (special tokens parsed if asked)."""
        ids = self.counter.special(text) if special else self.counter.tokens(text)
        return Piece(layer=layer, text=text, ids=ids)

    def pieces(self, layer: str, parts: Iterable[tuple[str, bool]]) -> list[Piece]:
        """Return one piece per ``(text, special)`` pair."""
        return [self.piece(layer, text, special=sp) for text, sp in parts]

    def id_piece(self, layer: str, token: int | None) -> list[Piece]:
        """Return the piece of one special token id (none when the format lacks it)."""
        if token is None:
            return []
        return [Piece(layer=layer, text=self.format.text_of(token), ids=(token,))]

    def source_header(self, layer: str, source: str, caption: str, language: str) -> list[Piece]:
        """Return the header naming the file a chunk comes from (repository tokens or a comment)."""
        fmt = self.format
        if fmt.has_repo_tokens:
            return self.pieces(layer, fmt.file_header(source))
        c = comment_prefix(language)
        return [self.piece(layer, f"{c} {caption}{source}\n")]

    def head(self, language: str, rel: str, repo_name: str) -> list[Piece]:
        """Return the instructions: BOS, the repository header, the language/file comment."""
        fmt = self.format
        head = self.id_piece("instructions", fmt.bos_id)
        if fmt.has_repo_tokens and fmt.repo_name_token:
            head += self.pieces("instructions", fmt.repo_header(repo_name or "repo"))
        if not fmt.has_repo_tokens:
            c = comment_prefix(language)
            head.append(self.piece("instructions", f"{c} Language: {language}. File: {rel}\n"))
        return head

    def format_parts(
        self, language: str, rel: str, repo_name: str, total: int
    ) -> tuple[Parts, int]:
        """Return the format's fixed pieces (head, file header, FIM ids) and their cost."""
        fmt = self.format
        parts = Parts()
        parts.head = self.head(language, rel, repo_name)
        if fmt.has_repo_tokens:
            parts.file_header = self.pieces("instructions", fmt.file_header(rel))
        if fmt.is_fim:
            parts.pre = self.id_piece("instructions", fmt.fim_prefix_id)
            parts.suf = self.id_piece("instructions", fmt.fim_suffix_id)
            parts.mid = self.id_piece("instructions", fmt.fim_middle_id)
        overhead = cost(parts.head + parts.file_header + parts.pre + parts.suf + parts.mid)
        if overhead > total:
            raise ContextError(f"budget {total} is smaller than the format overhead ({overhead})")
        return parts, overhead


def order(fmt: PromptFormat, parts: Parts) -> list[Piece]:
    """Return the pieces in the format's prompt order, the typed part of the line last."""
    context = parts.project + parts.related + parts.similar
    before = parts.file_summary + parts.before
    if not fmt.is_fim:
        return parts.head + context + parts.file_header + before + parts.typed
    if fmt.order == "spm":
        head, rest = parts.head[:1], parts.head[1:]
        return head + parts.suf + parts.after + parts.pre + rest + context + before + parts.typed
    middle = before + parts.suf + parts.after + parts.mid + parts.typed
    bos = parts.head[:1] if fmt.bos_id is not None else []
    if fmt.has_repo_tokens:
        if context:
            return parts.head + context + parts.file_header + parts.pre + middle
        # With no other file to show, the current file is a plain FIM prompt: the
        # repository header and the file's path line cost Qwen2.5-Coder-0.5B 14 of the 27
        # HumanEval tasks where plain FIM and the server disagreed (docs/context.md).
        return bos + parts.pre + middle
    rest = parts.head[1:] if fmt.bos_id is not None else parts.head
    return bos + parts.pre + rest + context + middle


def suffix_after(lines: list[str], line: int, col: int, last: int) -> str:
    """Return the text after ``(line, col)`` through line ``last`` (what the editor still shows)."""
    return lines[line][col:] + "".join(f"\n{x}" for x in lines[line + 1 : last + 1])


def assemble(
    fmt: PromptFormat,
    parts: Parts,
    plan: BudgetPlan,
    *,
    strategy: str,
    total: int,
    suffix: str,
) -> AssembledPrompt:
    """Return the prompt of ``parts`` in format order, never over ``total`` tokens."""
    pieces = order(fmt, parts)
    count = cost(pieces)
    # defensive: never exceed the budget, dropping the lowest priority first
    for layer in reversed(PRIORITY[1:]):
        if count <= total:
            break
        for attr in ("project", "file_summary", "similar", "related"):
            if getattr(parts, attr) and getattr(parts, attr)[0].layer == layer:
                setattr(parts, attr, [])
        parts.items[layer] = []
        pieces = order(fmt, parts)
        count = cost(pieces)
    if count > total:
        raise ContextError(f"prompt of {count} tokens does not fit the budget of {total}")
    tokens: list[int] = []
    text_parts: list[str] = []
    stable = 0
    by_layer: dict[str, list[Piece]] = {}
    for piece in pieces:
        if not piece.volatile:
            stable = len(tokens) + len(piece.ids)
        tokens.extend(piece.ids)
        text_parts.append(piece.text)
        by_layer.setdefault(piece.layer, []).append(piece)
    if pieces and pieces[-1].volatile:
        stable = len(tokens) - len(pieces[-1].ids)
    names = (
        PROMPT_ORDER if strategy == "layered" else ("instructions", "open_files", "editing_zone")
    )
    layers = []
    for name in names:
        own = by_layer.get(name, [])
        layers.append(
            Layer(
                name=name,
                tokens=cost(own),
                budget=max(0, plan.granted.get(name, 0)),
                items=parts.items.get(name, []),
                text="".join(p.text for p in own),
            )
        )
    return AssembledPrompt(
        strategy=strategy,
        budget=total,
        format=fmt.name,
        layers=layers,
        tokens=tokens,
        prompt="".join(text_parts),
        stable_prefix_len=stable,
        suffix=suffix,
        healed=parts.healed,
    )
