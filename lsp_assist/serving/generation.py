"""One completion's generation as named stages: plan it, then settle what came back.

:func:`plan` turns a request and its prompt into a :class:`Plan`: the backend's
:class:`GenerationRequest` (stop rules, caps, token healing, infill parts), the
post-processing of its text (:class:`Cleaner`), the early answer and the kept lines
(serving/early.py, serving/kept.py), the confidence gate, and the outcome so far.
The engine runs the plan on the backend; :func:`settle` turns the result into the
request's :class:`CompletionOutcome` (the early answer's start kept on a cancel, the
gate, the alternatives), and :meth:`Plan.kept_after` says which lines the type-through
entry keeps after it. No closures: what a stage needs is in a value.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from tree_sitter import Tree

from lsp_assist.backends import (
    Backend,
    CancelToken,
    GenerationRequest,
    GenerationResult,
    StopRule,
)
from lsp_assist.config import Settings
from lsp_assist.context import AssembledPrompt
from lsp_assist.documents import DocumentSnapshot, Position
from lsp_assist.serving.alternatives import distinct, wanted
from lsp_assist.serving.confidence import GATE_OFF, FirstLineConfidence, below
from lsp_assist.serving.early import EarlyAnswer
from lsp_assist.serving.infill_parts import infill_parts
from lsp_assist.serving.kept import KeptLines, block_body, kept_indent, kept_stop_rule
from lsp_assist.serving.model import CompletionOutcome, CompletionQuery
from lsp_assist.serving.postprocess import (
    complete_lines,
    decide_multiline,
    opens_block,
    postprocess,
)
from lsp_assist.serving.stoprules import make_stop_rule, stop_strings
from lsp_assist.serving.typethrough import EntryKey, TypeThrough

__all__ = ["Cleaner", "Plan", "plan", "settle"]

ENDED_AT_A_LINE_END = ("stop", "rule", "eos")
"""Stop reasons after which the generated text's last line is whole."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Cleaner:
    """Post-processing of one request's raw model text, at its place in the document."""

    prefix: str
    """The cursor's line before the cursor."""
    suffix: str
    """The cursor's line after the cursor."""
    following: str
    """The document after the cursor."""
    multiline: bool
    max_lines: int
    language: str
    kept_lines: int = 0
    """Lines a block of kept lines has after the shown one (serving/kept.py)."""
    next_line: bool = False
    """At the end of a line with code: where the model ends the line at once, the shown
    suggestion is the line break and the next line (``nextLineAtEnd``)."""
    dynamic_block: bool = False
    """A shown line that opens a block becomes the block (``dynamicMultiline``)."""

    def __call__(self, raw: str, stop_reason: str = "", *, block: bool | None = None) -> str:
        """The suggestion ``raw`` makes here ('' none); ``block``: as a multi-line one."""
        if block is None and self.next_line and self._ends_line(raw):
            # nothing more on this line: the ghost line below, as kept lines show one
            whole = self(raw, stop_reason, block=True)
            below = whole[1:].split("\n", 1)[0] if whole.startswith("\n") else ""
            return "\n" + below if below.strip() else ""
        block = self.multiline if block is None else block
        if block and stop_reason in ("length", "timeout"):
            raw = complete_lines(raw)  # a capped block ends at its last whole line
        if self.prefix[-1:] in (" ", "\t"):
            # The prompt ends in whitespace the model tends to repeat: "x = " + " y".
            raw = raw.lstrip(" \t")
        kept_block = block and not self.multiline
        return postprocess(
            raw,
            line_prefix=self.prefix,
            line_suffix=self.suffix,
            following_text=self.following,
            multiline=block,
            max_lines=1 + self.kept_lines if kept_block else self.max_lines,
            language=self.language,
        )

    def block(self, raw: str) -> str:
        """``raw`` post-processed as a block: the shown line and the kept lines after it."""
        return self(raw, block=True)

    def shows(self, raw: str) -> bool:
        """True when post-processing leaves something of ``raw`` to show."""
        return bool(self(raw))

    def shown_line_end(self, raw: str) -> int:
        """Where the line ``raw`` shows ends: the index of its line break, -1 not yet
        (with ``next_line``, after a first line left blank, the second line's)."""
        first = raw.find("\n")
        if first >= 0 and self._ends_line(raw):
            return raw.find("\n", first + 1)
        return first

    def _ends_line(self, raw: str) -> bool:
        """True when ``raw`` adds nothing to the cursor's line (its first line is blank) and
        a next line is shown instead (``next_line``)."""
        first = raw.find("\n")
        return self.next_line and first >= 0 and not raw[:first].strip()


class TextSink:
    """The ``on_text`` of one generation: the confidence of its first line, its early answer."""

    def __init__(self, confidence: FirstLineConfidence, early: EarlyAnswer | None) -> None:
        self.confidence = confidence
        self.early = early

    def __call__(self, piece: str) -> None:
        """Take one streamed piece of the model's text (on the model thread)."""
        self.confidence.text(piece)
        if self.early is not None:
            self.early(piece)


def gate_threshold(settings: Settings, trigger: str) -> float:
    """The confidence gate's log-probability threshold for a request (off: ``GATE_OFF``);
    an explicit ask is never gated."""
    threshold = settings.completion.confidence_threshold
    return math.log(threshold) if threshold > 0 and trigger == "automatic" else GATE_OFF


def unsure(confidence: FirstLineConfidence, threshold: float) -> bool:
    """True when the first line's confidence is below the gate's threshold."""
    return below(confidence.mean(), threshold)


@dataclass(frozen=True, slots=True)
class Plan:
    """What one generation runs with, and what settling its result needs."""

    request: GenerationRequest
    clean: Cleaner
    line_rule: StopRule
    """The stop rule of the shown suggestion alone (a retry does not keep lines)."""
    max_tokens: int
    """The shown suggestion's token cap (the request's, less the kept lines' tokens)."""
    entry: EntryKey
    """The type-through entry of the suggestion (the text it was made for)."""
    keep: KeptLines | None
    early: EarlyAnswer | None
    confidence: FirstLineConfidence
    threshold: float
    prepared: CompletionOutcome
    """The outcome so far: the request's place, its prompt and its times until the call."""
    called: float
    """When the backend was called (``time.perf_counter``)."""

    def retry(self) -> GenerationRequest:
        """The request for the next likeliest line: one line, no kept lines."""
        return dataclasses.replace(
            self.request, stop_rule=self.line_rule, max_tokens=self.max_tokens
        )

    def kept_after(self, result: GenerationResult, outcome: CompletionOutcome) -> str:
        """The lines the type-through entry keeps after the shown suggestion ('' none)."""
        if self.keep is None or not outcome.text or outcome.alternatives:
            return ""
        return self.keep(result.text, outcome.text, whole=result.stop_reason in ENDED_AT_A_LINE_END)

    def as_block(self, text: str, kept: str) -> tuple[str, str]:
        """The suggestion and its kept lines, with a shown line that opens a block made the
        block (its body from the kept lines); unchanged otherwise."""
        prefix = self.clean.prefix
        if not self.clean.dynamic_block or not kept or "\n" in text:
            return text, kept
        if not opens_block(prefix + text, self.clean.language):
            return text, kept
        body, rest = block_body(kept, len(prefix) - len(prefix.lstrip(" \t")))
        return text + body, rest


def plan(
    query: CompletionQuery,
    doc: DocumentSnapshot,
    pos: Position,
    tree: Tree | None,
    prompt: AssembledPrompt,
    backend: Backend,
    settings: Settings,
    base: CompletionOutcome,
    *,
    started: float,
    cancel: CancelToken,
    on_answer: Callable[[CompletionOutcome], None] | None,
    typethrough: TypeThrough,
) -> Plan:
    """The plan of a generation at ``pos`` with ``prompt`` (no model call yet)."""
    completion = settings.completion
    alternatives = wanted(query, completion)
    # keyed by the text the suggestion was made for, not the buffer as it is now
    entry = typethrough.key(doc, pos)
    threshold = gate_threshold(settings, query.trigger)
    # Where the last whole was nothing (a dropped copy), the next answer waits for the
    # whole: an early start there would be dropped again, and its notice ask again.
    early_ok = (
        on_answer is not None
        and completion.answer_after_ms > 0
        and alternatives == 1
        and not typethrough.found_nothing(entry)
    )
    # A single line at the end of a line answered early goes on past it: serving/kept.py.
    kept = completion.kept_lines if early_ok and threshold == GATE_OFF else 0
    clean = cleaner(doc, pos, tree, settings, kept_lines=kept)
    keep = kept_lines_for(clean, doc, pos)
    line_rule, stop_rule = stop_rules(clean, tree, doc, pos)
    called = time.perf_counter()
    prepared = dataclasses.replace(
        base,
        strategy=prompt.strategy,
        layer_tokens=prompt.layer_tokens(),
        prompt_tokens=prompt.total_tokens,
        context_ms=(called - started) * 1000,
    )
    confidence = FirstLineConfidence()
    early = None
    if early_ok and on_answer is not None:
        early = EarlyAnswer(
            query,
            prepared,
            on_answer=on_answer,
            after_s=completion.answer_after_ms / 1000,
            clean=clean,
            typethrough=typethrough,
            key=entry,
            hold=partial(unsure, confidence, threshold),
            kept=keep,
            line_end=clean.shown_line_end,
        )
    request = generation_request(query, doc, pos, prompt, backend, settings, alternatives)
    request = dataclasses.replace(
        request,
        max_tokens=completion.max_tokens + (completion.kept_tokens if keep else 0),
        stop_rule=stop_rule,
        cancel=cancel,
        on_text=TextSink(confidence, early),
        on_logprob=confidence.logprob,
    )
    return Plan(
        request=request,
        clean=clean,
        line_rule=line_rule,
        max_tokens=completion.max_tokens,
        entry=entry,
        keep=keep,
        early=early,
        confidence=confidence,
        threshold=threshold,
        prepared=dataclasses.replace(prepared, multiline=clean.multiline),
        called=called,
    )


def kept_lines_for(clean: Cleaner, doc: DocumentSnapshot, pos: Position) -> KeptLines | None:
    """The kept lines of a generation post-processed by ``clean`` (None: it keeps none)."""
    if not clean.kept_lines:
        return None
    return KeptLines(clean.block, below=first_code_line(doc.text, doc.offset_at(pos)))


def cleaner(
    doc: DocumentSnapshot,
    pos: Position,
    tree: Tree | None,
    settings: Settings,
    *,
    kept_lines: int,
) -> Cleaner:
    """The post-processing at ``pos``: single- or multi-line (``multiline``, the tree), and
    the kept lines a single line at a line's end may have."""
    completion = settings.completion
    line_text = doc.line(pos.line)
    prefix, suffix = line_text[: pos.column], line_text[pos.column :]
    if completion.multiline == "auto":
        multiline = decide_multiline(tree, doc.text, pos.line, pos.column, doc.language_id)
    else:
        multiline = completion.multiline == "always"
    kept_lines = 0 if multiline or suffix.strip() else kept_lines
    return Cleaner(
        prefix=prefix,
        suffix=suffix,
        following=doc.text[doc.offset_at(pos) :],
        multiline=multiline,
        max_lines=completion.max_lines,
        language=doc.language_id,
        kept_lines=kept_lines,
        dynamic_block=completion.dynamic_multiline and kept_lines > 0,
        # after code, not after a space (``x = ``: the line is not done)
        next_line=completion.next_line_at_end
        and kept_lines > 0
        and prefix.rstrip() == prefix != "",
    )


def stop_rules(
    clean: Cleaner, tree: Tree | None, doc: DocumentSnapshot, pos: Position
) -> tuple[StopRule, StopRule]:
    """The shown suggestion's stop rule, and the generation's: with kept lines, the block
    rule over the shown line and the kept ones (never leaving the function)."""
    prefix = clean.prefix
    indent = len(prefix) - len(prefix.lstrip()) if prefix.strip() else len(prefix)
    line_rule = make_stop_rule(
        multiline=clean.multiline,
        cursor_indent=indent,
        line_prefix=prefix,
        max_lines=clean.max_lines,
    )
    if not clean.kept_lines:
        return line_rule, line_rule
    lowest = kept_indent(tree, doc.line, pos.line, pos.column)
    block_rule = make_stop_rule(
        multiline=True,
        cursor_indent=min(indent, lowest) if lowest is not None else indent,
        line_prefix=prefix,
        max_lines=1 + clean.kept_lines,
    )
    return line_rule, kept_stop_rule(block_rule, shows=clean.shows, line_end=clean.shown_line_end)


def generation_request(
    query: CompletionQuery,
    doc: DocumentSnapshot,
    pos: Position,
    prompt: AssembledPrompt,
    backend: Backend,
    settings: Settings,
    alternatives: int,
) -> GenerationRequest:
    """The backend's request for ``prompt`` (token healing, caps, infill parts)."""
    # token healing: the model writes the typed tail cut from the prompt; a backend that
    # cannot be constrained gets it back as prompt tokens
    prompt_tokens, forced = list(prompt.tokens), prompt.healed
    if forced and not backend.heals_tokens:
        prompt_tokens += backend.tokenize(forced)
        forced = ""
    return GenerationRequest(
        prompt_tokens=prompt_tokens,
        forced_prefix=forced,
        max_tokens=settings.completion.max_tokens,
        stop=stop_strings(doc.language_id),
        cache_key=query.uri,
        stable_prefix_len=prompt.stable_prefix_len,
        task_type=query.task_type,
        prompt_timeout_s=settings.model.prompt_timeout_ms / 1000,
        generation_timeout_s=settings.model.generation_timeout_ms / 1000,
        alternatives=alternatives,
        code_first=not doc.line(pos.line).strip(),
        infill=infill_parts(prompt, doc, pos.line, pos.column)
        if backend.wants_infill_parts
        else None,
    )


def settle(
    plan: Plan, result: GenerationResult, text: str, query: CompletionQuery
) -> CompletionOutcome:
    """The outcome of ``plan``'s generation: ``result`` and its post-processed ``text``.

    A generation time cap keeps what was generated; a cancel (superseded, client cancel)
    or a prompt time cap has nothing worth showing, unless the editor already has the
    suggestion's start (an early answer): that is what it keeps.
    """
    outcome = dataclasses.replace(plan.prepared)
    result.copy_usage(outcome)
    # the request's own view: the prompt the context built (a healed tail a backend got
    # back as tokens is not counted) and times from arrival (latency_ms at the end)
    outcome.prompt_tokens = plan.prepared.prompt_tokens
    outcome.output_tokens = len(result.tokens)
    outcome.ttft_ms = 0.0
    if result.tokens:
        # the backend counts from its own start; the user's clock started at arrival
        outcome.ttft_ms = (plan.called - query.received_at) * 1000 + result.ttft_ms
    partial_ok = result.stop_reason == "timeout" and bool(result.tokens)
    early = plan.early
    if early is not None and early.answered_at is not None:
        outcome.answered_early = True
        outcome.latency_ms = (early.answered_at - query.received_at) * 1000
        if result.cancelled and not partial_ok:
            text, partial_ok = early.shown, True
    outcome.cancelled = result.cancelled and not partial_ok
    outcome.text = "" if outcome.cancelled else text
    outcome.confidence = plan.confidence.mean()
    if outcome.text and unsure(plan.confidence, plan.threshold):
        # the gate: likely wrong, kept off the screen (an early start shown is replaced by
        # nothing when the client asks again)
        outcome.text, outcome.skipped = "", "unsure"
    if result.alternatives and not outcome.cancelled:
        branches = [
            plan.clean(branch.text, branch.stop_reason)
            for branch in result.alternatives
            if branch.complete
        ]
        outcome.text, outcome.alternatives = distinct(text, branches)
    return outcome


def first_code_line(text: str, offset: int) -> str:
    """The first line with code after the line of ``offset``, stripped ('' none)."""
    start = text.find("\n", offset)
    while start >= 0:
        end = text.find("\n", start + 1)
        line = text[start + 1 : end] if end >= 0 else text[start + 1 :]
        if line.strip():
            return line.strip()
        start = end
    return ""
