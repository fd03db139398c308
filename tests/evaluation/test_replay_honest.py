"""The replay's honest user and client: reaction time, the plugin's debounce, the oracle row,
line-start and cross-file figures, model time, the plain row's budget.

No model, no server: the screen and the user are pure, the client runs against a fake
JSON-RPC connection, the oracle needs none. No verdict depends on the machine's speed:
times are given, or a timer is fired by hand, or one timer is known to run before a
longer one.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from lsprotocol import types

from lsp_assist.evaluation.replay import run as replay
from lsp_assist.evaluation.replay.client import ServerSuggester, key_plan
from lsp_assist.evaluation.replay.oracle import OracleSuggester, oracle_text
from lsp_assist.evaluation.replay.report import line_starts, markdown, summarize
from lsp_assist.evaluation.replay.run import replay_region
from lsp_assist.evaluation.replay.tasks import (
    Region,
    key_sequence,
    keys_per_line,
    make_region,
    mark_cross_lines,
    rest_of_line,
)
from lsp_assist.evaluation.replay.user import Screen, decide, ready, takeable
from lsp_assist.evaluation.suggester import Answer, KeyAware
from tests.support.replay_fakes import TEXT, FakeSuggester, SilentSuggester, replay_workspace

# -- the reaction time ------------------------------------------------------------------


def test_a_suggestion_is_ready_only_after_the_reaction_time() -> None:
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="return x", arrived=1.0))
    shown = screen.at(1, 1.1)
    assert shown is not None and shown.since == 1.0
    assert not ready(shown, 1.1, 0.15)
    assert ready(shown, 1.25, 0.15) and ready(shown, 1.0, 0.0)
    assert not ready(None, 5.0, 0.0)


def test_typing_through_and_the_same_text_again_keep_the_first_appearance() -> None:
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="return x + y", arrived=1.0))
    assert screen.at(1, 1.1) is not None
    screen.after_key("r", 2, "type")
    screen.key_times[2] = 1.2
    screen.add(Answer(version=2, text="eturn x + y", arrived=1.25))  # the same, answered again
    carried = screen.at(2, 1.3)
    assert carried is not None and carried.since == 1.0 and ready(carried, 1.3, 0.15)
    screen.after_key("eturn", 3, "word")
    rest = screen.at(3, 1.4)
    assert rest is not None and rest.text == " x + y" and rest.since == 1.0
    screen.after_key(" ", 4, "type")
    screen.add(Answer(version=4, text="z", arrived=1.5))  # another suggestion: its own time
    other = screen.at(4, 1.55)
    assert other is not None and other.text == "z" and other.since == 1.5
    assert not ready(other, 1.55, 0.15)


def test_a_suggestion_that_grows_keeps_the_time_of_the_part_already_on_screen() -> None:
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="return self", arrived=1.0))  # an early answer's start
    assert screen.at(1, 1.05) is not None
    screen.add(Answer(version=1, text="return self.items", arrived=1.1))  # its line, whole
    grown = screen.at(1, 1.2)
    assert grown is not None and grown.text == "return self.items" and grown.since == 1.0
    # at 1.2 the user has read the start for 200 ms and the whole for 100 ms only
    assert takeable(grown, 1.2, 0.15) == "return self" and ready(grown, 1.2, 0.15)
    assert takeable(grown, 1.26, 0.15) == "return self.items"
    assert takeable(grown, 1.1, 0.15) is None
    # one distinct suggestion, its text the whole
    assert [d.text for d in screen.distinct] == ["return self.items"]
    # typed through, each part keeps its time
    screen.after_key("return ", 2, "word")
    carried = screen.at(2, 1.22)
    assert carried is not None and takeable(carried, 1.22, 0.15) == "self"
    # a text that does not start with what is on screen is another suggestion
    screen.add(Answer(version=2, text="other", arrived=1.3))
    other = screen.at(2, 1.35)
    assert other is not None and other.since == 1.3 and len(screen.distinct) == 2


def test_the_part_read_of_a_grown_suggestion_is_taken_word_by_word_not_with_tab() -> None:
    target = "return self.items\n"
    assert decide(target, 0, "return self.items").kind == "tab"
    part = decide(target, 0, "return self", tab=False)
    assert part.kind == "word" and part.text == "return" and part.plan == (" self",)
    # too short a part to save a key by words: typed
    assert decide(target, 0, "ret", tab=False).kind == "type"


def _replay(fake: Any, region: Region, react_s: float) -> tuple[list[dict[str, Any]], Any]:
    keys, shown = asyncio.run(
        replay_region(
            fake,
            Path("/x/f.py"),
            TEXT,
            region,
            pace="steady",
            pace_ms=5,
            rest_s=0,
            react_s=react_s,
        )
    )
    return keys, summarize(keys, shown, [region])


def test_a_user_who_needs_time_types_over_what_just_arrived() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    # an hour of reaction: nothing is ever ready, whatever the machine's speed
    keys, s = _replay(FakeSuggester(region, TEXT, "right"), region, 3600.0)
    assert [k["kind"] for k in keys] == ["type"] * len(key_sequence(region.target))
    assert keys[1]["shown"] is not None and not keys[1]["ready"] and keys[1]["too_new"]
    assert keys[1]["age_ms"] is not None and keys[1]["age_ms"] >= 0
    # too new at every key but the first (nothing shown) and the last (one key types it)
    assert s["keystrokes_saved"] == 0.0 and s["too_new"] == len(keys) - 2
    # the same suggestion typed through stays one distinct suggestion
    assert s["distinct_shown"] == 1 and s["typed_through"] == 1
    # no reaction time: taken at the next key
    keys, s = _replay(FakeSuggester(region, TEXT, "right"), region, 0.0)
    assert [k["kind"] for k in keys] == ["type", "tab"] and keys[1]["ready"]
    assert s["too_new"] == 0


# -- the Neovim plugin's timing ---------------------------------------------------------


def test_the_plugin_asks_after_the_debounce_except_after_a_word_that_leaves_the_rest() -> None:
    assert key_plan("type", False, 75) == "debounce"
    assert key_plan("type", True, 75) == "debounce"  # typed through: asks once more
    assert key_plan("tab", False, 75) == "debounce"
    assert key_plan("word", False, 75) == "debounce"  # the word took the rest
    assert key_plan("word", True, 75) == "none"
    assert key_plan("word", True, 0) == "now"  # no debounce: the earlier client
    assert key_plan("type", False, 0) == "now"


class FakeProtocol:
    def __init__(self) -> None:
        self.notes: list[tuple[str, Any]] = []
        self.futures: dict[str, asyncio.Future[Any]] = {}
        self.sent: list[str] = []

    def notify(self, method: str, params: Any) -> None:
        self.notes.append((method, params))

    def send_request_async(self, method: str, params: Any, msg_id: str) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.futures[msg_id] = future
        self.sent.append(msg_id)
        return future

    def cancelled(self) -> list[str]:
        return [str(p.id) for m, p in self.notes if m == types.CANCEL_REQUEST]


class FakeClient:
    def __init__(self) -> None:
        self.protocol = FakeProtocol()
        self.changes: list[int] = []
        self.stopped = False

    def text_document_did_open(self, params: Any) -> None:
        return None

    def text_document_did_change(self, params: Any) -> None:
        self.changes.append(params.text_document.version)

    async def workspace_execute_command_async(self, params: Any) -> dict[str, Any]:
        return {"budget": {"tokens": 900, "mode": "adaptive"}}

    async def shutdown_async(self, params: Any) -> None:
        return None

    def exit(self, params: Any) -> None:
        return None

    async def stop(self) -> None:
        self.stopped = True


PATH = Path("/w/f.py")


async def _client(debounce_ms: float) -> tuple[ServerSuggester, FakeClient]:
    suggester = ServerSuggester("default", {}, debounce_ms=debounce_ms)
    client = FakeClient()
    suggester.client = client
    await suggester.open(PATH, "x = \n", 1)
    return suggester, client


def _answer(text: str) -> types.InlineCompletionList:
    return types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text=text)])


def test_the_change_goes_at_once_and_the_request_after_the_debounce() -> None:
    async def scenario() -> None:
        answers: list[Answer] = []
        s, client = await _client(10_000)  # never fires by itself here
        s.key(PATH, "x = 1\n", 0, 5, 2, answers.append)
        assert client.changes == [2] and client.protocol.sent == []
        s.key(PATH, "x = 12\n", 0, 6, 3, answers.append)  # restarts the timer
        assert client.changes == [2, 3] and client.protocol.sent == []
        assert s.stats["debounced"] == 1
        s._fire()
        assert client.protocol.sent == ["replay-1"]
        s.key(PATH, "x = 123\n", 0, 7, 4, answers.append)
        assert client.protocol.cancelled() == []  # the plugin cancels when it asks again
        s._fire()
        assert client.protocol.cancelled() == ["replay-1"]
        assert client.protocol.sent == ["replay-1", "replay-2"]
        # an answer for an older version never shows
        client.protocol.futures["replay-1"].set_result(_answer("4"))
        s.key_kind("word", True)  # a word accepted, the rest on screen: nothing asked
        s.key(PATH, "x = 1234\n", 0, 8, 5, answers.append)
        assert s._timer is None and s.stats["not_asked"] == 1
        client.protocol.futures["replay-2"].set_result(_answer("4"))
        await asyncio.wait(list(s._tasks))
        assert answers == []
        s.key(PATH, "x = 12345\n", 0, 9, 6, answers.append)
        s._fire()
        client.protocol.futures["replay-3"].set_result(_answer("6"))
        await asyncio.wait(list(s._tasks))
        assert [(a.version, a.text) for a in answers] == [(6, "6")]
        await s.stop()
        assert client.stopped and s.budget["end"] == {"tokens": 900, "mode": "adaptive"}

    asyncio.run(scenario())


def test_the_debounce_timer_fires_on_its_own() -> None:
    async def scenario() -> None:
        s, client = await _client(1)
        s.key(PATH, "x = 1\n", 0, 5, 2, lambda a: None)
        await asyncio.sleep(0.05)  # a later deadline than the 1 ms timer's: it ran first
        assert client.protocol.sent == ["replay-1"]

    asyncio.run(scenario())


def test_without_a_debounce_every_key_cancels_and_asks_at_once() -> None:
    async def scenario() -> None:
        s, client = await _client(0)
        s.key(PATH, "x = 1\n", 0, 5, 2, lambda a: None)
        s.key_kind("word", True)
        s.key(PATH, "x = 12\n", 0, 6, 3, lambda a: None)
        assert client.protocol.sent == ["replay-1", "replay-2"]
        assert client.protocol.cancelled() == ["replay-1"]

    asyncio.run(scenario())


def _ready_notice(version: int, character: int) -> Any:
    return SimpleNamespace(
        textDocument=SimpleNamespace(uri=PATH.as_uri(), version=version),
        position=SimpleNamespace(line=0, character=character),
    )


def test_a_ready_notice_asks_again_only_while_the_suggestion_shows() -> None:
    async def scenario() -> None:
        answers: list[Answer] = []
        s, client = await _client(10_000)
        s.key(PATH, "x = 1\n", 0, 5, 2, answers.append)
        s._on_ready(_ready_notice(2, 5))  # nothing on screen at version 2 yet
        assert client.protocol.sent == [] and s.stats["asked_again"] == 0
        s._fire()
        client.protocol.futures["replay-1"].set_result(_answer("23"))
        await asyncio.wait(list(s._tasks))
        assert [a.text for a in answers] == ["23"]
        s._on_ready(_ready_notice(2, 5))
        assert client.protocol.sent == ["replay-1", "replay-2"] and s.stats["asked_again"] == 1

    asyncio.run(scenario())


def test_the_server_client_is_key_aware_and_records_its_debounce() -> None:
    config = replay.ReplayConfig(workspace=Path("."), model=Path("m.gguf"), debounce_ms=40)
    default: Any = replay.make_suggester("default", config, {"cacheDir": "c"})
    assert isinstance(default, KeyAware) and default.debounce_ms == 40
    assert ServerSuggester("x", {}).debounce_ms == 75


# -- the oracle -------------------------------------------------------------------------


def test_the_oracle_shows_the_rest_of_the_line_while_the_line_is_right() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    before = "def f(a):\n"
    assert oracle_text(region, before + "    b", 1, 5) == " = a + 1"
    assert oracle_text(region, before + "    b = a + 1\n    ", 2, 4) == "c = b * 2"
    assert oracle_text(region, before + "    x", 1, 5) == ""  # typed something else
    assert oracle_text(region, before + "    b = a + 1", 1, 13) == ""  # nothing left


def test_the_oracle_row_takes_each_line_at_its_first_key() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    oracle = OracleSuggester([region])
    asyncio.run(oracle.start(Path("/x")))
    keys, s = _replay(oracle, region, 0.0)
    # first character, then per line: Tab, and the newline key that shows the next line
    assert [k["kind"] for k in keys] == ["type", "tab", "type", "tab", "type", "tab"]
    assert s["keys_pressed"] == 6
    assert (s["line_starts"], s["lines"]) == (2, 2)
    assert s["line_start_ready"] == s["line_start_right"] == 1.0
    asyncio.run(oracle.start(Path("/x")))
    keys, s = _replay(oracle, region, 3600.0)
    assert s["line_start_shown"] == 1.0 and s["line_start_ready"] == 0.0
    assert s["line_start_right"] == 0.0 and s["line_start_right_too_new"] == 2


# -- line starts, cross-file lines, model time -----------------------------------------


def _k(pos: int, shown: str | None, within: bool, ready_: bool = True, kind: str = "type") -> Any:
    return {
        "region": "r001",
        "pos": pos,
        "shown": shown,
        "ready": ready_,
        "within_line": within,
        "first": pos == 0,
        "kind": kind,
        "text": "x",
    }


def test_line_start_figures_count_each_new_lines_first_moment() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    # target: "b = a + 1\n    c = b * 2\n    return c"; line 1 starts at 14, line 2 at 28
    assert rest_of_line(region.target, 14) == "c = b * 2"
    keys = [
        _k(0, None, False),  # the region's first line: not a line start
        _k(14, "c = b * 2", False, ready_=False),  # right, too new
        _k(14, "c = b * 2", False),  # a later moment at the same place: not counted
        _k(28, "return c  # more", False),  # right in full (more after it)
    ]
    assert [k["pos"] for k in line_starts(keys, [region])] == [14, 28]
    # which suggestion each shows: the last one was on screen at the key before it too
    for i, (k, shown_id) in enumerate(zip(keys, (None, 0, 1, 1), strict=True)):
        k["i"], k["shown_id"] = i, shown_id
    s = summarize(keys, [], [region])
    assert s["line_starts"] == 2 and s["line_start_shown"] == 1.0
    assert s["line_start_ready"] == 0.5 and s["line_start_right"] == 0.5
    assert s["line_start_right_too_new"] == 1 and s["line_start_carried"] == 1
    # a suggestion that grew just now: ready, but right in full only if the part read is
    keys[3]["ready_text"] = "retu"
    s = summarize(keys, [], [region])
    assert s["line_start_ready"] == 0.5 and s["line_start_right"] == 0.0


def test_keys_saved_on_cross_file_lines_and_on_the_rest() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    marked = Region(**{**region.to_json(), "cross_lines": (1,), "cross_names": ("b",)})
    per_line = keys_per_line(region.target)
    assert per_line == [10, 10, 8] and sum(per_line) == len(key_sequence(region.target))
    keys = [_k(p, None, p % 14 != 0) for p in range(10)]  # line 0 typed
    keys += [_k(14, "c = b * 2", False, kind="tab"), _k(23, None, True)]  # line 1: 2 keys
    keys += [_k(28 + p, None, p > 0) for p in range(8)]  # line 2 typed
    s = summarize(keys, [], [marked])
    assert (s["cross_keys_needed"], s["cross_keys_pressed"]) == (10, 2)
    assert s["cross_saved"] == pytest.approx(0.8)
    assert (s["other_keys_needed"], s["other_keys_pressed"]) == (18, 18)
    assert s["other_saved"] == 0.0
    again = Region.from_json(marked.to_json())
    assert again == marked


def test_cross_file_lines_come_from_the_workspace_index(tmp_path: Path) -> None:
    from lsp_assist.config import IndexSettings
    from lsp_assist.index import WorkspaceIndex

    (tmp_path / "util.py").write_text(
        "def helper(x):\n    return x\n\n\nclass Thing:\n    def size(self):\n        return 1\n",
        encoding="utf-8",
    )
    main = (
        "import util\nfrom util import helper, Thing\n\n\ndef local(y):\n    return y\n\n\n"
        "def run(items):\n    a = helper(items)\n    b = local(a, 'Thing')\n    n = len(b)\n"
        "    t = Thing()\n    m = items.helper\n    return util.helper(m) + t.size()\n"
    )
    (tmp_path / "main.py").write_text(main, encoding="utf-8")
    region = make_region(1, "main.py", "python", main, 9, 6)
    index = WorkspaceIndex([tmp_path], IndexSettings(watch=False))
    try:
        index.scan()
        (marked,) = mark_cross_lines(index, tmp_path, [region])
    finally:
        index.stop()
    # helper and Thing: defined only in util.py, used bare or through the imported module;
    # local: its own (and a string naming Thing is no use of it); len: a builtin;
    # items.helper: an attribute of something else;
    # size: a method, not a top-level name
    assert marked.cross_lines == (0, 3, 5)
    assert marked.cross_names == ("helper", "Thing")


def test_model_time_per_100_keys_from_the_logged_requests() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    keys = [_k(p, None, p > 0) for p in range(10)]
    requests = [
        {"prompt_tokens": 300, "reused_tokens": 280, "output_tokens": 6, "engine_ms": 90.0},
        {"prompt_tokens": 0, "reused_tokens": 0, "output_tokens": 0, "engine_ms": 0.5},
        {"prompt_tokens": 310, "reused_tokens": 10, "output_tokens": 4, "engine_ms": 400.0},
    ]
    model = summarize(keys, [], [region], requests)["model"]
    assert model["requests"] == 3 and model["model_requests"] == 2
    assert model["tokens_evaluated"] == 320 and model["tokens_generated"] == 10
    assert model["evaluated_per_100_keys"] == pytest.approx(3200)
    assert model["engine_ms_per_100_keys"] == pytest.approx(4905)
    assert summarize(keys, [], [region])["model"] is None  # a peer: no log


# -- the plain row's budget, the runs, the CLI -----------------------------------------


def test_the_plain_zone_may_spend_what_the_layers_would() -> None:
    from lsp_assist.config import parse_settings
    from lsp_assist.context.budget import PRIORITY, BudgetPlan
    from lsp_assist.context.zone import zone_room

    def zone_tokens(values: dict[str, Any]) -> int:
        """The most the zone can take of 1000 tokens with every other layer empty: its
        grant, then its widening into what the layers after it left (context/zone.py)."""
        settings, warnings = parse_settings(values)
        assert warnings == []
        plan = BudgetPlan.split(1000, settings.context)
        plan.grant("instructions")
        plan.spend("instructions", 12)  # the fixed format's few tokens
        zone = plan.grant("editing_zone")
        plan.spend("editing_zone", zone)
        for layer in PRIORITY[2:]:
            plan.grant(layer)
            plan.spend(layer, 0)
        return zone + zone_room(plan)

    layers_off = {k: v for k, v in replay.PLAIN_SETTINGS.items() if k.startswith("layer")}
    assert zone_tokens(layers_off) == 800  # twice its 40 % share: the earlier plain row
    assert zone_tokens(replay.PLAIN_SETTINGS) == 988  # all the instructions left
    assert zone_tokens({}) == 800  # default's zone: its layers take the rest


def test_every_row_runs_at_each_reaction_time_and_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = replay_workspace(tmp_path / "ws", files=2)

    def make(name: str, config: Any, base: Any, regions: Any = ()) -> Any:
        return OracleSuggester(regions) if name == "oracle" else SilentSuggester()

    monkeypatch.setattr(replay, "make_suggester", make)
    config = replay.ReplayConfig(
        workspace=ws,
        model=Path("m.gguf"),
        regions=2,
        pace_ms=1,
        rest_ms=0,
        seed=5,
        rows=("default", "oracle"),
        react_ms=(0.0, 3_600_000.0),
    )
    result = replay.run_replay(config, "lsp-assist bench --replay")
    rows = [(r["name"], r["react_ms"]) for r in result["rows"]]
    assert rows == [
        ("default", 0.0),
        ("default", 3_600_000.0),
        ("oracle", 0.0),
        ("oracle", 3_600_000.0),
    ]
    assert result["meta"]["react_ms"] == [0.0, 3_600_000.0]
    assert result["meta"]["debounce_ms"] == 75.0
    oracle_now, oracle_never = result["rows"][2:]
    assert oracle_now["summary"]["keystrokes_saved"] > 0.5
    assert oracle_never["summary"]["keystrokes_saved"] == 0.0
    assert oracle_now["debounce_ms"] == 0.0 and "budget" not in oracle_now
    table = markdown(result)
    assert "| oracle | steady | 0 |" in table and "| oracle | steady | 3,600,000 |" in table


def test_the_cli_reads_the_reaction_times_and_the_debounce(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lsp_assist.cli import bench_cmd
    from lsp_assist.cli.main import main

    seen: list[Any] = []

    def fake_run(config: Any, command: str) -> dict[str, Any]:
        seen.append(config)
        raise RuntimeError("stop here")

    monkeypatch.setattr("lsp_assist.evaluation.replay.run.run_replay", fake_run)
    monkeypatch.setattr(
        "lsp_assist.backends.models.resolve_model", lambda name: (Path("m.gguf"), "")
    )
    argv = ["bench", "--replay", str(Path(__file__).parent), "--rows", "default,oracle"]
    assert main([*argv, "--react-ms", "0,150", "--debounce-ms", "40"]) == 1
    (config,) = seen
    assert config.react_ms == (0.0, 150.0) and config.debounce_ms == 40.0
    assert config.regions == 16 and config.rows == ("default", "oracle")
    assert main([*argv]) == 1
    assert seen[1].react_ms == (150.0,) and seen[1].debounce_ms == 75.0
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main([*argv, "--react-ms", "-5"])
    assert main([*argv, "--debounce-ms", "-1"]) == 2
    assert bench_cmd._ms_list("150, 0,150") == (150.0, 0.0)
