"""Alternatives in serving: how many are asked for, their order, post-processing, dedup.

A scripted fake backend returns a greedy text and branches; the engine must ask for
``alternatives`` only on an explicit request that wants them, post-process every branch
like the first, drop empty and repeated ones, and keep the greedy one first (and in the
type-through cache). The real model runs the same path over stdio in
tests/e2e/test_alternatives.py.
"""

from __future__ import annotations

from pathlib import Path

from lsp_assist.backends.base import Alternative, GenerationRequest, GenerationResult
from lsp_assist.config import parse_settings
from lsp_assist.serving.alternatives import distinct
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.scheduler import Scheduler
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, CharBackend, make_engine, snapshot


class BranchBackend(CharBackend):
    """Answers ``greedy`` and, when more than one item is asked for, ``branches``."""

    def __init__(self, greedy: str, branches: list[Alternative]) -> None:
        self.greedy = greedy
        self.branches = branches
        self.requests: list[GenerationRequest] = []

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """The scripted answer, with at most ``request.alternatives - 1`` branches."""
        self.requests.append(request)
        tokens = self.tokenize(self.greedy)
        result = GenerationResult(text=self.greedy, tokens=tokens, stop_reason="eos")
        result.alternatives = self.branches[: max(0, request.alternatives - 1)]
        result.ttft_ms = 1.0
        return result


def query(
    engine: CompletionEngine, uri: str, trigger: str = "invoked", *, want: bool = True
) -> CompletionQuery:
    return CompletionQuery(
        snapshot=snapshot(engine, uri),
        line=CURSOR_LINE,
        column=CURSOR_COLUMN,
        trigger=trigger,
        want_alternatives=want,
    )


def branch(text: str, stop_reason: str = "eos") -> Alternative:
    return Alternative(text=text, tokens=tuple(ord(c) for c in text), stop_reason=stop_reason)


def engine_with(
    tmp_path: Path, backend: BranchBackend, **settings: object
) -> tuple[CompletionEngine, str]:
    return make_engine(tmp_path, backend, **settings)


def test_invoked_request_gets_the_greedy_item_then_distinct_alternatives(tmp_path: Path) -> None:
    # The cursor follows "value = ": the leading blank is stripped from every branch, a
    # branch equal to the greedy one after post-processing ("  1\n" -> "1") is dropped,
    # as is an empty one; a multi-line branch is cut to one line here (single-line mode).
    backend = BranchBackend("1", [branch("  1\n"), branch(" f()"), branch(""), branch("2\n2")])
    engine, uri = engine_with(tmp_path, backend, alternatives=5)
    outcome = engine.complete(query(engine, uri))
    assert backend.requests[-1].alternatives == 5
    assert outcome.text == "1"
    assert outcome.alternatives == ("f()", "2")
    assert outcome.items == ("1", "f()", "2")
    # the type-through cache keeps the first item only
    before = "value = "
    prefix = engine.session.buffers.get(uri).text.split(before)[0] + before  # type: ignore[union-attr]
    assert engine.typethrough.cache.get(uri, prefix, "\n") == "1"


def test_a_repeated_alternative_is_dropped(tmp_path: Path) -> None:
    backend = BranchBackend("1", [branch(" f()"), branch("f() "), branch("2")])
    engine, uri = engine_with(tmp_path, backend, alternatives=4)
    assert engine.complete(query(engine, uri)).items == ("1", "f()", "2")


def test_default_is_three_items(tmp_path: Path) -> None:
    backend = BranchBackend("1", [branch("2"), branch("3"), branch("4")])
    engine, uri = engine_with(tmp_path, backend)
    outcome = engine.complete(query(engine, uri))
    assert backend.requests[-1].alternatives == 3
    assert outcome.items == ("1", "2", "3")


def test_automatic_and_unasked_requests_get_one_item(tmp_path: Path) -> None:
    backend = BranchBackend("1", [branch("2"), branch("3")])
    engine, uri = engine_with(tmp_path, backend)
    for q in (
        query(engine, uri, "automatic"),
        query(engine, uri, "invoked", want=False),
        query(engine, uri, "cli", want=False),
    ):
        outcome = engine.complete(q)
        assert backend.requests[-1].alternatives == 1, q.trigger
        assert outcome.items == ("1",), q.trigger
    # even a query that says it wants them, when it is an automatic trigger
    engine.complete(query(engine, uri, "automatic", want=True))
    assert backend.requests[-1].alternatives == 1


def test_setting_one_turns_alternatives_off(tmp_path: Path) -> None:
    backend = BranchBackend("1", [branch("2")])
    engine, uri = engine_with(tmp_path, backend, alternatives=1)
    assert engine.complete(query(engine, uri)).items == ("1",)
    assert backend.requests[-1].alternatives == 1


def test_cut_short_branches_are_not_shown(tmp_path: Path) -> None:
    backend = BranchBackend("1", [branch("2", "timeout"), branch("3", "cancelled"), branch("4")])
    engine, uri = engine_with(tmp_path, backend, alternatives=4)
    assert engine.complete(query(engine, uri)).items == ("1", "4")


def test_empty_greedy_item_gives_its_place_to_the_next(tmp_path: Path) -> None:
    backend = BranchBackend("", [branch(""), branch("2"), branch("3")])
    engine, uri = engine_with(tmp_path, backend, alternatives=4)
    outcome = engine.complete(query(engine, uri))
    assert outcome.text == "2" and outcome.alternatives == ("3",)


def test_distinct_keeps_order() -> None:
    assert distinct("a", ["b", "", "a", "c", "b"]) == ("a", ("b", "c"))
    assert distinct("", ["", ""]) == ("", ())


async def test_scheduler_sends_an_ask_for_alternatives_to_the_model(tmp_path: Path) -> None:
    # After an automatic suggestion the type-through cache holds it for this place; an
    # explicit ask there must still reach the model, or it would get one item.
    backend = BranchBackend("1", [branch("2")])
    engine, uri = engine_with(tmp_path, backend)
    scheduler = Scheduler(engine)
    try:
        first = await scheduler.complete(query(engine, uri, "automatic"))
        assert first.items == ("1",) and not first.cache_hit
        again = await scheduler.complete(query(engine, uri, "automatic"))
        assert again.cache_hit and len(backend.requests) == 1
        cycled = await scheduler.complete(query(engine, uri, "invoked"))
        assert not cycled.cache_hit and len(backend.requests) == 2
        assert cycled.items == ("1", "2")
    finally:
        scheduler.shutdown()


def test_alternatives_setting_is_bounded() -> None:
    settings, warnings = parse_settings({"alternatives": 9})
    assert settings.completion.alternatives == 5 and "alternatives" in warnings[0]
    settings, warnings = parse_settings({"alternatives": 0})
    assert settings.completion.alternatives == 3 and "alternatives" in warnings[0]


ABOVE = "def total(values):\n    result = 0\n    \n    return result\n"
"""A blank line (line 2) above ``return result``."""


def test_a_blank_line_whose_greedy_line_is_the_line_below_gets_the_next_best(
    tmp_path: Path,
) -> None:
    # The model writes the line below again (dropped by post-processing): the automatic
    # request is answered with the branch of the next likeliest first token instead of
    # nothing (issue 24 item 3).
    backend = BranchBackend("return result", [branch("print(result)")])
    engine, _ = engine_with(tmp_path, backend)
    uri = (tmp_path / "above.py").as_uri()
    engine.session.buffers.open(uri, ABOVE, version=1)
    blank = CompletionQuery(snapshot=snapshot(engine, uri), line=2, column=4, trigger="automatic")
    outcome = engine.complete(blank)
    assert [r.alternatives for r in backend.requests] == [1, 2]
    assert outcome.text == "print(result)" and outcome.alternatives == ()
    # the type-through cache answers with it there, not with the dropped copy
    assert engine.cached(blank) is not None and engine.cached(blank).text == "print(result)"  # type: ignore[union-attr]


def test_a_line_that_is_not_blank_gets_no_second_generation(tmp_path: Path) -> None:
    backend = BranchBackend("urn result", [branch("print(result)")])
    engine, _ = engine_with(tmp_path, backend)
    uri = (tmp_path / "above.py").as_uri()
    engine.session.buffers.open(uri, ABOVE.replace("    \n", "    ret\n"), version=1)
    typed = CompletionQuery(snapshot=snapshot(engine, uri), line=2, column=7, trigger="automatic")
    outcome = engine.complete(typed)
    # "urn result" after "ret" is a copy of the line below too: dropped, no retry here
    assert outcome.text == "" and [r.alternatives for r in backend.requests] == [1]


class HealingBranchBackend(BranchBackend):
    """A BranchBackend that heals tokens: its branches start after a healed line break
    only when the line break is in the prompt (``forced_prefix`` "")."""

    heals_tokens = True

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """The scripted answer; no branch while the forced text is a line break."""
        result = super().generate(request)
        if request.forced_prefix:
            result.alternatives = []
        return result


def test_at_column_0_the_next_best_branches_after_the_healed_line_break() -> None:
    # the prompt healed by the empty line's line break: as the forced text every branch
    # would start with it, so the second generation has it as prompt tokens instead
    backend = HealingBranchBackend("print(result)", [branch("total = 0")])
    request = GenerationRequest(prompt_tokens=[1, 2, 3], forced_prefix="\n", code_first=True)
    text = CompletionEngine._next_best(backend, request, "print(result)", lambda raw, _why: raw)
    (again,) = backend.requests
    assert again.forced_prefix == "" and again.alternatives == 2
    assert again.prompt_tokens == [1, 2, 3, *backend.tokenize("\n")]
    assert text == "total = 0"
    # an indented blank line keeps its healed space: the branches agree with it
    spaced = HealingBranchBackend("print(result)", [branch("total = 0")])
    indented = GenerationRequest(prompt_tokens=[1, 2, 3], forced_prefix=" ", code_first=True)
    assert CompletionEngine._next_best(spaced, indented, "x", lambda raw, _why: raw) == ""
    assert spaced.requests[0].forced_prefix == " "
