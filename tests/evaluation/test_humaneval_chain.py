"""HumanEval chained (``bench --humaneval --chain``): the user who takes each suggestion whole.

The chain runs against a scripted suggester (no model): each suggestion is accepted whole
at the cursor and the next ask is at its end, a line break alone is taken as an Enter,
the chain ends at the part's line count (the answer then cut as plain FIM truncated as
published), at an empty suggestion, at an accept that changed the text around the part,
or at the ask cap; a wrong line is taken too (the expected text is never read to choose).
The real server's side is checked on a fake LSP client: an early answer is asked again
once the server recorded its whole, a cache hit is one ask, an accept is one didChange and
the item's accept command. The arm's place in the run, the report and the command line
is checked with the server side replaced; marked slow, SmolLM2 chains one task of each
set through the real server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_assist.evaluation.infill import harness, humaneval_run
from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill import humaneval_chain as hc
from lsp_assist.evaluation.infill import humaneval_sets as hs
from lsp_assist.evaluation.infill.humaneval_run import HumanEvalConfig, run_humaneval
from tests.support.humaneval import ADD, needs_data
from tests.support.tiny_gguf import char_words, write_tiny_gguf

WHOLE = next(t for t in hs.multi_line_tasks(ADD) if t.name == "L0_L4")
"""``total = a`` to ``return total``: five lines, the blank one included."""


class Scripted:
    """A suggester that shows the given texts in turn ('' once they run out) and records
    each ask (the buffer's text before the cursor's line end, line, character) and accept."""

    def __init__(self, texts: Sequence[str | tuple[str, list[int]]]) -> None:
        self.texts = list(texts)
        self.asked: list[tuple[str, int, int]] = []
        self.applied: list[tuple[hc.Edit, str]] = []

    async def ask(self, text: str, line: int, character: int) -> hc.Shown:
        """Show the next text (with its range when given as a pair)."""
        self.asked.append((text, line, character))
        if not self.texts:
            return hc.Shown("")
        item = self.texts.pop(0)
        shown, edit_range = item if isinstance(item, tuple) else (item, None)
        return hc.Shown(shown, edit_range, item=f"r{len(self.asked)}", memory=len(self.asked) > 1)

    async def apply(self, edit: hc.Edit, item: str = "") -> None:
        """Record the edit and the item accepted ('' an Enter)."""
        self.applied.append((edit, item))


def _chain(task: hs.SpanTask, scripted: Scripted, **kwargs: Any) -> hc.ChainResult:
    return asyncio.run(hc.chain(task, scripted, **kwargs))


def test_each_suggestion_is_taken_whole_and_the_next_asked_at_its_end() -> None:
    scripted = Scripted(
        [
            "total = a",
            "\n",  # the blank line: a line break alone is an Enter, taken
            "\n    if b:",  # a kept line: the line break and the next line
            "\n        total = total + b\n    return total\n    print(total)",  # one too many
            "never asked",
        ]
    )
    result = _chain(WHOLE, scripted)
    assert result.stop == "lines" and len(result.steps) == 4
    # asked at the cursor, then at the end of each accepted text
    assert [(line, col) for _, line, col in scripted.asked] == [(2, 4), (2, 13), (3, 0), (4, 9)]
    assert scripted.asked[1][0] == WHOLE.prefix() + "total = a" + WHOLE.suffix()
    assert [(e.start, e.end, item) for e, item in scripted.applied] == [
        ((2, 4), (2, 4), "r1"),
        ((2, 13), (2, 13), "r2"),
        ((3, 0), (3, 0), "r3"),
        ((4, 9), (4, 9), "r4"),
    ]
    assert result.accepted == WHOLE.expected + "\n    print(total)"
    answer = hc.answer_of(WHOLE, result)
    # cut to the part's five lines, as the plain answer truncated as published
    assert answer["suggestion"] == WHOLE.expected == hs.truncate_plain(WHOLE, result.accepted)
    assert answer["range"] is None and answer["stop"] == "lines"
    assert answer["requests"] == 4 and answer["from_memory"] == 3
    assert answer["right_lines"] == answer["lines"] == 5
    scores = hs.score(WHOLE, answer["suggestion"], answer["range"])
    assert scores["passed"] and scores["exact_match"]


def test_a_wrong_line_is_taken_too_and_submitted() -> None:
    # no peeking: the user takes what is shown, right or not, up to the line count
    task = next(t for t in hs.multi_line_tasks(ADD) if t.name == "L3_L4")
    result = _chain(task, Scripted(["total = total - b", "\n    return total"]))
    answer = hc.answer_of(task, result)
    assert answer["suggestion"] == "total = total - b\n    return total"
    assert answer["stop"] == "lines" and answer["right_lines"] == 0 and answer["lines"] == 2
    assert not hs.score(task, answer["suggestion"])["passed"]


def test_nothing_at_a_lines_end_is_an_enter_and_an_ask_on_the_new_line() -> None:
    task = next(t for t in hs.multi_line_tasks(ADD) if t.name == "L2_L3")  # if b: / total
    scripted = Scripted(["if b:", "", "total = total + b"])
    result = _chain(task, scripted)
    assert result.stop == "lines" and result.enters == 1
    # the Enter: one edit with the line break and the auto-indent, no accept command
    enter, item = scripted.applied[1]
    assert enter.text == "\n        " and item == "" and enter.start == (4, 9)
    assert [s.after_enter for s in result.steps] == [False, False, True]
    assert scripted.asked[2][1:] == (5, 8)  # asked on the new line, after its indentation
    answer = hc.answer_of(task, result)
    assert answer["suggestion"] == task.expected and answer["enters"] == 1
    assert hs.score(task, answer["suggestion"])["passed"]


def test_the_chain_ends_where_nothing_is_shown() -> None:
    for nothing in ("", "   "):
        scripted = Scripted(["total = a", nothing, nothing])
        result = _chain(WHOLE, scripted)
        answer = hc.answer_of(WHOLE, result)
        # nothing at the line's end, Enter, nothing on the new line either: one Enter only
        assert answer["stop"] == "empty" and len(answer["steps"]) == 3
        assert answer["enters"] == 1 and len(scripted.applied) == 2
        # the unanswered Enter is not part of the answer
        assert answer["suggestion"] == "total = a" and answer["right_lines"] == 1
        assert not hs.score(WHOLE, answer["suggestion"])["passed"]
    # nothing at the first ask (a blank line: no Enter): an empty answer, as a skip
    first = hc.answer_of(WHOLE, _chain(WHOLE, Scripted([])))
    assert first["suggestion"] == "" and first["stop"] == "empty" and first["requests"] == 1
    assert first["enters"] == 0


def test_enter_types_the_line_break_and_the_editors_indent() -> None:
    def enter(text: str, cursor: int | None = None) -> str | None:
        return hc.Buffer(text, len(text) if cursor is None else cursor).enter()

    assert enter("def f():\n    x = 1") == "\n    "
    assert enter("def f():\n    if x:") == "\n        "  # a block opens
    assert enter("def f():\n    if x:\n        return 1  ") == "\n    "  # one level back
    assert enter("def f():\n    x = 1\n") is None  # a blank line
    assert enter("    x = f(a)", 10) is None  # text right of the cursor
    assert enter("    x = 1\n    y = 2", 9) == "\n    "  # the end of a line above others


def test_the_ask_cap_ends_a_chain_that_never_reaches_the_line_count() -> None:
    scripted = Scripted(["x"] * 10)
    result = _chain(WHOLE, scripted, max_requests=3)
    assert result.stop == "requests" and len(scripted.asked) == 3
    assert result.accepted == "xxx"
    # by default the cap grows with the part: 4 asks a line of its 5, and 4 more
    scripted = Scripted(["x"] * 100)
    assert _chain(WHOLE, scripted).stop == "requests" and len(scripted.asked) == 24
    assert hc.ask_cap(1) == 8


def test_an_accept_that_changes_the_text_around_the_part_ends_the_chain() -> None:
    # an item over a range that reaches into the line below: the suffix is not intact
    result = _chain(WHOLE, Scripted([("total = a", [2, 4, 3, 0])]))
    assert result.stop == "context changed" and result.accepted is None
    answer = hc.answer_of(WHOLE, result)
    scored = hs.score(WHOLE, answer["suggestion"], answer["range"])
    assert scored["context_changed"] and not scored["exact_match"]
    # the program scored is the buffer as the user left it
    assert hs.apply_answer(WHOLE, answer["suggestion"], answer["range"])[0] == result.program


def test_a_line_is_counted_as_the_published_truncation_counts_it() -> None:
    assert hc.line_count("") == hc.line_count("\n  \n") == 0
    assert hc.line_count("\nx\n") == 1 and hc.line_count("x\n\ny") == 3
    assert hc.right_lines("a\n  b\nc", "a\nb\nd") == 2


# -- the real server's side, on a fake LSP client ----------------------------------------------


class FakeClient:
    """An LSP client whose server shows the scripted items and status entries in turn."""

    def __init__(self, items: list[tuple[str, str]], statuses: list[dict[str, Any]]) -> None:
        self.items = items
        self.statuses = statuses
        self.requests: list[tuple[int, int]] = []
        self.triggers: list[types.InlineCompletionTriggerKind] = []
        self.changes: list[types.DidChangeTextDocumentParams] = []
        self.commands: list[tuple[str, list[Any]]] = []

    async def text_document_inline_completion_async(
        self, params: types.InlineCompletionParams
    ) -> types.InlineCompletionList:
        """Answer with the next scripted item (text, its accept command's id)."""
        self.requests.append((params.position.line, params.position.character))
        self.triggers.append(params.context.trigger_kind)
        text, item = self.items.pop(0)
        here = types.Range(start=params.position, end=params.position)
        accept = types.Command(title="Accept", command="lspAssist.accept", arguments=[item])
        return types.InlineCompletionList(
            items=[types.InlineCompletionItem(insert_text=text, range=here, command=accept)]
        )

    async def workspace_execute_command_async(self, params: types.ExecuteCommandParams) -> Any:
        """The status: the next scripted last outcome (the last one stays)."""
        self.commands.append((params.command, list(params.arguments or [])))
        if params.command != "lspAssist.status":
            return {"accepted": True}
        last = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return {"last": last}

    def text_document_did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        """Record the edit."""
        self.changes.append(params)


def test_an_early_answer_is_asked_again_once_its_whole_is_written(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hc, "POLL_S", 0.0)
    client = FakeClient(
        items=[("tot", "r1"), ("total = a", "r2")],
        statuses=[
            {"request_id": "r0"},  # right after the answer: the generation is still writing
            {"request_id": "r0"},
            {"request_id": "r1", "text": "total = a", "latency_ms": 101.0},  # written
            {"request_id": "r2", "text": "total = a", "cache_hit": True, "latency_ms": 2.0},
        ],
    )
    suggester = hc.ServerSuggester(client, "file:///he_900.py")
    shown = asyncio.run(suggester.ask("", 2, 4))
    assert shown.text == "total = a" and shown.requests == 2 and shown.item == "r2"
    assert client.requests == [(2, 4), (2, 4)]  # the second from the cache, at the same place
    assert shown.latency_ms == 101.0 and not shown.memory  # the first answer's, from the model
    edit = hc.Edit((2, 4), (2, 4), shown.text)
    asyncio.run(suggester.apply(edit, shown.item))
    (change,) = client.changes
    assert change.text_document.version == 2
    assert change.content_changes[0].text == "total = a"  # type: ignore[union-attr]
    assert client.commands[-1] == ("lspAssist.accept", ["r2"])


def test_the_first_ask_is_the_trigger_asked_for_and_the_next_automatic() -> None:
    # the user asked (Alt+\\) once; after the accept the editor asks on its own
    whole = {"request_id": "r1", "text": "if b:", "latency_ms": 5.0}
    client = FakeClient(
        items=[("if b:", "r1"), ("\n        total = total + b", "r2")],
        statuses=[whole, whole, {"request_id": "r2", "text": "\n        total = total + b"}],
    )
    suggester = hc.ServerSuggester(client, "file:///he_900.py", trigger="invoked")
    task = next(t for t in hs.multi_line_tasks(ADD) if t.name == "L2_L3")
    result = asyncio.run(hc.chain(task, suggester))
    assert result.stop == "lines" and result.accepted == task.expected
    kind = types.InlineCompletionTriggerKind
    assert client.triggers == [kind.Invoked, kind.Automatic]
    assert [c for c in client.commands if c[0] == "lspAssist.accept"] == [
        ("lspAssist.accept", ["r1"]),
        ("lspAssist.accept", ["r2"]),
    ]


def test_an_answer_already_whole_is_one_ask() -> None:
    client = FakeClient(
        items=[("\n    if b:", "r5")],
        statuses=[{"request_id": "r5", "text": "\n    if b:", "cache_hit": True, "latency_ms": 1}],
    )
    shown = asyncio.run(hc.ServerSuggester(client, "file:///he_900.py").ask("", 3, 0))
    assert shown.requests == 1 and shown.memory and shown.text == "\n    if b:"
    assert client.requests == [(3, 0)]


# -- the arm in the run, the report and the command line -----------------------------------


def test_the_chained_arm_in_the_run_and_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given: list[dict[str, Any]] = []

    def chain_all(
        tasks: Any, problems: Any, model: Path, settings: Any, on_answer: Any, trigger: str
    ) -> dict[str, Any]:
        given.append(settings)
        for task in tasks:
            lines = task.expected.split("\n")
            script = [lines[0], *("\n" + line for line in lines[1:])]
            on_answer(task, hc.answer_of(task, asyncio.run(hc.chain(task, Scripted(script)))))
        return {"wall_s": 0.0}

    monkeypatch.setattr(hc, "run_chain", chain_all)
    monkeypatch.setattr(he, "load_problems", lambda path=None: [ADD])  # no package data
    model = write_tiny_gguf(tmp_path / "tiny.gguf", words=char_words(), context_length=4096)
    config = HumanEvalConfig(model=model, tasks=2, task_set="multi", arms=(he.CHAIN,))
    result = run_humaneval(config, "test")
    assert given == [{}]
    (arm,) = result["arms"]
    assert arm["name"] == "chain" and arm["label"] == "lsp-assist serve, chained"
    assert arm["summary"]["pass_at_1"] == 1.0 and arm["summary"]["exact_match"] == 1.0
    assert arm["chain"]["tasks"] == 2 and arm["chain"]["stops"] == {"lines": 2}
    assert arm["chain"]["right_lines"] == arm["chain"]["lines"]
    # the server's own early answers and kept lines, not the server arm's answerAfterMs 0
    assert "answerAfterMs 100, keptLines 4" in result["meta"]["chain_settings"]
    assert hc.CHAIN_SETTINGS["answerAfterMs"] > 0 and hc.CHAIN_SETTINGS["keptLines"] > 0
    options = harness.server_options(model, tmp_path, hc.CHAIN_SETTINGS)
    assert options["answerAfterMs"] == hc.CHAIN_SETTINGS["answerAfterMs"]
    assert "promptTimeoutMs 600,000" in result["meta"]["chain_settings"]
    report = he.report_markdown(result)
    assert "| lsp-assist serve, chained | multi-line |" in report
    assert "**lsp-assist serve, chained**" in report and "chains ended by: lines 2" in report
    with pytest.raises(ValueError, match="chained"):
        run_humaneval(HumanEvalConfig(model=model, arms=(he.CHAIN,)), "test")


def test_cli_chain_adds_the_arm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from lsp_assist.cli.main import main

    seen: list[HumanEvalConfig] = []

    def stop(config: HumanEvalConfig, command: str) -> dict[str, Any]:
        seen.append(config)
        raise RuntimeError("stopped before the model")

    monkeypatch.setattr(humaneval_run, "run_humaneval", stop)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    argv = ["bench", "--humaneval", "--model", str(model), "--chain"]
    assert main([*argv, "--set", "multi", "--arms", "plain"]) == 1
    assert main([*argv, "--set", "span"]) == 1
    assert [c.arms for c in seen] == [("plain", "chain"), ("plain", "server", "chain")]
    assert main(argv) == 2  # the single-line set has no chain
    assert "--chain" in capsys.readouterr().err


# -- end to end -----------------------------------------------------------------------------


@pytest.mark.slow
@needs_data
@pytest.mark.parametrize("kind", hs.SETS)
def test_the_chained_arm_end_to_end_with_smollm2(tmp_path: Path, kind: str) -> None:
    from lsp_assist.backends import small_model_path

    config = HumanEvalConfig(
        model=Path(small_model_path()),
        tasks=1,
        seed=14,
        task_set=kind,
        arms=("plain", he.CHAIN),
        settings={"threads": "1"},
        problems=2,
        trigger="invoked" if kind == "span" else "automatic",
    )
    result = run_humaneval(config, "test")
    assert [a["name"] for a in result["arms"]] == ["plain", "plain_trunc", "chain"]
    tasks = {t.id: t for t in hs.all_tasks(he.load_problems()[:2], kind)}
    (record,) = result["records"]
    task = tasks[record["task"]]
    answer = record["arms"]["chain"]
    assert answer["steps"] and answer["stop"] in hc.STOPS
    assert answer["requests"] >= len(answer["steps"])
    if answer["accepted"] is not None:  # what was accepted, cut as published
        assert answer["suggestion"] == (
            hs.truncate_plain(task, answer["accepted"]) if answer["accepted"] else ""
        )
    again = hs.score(task, answer["suggestion"], answer["range"])
    assert answer["passed"] == again["passed"]
