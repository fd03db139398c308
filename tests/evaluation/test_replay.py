"""The acceptance replay's logic: regions, keys, the simulated user, the screen, the figures.

A fake :class:`Suggester` stands in for the server here (the end-to-end run with the
real server and SmolLM2 is test_replay_e2e.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from lsp_assist.evaluation.replay import run as replay
from lsp_assist.evaluation.replay.client import answer_from, diff_edit
from lsp_assist.evaluation.replay.report import markdown, summarize
from lsp_assist.evaluation.replay.run import cursor_at, gap_after, replay_region, replay_row
from lsp_assist.evaluation.replay.tasks import (
    choose_regions,
    key_sequence,
    keys_between,
    make_region,
    next_key,
    region_buffers,
    within_line,
)
from lsp_assist.evaluation.replay.user import Screen, decide, matching_words, word_steps
from lsp_assist.evaluation.suggester import Answer
from tests.support.replay_fakes import (
    SOURCE,
    TEXT,
    FakeSuggester,
    SilentSuggester,
    replay_workspace,
)

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "ws"

# -- keys -------------------------------------------------------------------------------


def test_a_newline_and_the_next_indentation_are_one_key() -> None:
    target = "if x:\n        y = 1\n    z()"
    keys = key_sequence(target)
    assert keys == [*"if x:", "\n        ", *"y = 1", "\n    ", *"z()"]
    assert "".join(keys) == target
    assert keys_between(target, 0, len(target)) == len(keys)
    # after an accepted "...:\n" the missing indentation is one key too
    assert next_key(target, 6) == "        "
    assert next_key(target, 8) == "      "


def test_within_line_means_code_before_the_cursor_on_its_line() -> None:
    target = "a = 1\n    b()"
    assert not within_line(target, 0)
    assert within_line(target, 1)
    assert within_line(target, 5)  # at the end of "a = 1"
    assert not within_line(target, 10)  # after the newline and the indentation
    assert within_line(target, 11)


def test_the_buffer_has_the_region_removed_and_its_indentation_kept() -> None:
    text = "def f():\n    a = 1   \n    b = 2\n    return a + b\nx = 0\n"
    region = make_region(1, "f.py", "python", text, 1, 3)
    assert region.indent == "    "
    assert region.target == "a = 1\n    b = 2\n    return a + b"  # trailing blanks trimmed
    before, after = region_buffers(text, region)
    assert before == "def f():\n    "
    assert after == "\nx = 0\n"
    assert before + region.target + after == text.replace("1   \n", "1\n")
    assert cursor_at(region, 0) == (1, 4)
    assert cursor_at(region, 5) == (1, 9)
    assert cursor_at(region, 10) == (2, 4)  # after the newline key


# -- regions ----------------------------------------------------------------------------


def test_regions_are_deterministic_for_a_seed(tmp_path: Path) -> None:
    root = replay_workspace(tmp_path)
    files = sorted(p.name for p in root.iterdir())
    first = choose_regions(root, files, 4, seed=3)
    assert len(first) == 4
    assert first == choose_regions(root, files, 4, seed=3)
    others = [choose_regions(root, files, 4, seed=s) for s in range(4, 12)]
    assert any(o != first for o in others)
    assert len({r.path for r in first}) == 4  # one region a file


def test_regions_stay_inside_function_bodies_without_docstrings(tmp_path: Path) -> None:
    root = replay_workspace(tmp_path)
    files = sorted(p.name for p in root.iterdir())
    lines = SOURCE.split("\n")
    body = {i for i, x in enumerate(lines) if x.startswith("    ") or x.startswith("        ")}
    docstring = {i for i, x in enumerate(lines) if i in range(8, 12)}
    seen = 0
    for seed in range(30):
        for region in choose_regions(root, files, 6, seed=seed):
            span = set(range(region.start, region.end))
            assert 3 <= len(span) <= 8
            assert span <= body, region
            assert not span & docstring, region
            assert 20 not in span  # the `def __init__` head is not in a body
            assert not region.target.lstrip().startswith(('"""', "#"))
            seen += 1
    assert seen


def test_regions_in_brace_languages_leave_the_braces_out() -> None:
    files = ["web/cart.js", "web/util.js", "inventory/pricing.py", "inventory/store.py"]
    found = [r for s in range(20) for r in choose_regions(FIXTURE, files, 4, seed=s)]
    js = [r for r in found if r.path.endswith(".js")]
    assert js, "no JavaScript region"
    for region in js:
        text = (FIXTURE / region.path).read_text().split("\n")
        for line in text[region.start : region.end]:
            # method heads and their closing braces sit at 2 columns, bodies at 4 or more
            indent = len(line) - len(line.lstrip())
            assert indent >= 4, (region, line)
            assert not line.lstrip().startswith(("add(", "total(", "constructor(", "export"))


# -- the simulated user -----------------------------------------------------------------


def test_tab_when_the_suggestion_is_right_in_full() -> None:
    target = "value = compute(x)\n    return value"
    action = decide(target, 0, "value = compute(x)\n    ")
    assert (action.kind, action.text) == ("tab", "value = compute(x)")  # trailing blanks left
    whole = decide(target, 8, "compute(x)\n    return value\n")
    assert (whole.kind, whole.text) == ("tab", "compute(x)\n    return value")
    assert decide(target, 0, "   \n").kind == "type"  # nothing but whitespace: not right


def test_word_by_word_when_a_prefix_of_four_characters_is_right() -> None:
    target = "value = compute(x)"
    action = decide(target, 0, "value = other(y)")
    assert action.kind == "word"
    assert action.text == "value"
    assert action.plan == (" =",)
    # the plan goes on while the suggestion still starts with the next word
    nxt = decide(target, 5, " = other(y)", action.plan)
    assert (nxt.kind, nxt.text, nxt.plan) == ("word", " =", ())
    # three right characters are not enough: type over it
    short = decide("val = 1", 0, "valid = 2")
    assert (short.kind, short.text) == ("type", "v")


def test_word_steps_are_ctrl_right_pieces() -> None:
    assert word_steps("self.items = list(items)") == [
        "self",
        ".",
        "items",
        " =",
        " list",
        "(",
        "items",
        ")",
    ]
    assert matching_words("self.items = x", "self.items = list(items)") == [
        "self",
        ".",
        "items",
        " =",
    ]


def test_word_by_word_only_when_it_saves_keys() -> None:
    # "a.b." is right, but as four Ctrl+Right pieces it costs what typing it costs
    assert decide("a.b.c = 1", 0, "a.b.d = 2").kind == "type"


# -- the screen -------------------------------------------------------------------------


def test_the_screen_shows_the_newest_answer_for_the_version_that_arrived_in_time() -> None:
    screen = Screen()
    screen.key_times[2] = 10.0
    screen.add(Answer(version=2, text="abc", arrived=10.2))
    screen.add(Answer(version=2, text="abd", arrived=10.3))
    screen.add(Answer(version=1, text="old", arrived=10.1))
    assert screen.at(2, 10.1) is None  # nothing arrived yet
    shown = screen.at(2, 10.25)
    assert shown is not None and shown.text == "abc"
    assert shown.latency_ms == pytest.approx(200)
    later = screen.at(2, 10.4)
    assert later is not None and later.text == "abd" and later.id != shown.id
    assert len(screen.distinct) == 2


def test_type_through_keeps_the_same_suggestion_until_it_no_longer_matches() -> None:
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="return x", arrived=0.1))
    first = screen.at(1, 0.2)
    assert first is not None
    screen.after_key("r", 2, "type")
    carried = screen.at(2, 0.3)
    assert carried is not None and carried.id == first.id and carried.text == "eturn x"
    # the server answers the same text again: still the same suggestion
    screen.add(Answer(version=2, text="eturn x", arrived=0.35))
    again = screen.at(2, 0.4)
    assert again is not None and again.id == first.id
    screen.after_key("x", 3, "type")  # typed over it
    assert screen.at(3, 0.5) is None
    assert len(screen.distinct) == 1 and screen.distinct[0].accepted == ""


def test_a_word_accepted_marks_the_suggestion_partial_and_keeps_the_rest() -> None:
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="value = f(x)", arrived=0.1))
    assert screen.at(1, 0.2) is not None
    screen.after_key("value", 2, "word")
    rest = screen.at(2, 0.3)
    assert rest is not None and rest.text == " = f(x)"
    assert [d.accepted for d in screen.distinct] == ["partial"]
    screen.after_key(" = f(x)", 3, "tab")
    assert [d.accepted for d in screen.distinct] == ["full"]
    assert screen.at(3, 0.4) is None


# -- the replay with fake suggesters ----------------------------------------------------


def _run(mode: str, delay: float = 0.0, pace_ms: float = 15.0) -> tuple[Any, ...]:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    fake = FakeSuggester(region, TEXT, mode, delay)
    keys, shown = asyncio.run(
        replay_region(fake, Path("/x/f.py"), TEXT, region, pace="steady", pace_ms=pace_ms, rest_s=0)
    )
    return region, fake, keys, shown, summarize(keys, shown, [region])


def test_a_right_suggestion_is_taken_with_one_tab() -> None:
    region, fake, keys, _, s = _run("right")
    assert fake.calls == ["open", "rest 1:4"]
    assert keys[0]["kind"] == "type" and keys[0]["shown"] is None and keys[0]["first"]
    assert keys[1]["kind"] == "tab"  # the answer to the first key is right in full
    assert len(keys) == 2
    assert fake.versions == [2, 3]  # the Tab went through key() as a version of its own
    assert s["keys_needed"] == len(key_sequence(region.target))
    assert s["keystrokes_saved"] == pytest.approx(1 - 2 / s["keys_needed"])
    assert s["chars_by_suggestions"] == pytest.approx((len(region.target) - 1) / len(region.target))
    assert s["acceptance"] == 1.0 and s["noise"] == 0.0
    assert s["latency_ms"]["p50"] is not None and s["latency_ms"]["p50"] < 50


def test_wrong_suggestions_are_typed_over_and_counted_as_noise() -> None:
    _, _, keys, shown, s = _run("wrong")
    assert all(k["kind"] == "type" for k in keys)
    assert s["keystrokes_saved"] == 0.0
    assert s["acceptance"] == 0.0 and s["accepted"] == 0
    assert s["noise"] is None  # nothing accepted: no ratio
    assert s["rejected"] == len(shown) >= len(keys) - 1
    assert s["quiet"] == pytest.approx(1 / len(keys))  # only the first key saw nothing


def test_keys_never_wait_for_slow_answers() -> None:
    started = time.perf_counter()
    region, _, keys, shown, s = _run("right", delay=0.2, pace_ms=10)
    elapsed = time.perf_counter() - started
    assert len(keys) == len(key_sequence(region.target))
    assert elapsed < 0.2 * 5  # far less than an answer a key
    assert shown == [] and s["quiet"] == 1.0 and s["shown_within_line"] == 0.0


def test_the_row_blanks_the_copy_on_disk_and_restores_it(tmp_path: Path) -> None:
    (tmp_path / "f.py").write_text(TEXT, encoding="utf-8")
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    fake = FakeSuggester(region, TEXT, "silent")
    seen: list[str] = []
    original_open = fake.open

    async def spy(path: Path, text: str, version: int) -> None:
        seen.append(path.read_text(encoding="utf-8"))
        await original_open(path, text, version)

    fake.open = spy  # type: ignore[method-assign]
    keys, _ = asyncio.run(replay_row(fake, tmp_path, [region], pace="steady", pace_ms=1, rest_s=0))
    assert seen == ["def f(a):\n    \n"]
    assert (tmp_path / "f.py").read_text(encoding="utf-8") == TEXT
    assert fake.calls == ["start", "open", "rest 1:4", "close", "stop"]
    assert len(keys) == len(key_sequence(region.target))


def test_bursty_pauses_after_line_ends_and_calls() -> None:
    assert gap_after("a", "bursty", 180) == pytest.approx(0.18)
    assert gap_after("(", "bursty", 180) == pytest.approx(0.6)
    assert gap_after(".", "bursty", 180) == pytest.approx(0.6)
    assert gap_after("\n    ", "bursty", 180) == pytest.approx(0.6)
    assert gap_after("(", "steady", 180) == pytest.approx(0.18)


# -- figures, client pieces, rows -------------------------------------------------------


def _key(
    kind: str, text: str, shown: str | None, within: bool, first: bool = False
) -> dict[str, Any]:
    return {"kind": kind, "text": text, "shown": shown, "within_line": within, "first": first}


def test_summary_figures_from_records() -> None:
    region = make_region(1, "f.py", "python", TEXT, 1, 3)  # 36 characters, 28 keys
    keys = [
        _key("type", "b", None, False, True),
        _key("type", " ", "zz", True),
        _key("word", " =", " = a", True),
        _key("tab", " a + 1", " a + 1", True),
        _key("type", "\n    ", None, True),
    ]
    shown = [
        {"latency_ms": 100.0, "accepted": ""},
        {"latency_ms": 300.0, "accepted": "full"},
    ]
    s = summarize(keys, shown, [region])
    assert s["keys_needed"] == 28 and s["keys_pressed"] == 5
    assert s["keystrokes_saved"] == pytest.approx(1 - 5 / 28)
    assert s["chars_by_suggestions"] == pytest.approx(8 / 36)
    assert s["shown_per_100_keys"] == pytest.approx(60.0)
    assert s["acceptance"] == 0.5 and s["noise"] == 1.0
    assert s["latency_ms"]["p50"] == pytest.approx(200.0)
    assert s["quiet"] == pytest.approx(0.4)
    assert s["within_line_moments"] == 4
    assert s["shown_within_line"] == pytest.approx(0.75)
    table = markdown(
        {
            "meta": {
                "command": "lsp-assist bench --replay",
                "date": "d",
                "machine": "m",
                "commit": "c",
                "model": "x.gguf",
                "regions": 1,
                "keys_needed": 28,
                "chars": 36,
                "workspace": "ws",
                "seed": 1,
                "pace_ms": 180,
                "rest_ms": 2000,
                "load": "0.1",
            },
            "rows": [{"name": "default", "label": "default", "pace": "steady", "summary": s}],
        }
    )
    assert (
        "| default | steady | 0 | 28 | 5 | 82% | 22% | 60.0 | 50% (1/2) | 1.0 | 200 / 280 / 298 "
        "| 40% | 75% |"
    ) in table


def test_diff_edit_is_the_range_that_changed() -> None:
    assert diff_edit("ab\n    \nx", "ab\n    c\nx") == ((1, 4), (1, 4), "c")
    assert diff_edit("ab\n    c\nx", "ab\n    cd\n    \nx") == ((1, 5), (1, 5), "d\n    ")


def test_answers_honour_the_items_range() -> None:
    arrived = 1.0
    plain = types.InlineCompletionList(items=[types.InlineCompletionItem(insert_text="foo()")])
    answer = answer_from(plain, 3, 1, 6, "    ab", arrived)
    assert answer == Answer(3, "foo()", 1.0, 0)
    ranged = types.InlineCompletionList(
        items=[
            types.InlineCompletionItem(
                insert_text="abfoo()",
                range=types.Range(types.Position(1, 4), types.Position(1, 8)),
            )
        ]
    )
    answer = answer_from(ranged, 3, 1, 6, "    ab)]", arrived)
    assert answer == Answer(3, "foo()", 1.0, 2)
    wrong = types.InlineCompletionList(
        items=[
            types.InlineCompletionItem(
                insert_text="xyfoo()", range=types.Range(types.Position(1, 4), types.Position(1, 6))
            )
        ]
    )
    assert answer_from(wrong, 3, 1, 6, "    ab", arrived) is None
    assert answer_from(types.InlineCompletionList(items=[]), 3, 1, 6, "", arrived) is None


def test_the_ready_capability_is_the_servers() -> None:
    from lsp_assist.evaluation.replay import client as replay_client
    from lsp_assist.lsp import server

    assert replay_client.READY_CAPABILITY == server.READY_CAPABILITY
    assert replay_client.READY_NOTIFICATION == server.READY_NOTIFICATION


def test_rows_are_checked_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    assert replay.check_rows(("default", "plain")) == ""
    assert "unknown rows nope" in replay.check_rows(("default", "nope"))
    monkeypatch.setattr("importlib.util.find_spec", lambda name: None)
    assert "needs lsp_assist.evaluation.peers.llamavim.client" in replay.check_rows(("llamavim",))


def test_the_plain_row_turns_every_layer_but_the_zone_off() -> None:
    config = replay.ReplayConfig(
        workspace=Path("."), model=Path("m.gguf"), settings={"threads": "1"}
    )
    plain: Any = replay.make_suggester("plain", config, {"cacheDir": "c"})
    default: Any = replay.make_suggester("default", config, {"cacheDir": "c"})
    for key in ("layerFileSummary", "layerProjectSummary", "layerRelated", "layerSimilar"):
        assert plain.options[key] is False
        assert key not in default.options
    for key in ("relatedRatio", "summaryRatio"):  # the zone may take their shares
        assert plain.options[key] == 0.0 and key not in default.options
    assert plain.options["modelPath"] == "m.gguf" and plain.options["threads"] == "1"


def test_the_cli_refuses_unknown_rows(capsys: pytest.CaptureFixture[str]) -> None:
    from lsp_assist.cli.main import main

    assert main(["bench", "--replay", "--rows", "default,nope"]) == 2
    assert "unknown rows nope" in capsys.readouterr().err
    assert main(["bench", "--replay", "--regions", "0"]) == 2


def test_a_failing_row_keeps_the_others_and_the_outputs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = replay_workspace(tmp_path / "ws", files=2)
    silent = SilentSuggester()

    def make(name: str, config: replay.ReplayConfig, base: dict[str, Any], regions: Any) -> Any:
        if name == "plain":
            raise RuntimeError("boom")
        return silent

    monkeypatch.setattr(replay, "make_suggester", make)
    config = replay.ReplayConfig(
        workspace=ws, model=Path("m.gguf"), regions=2, pace_ms=1, rest_ms=0, seed=5
    )
    result = replay.run_replay(config, "lsp-assist bench --replay")
    assert [r["name"] for r in result["rows"]] == ["default", "plain"]
    default, plain = result["rows"]
    assert plain["error"] == "RuntimeError: boom" and plain["react_ms"] == 150.0
    assert default["summary"]["keys_pressed"] == default["summary"]["keys_needed"] == silent.keys
    assert default["summary"]["quiet"] == 1.0
    assert len(result["regions"]) == 2
    written = replay.write_outputs(tmp_path / "out", result)
    table = (tmp_path / "out" / "table.md").read_text()
    assert "failed: RuntimeError: boom" in table and "| silent | steady |" in table
    assert {p.name for p in written} >= {"results.json", "table.md"}
    assert (ws / "m0.py").read_text(encoding="utf-8") == SOURCE.replace("shout", "shout0")


def test_the_table_is_recomputed_from_the_records(tmp_path: Path) -> None:
    from lsp_assist.cli.main import main

    region, _, keys, shown, s = _run("right")
    result = {
        "meta": {
            "command": "c",
            "date": "d",
            "machine": "m",
            "commit": "",
            "model": "x.gguf",
            "regions": 1,
            "keys_needed": s["keys_needed"],
            "chars": s["chars"],
            "workspace": "ws",
            "seed": 1,
            "pace_ms": 15,
            "rest_ms": 0,
            "load": "0",
        },
        "regions": [region.to_json()],
        "rows": [
            {
                "name": "default",
                "label": "default",
                "pace": "steady",
                "summary": {},
                "keys": keys,
                "shown": shown,
            },
        ],
    }
    (tmp_path / "results.json").write_text(json.dumps(result))
    out = tmp_path / "again"
    assert (
        main(
            ["bench", "--replay", "--from-json", str(tmp_path / "results.json"), "--out", str(out)]
        )
        == 0
    )
    again = json.loads((out / "results.json").read_text())
    assert again["rows"][0]["summary"] == json.loads(json.dumps(s))
    assert "| default | steady |" in (out / "table.md").read_text()


def test_one_line_docstrings_and_comment_lines_are_never_in_a_region() -> None:
    from lsp_assist.evaluation.replay.tasks import eligible_lines

    text = 'def f(a):\n    """One line."""\n    b = a\n    # why\n    c = b  # ok\n    return c\n'
    assert eligible_lines(text, "python") == [False, False, True, False, True, True, False]


def test_a_right_suggestion_one_key_types_is_typed_not_accepted_nor_noise() -> None:
    assert decide("f(x)", 0, "f").kind == "type"
    assert decide("f(x)", 0, "f(").kind == "tab"
    screen = Screen()
    screen.key_times[1] = 0.0
    screen.add(Answer(version=1, text="f", arrived=0.1))
    screen.add(Answer(version=2, text="zz", arrived=0.3))
    assert screen.at(1, 0.2) is not None
    screen.after_key("f", 2, "type")
    assert screen.at(2, 0.4) is not None
    screen.after_key("(", 3, "type")
    assert screen.distinct[0].typed_through and not screen.distinct[1].typed_through
    region = make_region(1, "f.py", "python", TEXT, 1, 3)
    shown = [
        {"latency_ms": 1.0, "accepted": "", "typed_through": d.typed_through}
        for d in screen.distinct
    ]
    s = summarize([_key("type", "f", "f", False, True)], shown, [region])
    assert (s["accepted"], s["typed_through"], s["rejected"]) == (0, 1, 1)
    assert s["acceptance"] == 0.0 and s["noise"] is None
