"""Shown suggestions: the per-item outcome, the log line, the stats per shown suggestion."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from lsp_assist.telemetry import (
    MetricsLog,
    ShownRecord,
    ShownSuggestions,
    compute_stats,
    format_stats,
    item_id,
    read_records,
    read_shown,
    request_of,
)
from lsp_assist.telemetry import shown as telemetry_shown
from lsp_assist.telemetry.shown import utf16_len
from tests.support.telemetry import URI, Clock, offer


def tracker() -> tuple[ShownSuggestions, list[ShownRecord], Clock]:
    written: list[ShownRecord] = []
    clock = Clock()
    return ShownSuggestions(written.append, clock=clock), written, clock


def test_item_ids_name_their_request() -> None:
    assert item_id("3f2a", 0) == "3f2a"
    assert item_id("3f2a", 2) == "3f2a.2"
    assert request_of("3f2a.2") == "3f2a" and request_of("3f2a") == "3f2a"
    assert utf16_len("é😀a") == 4  # the emoji is a surrogate pair


def test_accepted_whole() -> None:
    shown, written, clock = tracker()
    offer(shown, "r1", "compute(a, b)")
    assert shown.shown("r1")
    assert not shown.shown("r1"), "a second show of the same item is not a second suggestion"
    clock.now += 1.5
    assert shown.accepted("r1")
    [rec] = written
    assert (rec.outcome, rec.accepted_chars, rec.shown_chars, rec.items) == ("accepted", 13, 13, 1)
    assert not rec.partial and rec.shown_ms == 1500.0
    assert (rec.trigger, rec.model, rec.language, rec.request_id) == (
        "automatic",
        "m.gguf",
        "python",
        "r1",
    )


def test_partly_accepted_then_dismissed_keeps_the_longest_length() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.shown("r1")
    assert shown.partially_accepted("r1", 7)  # "compute"
    assert shown.partially_accepted("r1", 8)  # "compute(" : from the item's start
    assert not shown.partially_accepted("r1", 0)
    assert shown.dismissed("r1")
    [rec] = written
    assert (rec.outcome, rec.accepted_chars, rec.partial) == ("dismissed", 8, True)
    assert not shown.dismissed("r1"), "ended: a late dismiss changes nothing"
    assert len(written) == 1


def test_partial_accept_counts_utf16_units() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "'😀' + name")
    shown.shown("r1")
    shown.partially_accepted("r1", 4)  # ', the surrogate pair, '
    shown.accepted("r1")
    [rec] = written
    assert rec.shown_chars == 11 and rec.accepted_chars == 11


def test_typed_through_then_accepted_is_one_suggestion() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.shown("r1")
    # the user typed "com"; the type-through cache answered the rest as a new item
    offer(shown, "r2", "pute(a, b)", before="    x = com")
    assert shown.shown("r2")
    assert written == [], "r2 continues r1: nothing ended"
    shown.partially_accepted("r2", 4)  # "pute"
    shown.accepted("r2")
    [rec] = written
    assert (rec.item, rec.items, rec.outcome) == ("r1", 2, "accepted")
    assert rec.accepted_chars == 13 and rec.shown_chars == 13


def test_an_early_answer_growing_in_place_continues_it() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "comp")
    shown.shown("r1")
    offer(shown, "r2", "compute(a, b)")  # the whole, asked again at the same place
    shown.shown("r2")
    shown.partially_accepted("r2", 7)
    shown.close()
    [rec] = written
    assert (rec.outcome, rec.items, rec.shown_chars, rec.accepted_chars) == ("ignored", 2, 13, 7)
    assert rec.partial


def test_typing_something_else_is_typed_over() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.shown("r1")
    offer(shown, "r2", "(1)", before="    x = print")
    shown.shown("r2")
    [rec] = written
    assert rec.outcome == "typed_over" and rec.accepted_chars == 0


def test_typing_over_it_is_seen_as_the_document_changes() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)", after=")")
    shown.shown("r1")
    lines = {3: "    x = comp)"}  # typed through "comp", the ")" after the cursor kept
    shown.edited(URI, lines.__getitem__)
    lines[3] = "    x = compute(a, b))"  # all of it: maybe an accept on its way
    shown.edited(URI, lines.__getitem__)
    lines[3] = "    y = comp)"  # changed before the cursor: no conclusion
    shown.edited(URI, lines.__getitem__)
    lines[3] = "    x = comp]"  # after the cursor: no conclusion either
    shown.edited(URI, lines.__getitem__)
    shown.edited("file:///w/other.py", lines.__getitem__)
    assert written == []
    lines[3] = "    x = compz)"
    shown.edited(URI, lines.__getitem__)
    [rec] = written
    assert rec.outcome == "typed_over"
    assert not shown.accepted("r1"), "it ended"


def test_typing_all_of_it_is_typed_over() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "a + b")
    shown.shown("r1")
    offer(shown, "r2", "  # done", before="    x = a + b")
    shown.shown("r2")
    assert [r.outcome for r in written] == ["typed_over"]


def test_another_place_or_another_item_supersedes() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.shown("r1")
    offer(shown, "r1.1", "total(a)", trigger="explicit")  # cycling to an alternative
    shown.shown("r1.1")
    offer(shown, "r3", "return x", before="    ", line=4)  # the next line
    shown.shown("r3")
    offer(shown, "r4", "y", before="    ", line=4, uri="file:///w/b.py")  # another file
    shown.shown("r4")
    assert [(r.item, r.outcome) for r in written] == [("r1", "superseded"), ("r1.1", "superseded")]
    assert written[1].trigger == "explicit"
    shown.closed("file:///w/b.py")
    shown.close()
    assert [(r.item, r.outcome) for r in written[2:]] == [("r4", "ignored"), ("r3", "ignored")]


def test_typed_through_into_a_different_answer_supersedes() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.shown("r1")
    offer(shown, "r2", "bine(x)", before="    x = com")
    shown.shown("r2")
    assert [r.outcome for r in written] == ["superseded"]


def test_accept_of_an_item_never_shown_counts_it_shown() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "abc")
    assert shown.accepted("r1")  # a client without didShowCompletion (completion-at-point)
    assert [(r.outcome, r.accepted_chars) for r in written] == [("accepted", 3)]
    assert not shown.accepted("nope") and not shown.shown("nope")
    assert not shown.partially_accepted("nope", 3) and not shown.dismissed("nope")


def test_offers_are_bounded() -> None:
    written: list[ShownRecord] = []
    shown = ShownSuggestions(written.append, max_offered=2)
    for name in ("a", "b", "c"):
        offer(shown, name, "x")
    assert not shown.shown("a"), "the oldest offer was forgotten"
    assert shown.shown("c")


def _log_with_shown(path: Path) -> None:
    log = MetricsLog(path)
    rows = [
        ("a", "automatic", "m1.gguf", "accepted", 10, 10),
        ("b", "automatic", "m1.gguf", "dismissed", 10, 4),
        ("c", "automatic", "m1.gguf", "typed_over", 20, 0),
        ("d", "explicit", "m1.gguf", "accepted", 6, 6),
        ("e", "explicit", "m2.gguf", "superseded", 8, 0),
    ]
    for i, (name, trigger, model, outcome, shown_chars, accepted) in enumerate(rows):
        log.record_shown(
            ShownRecord(
                ts=1_700_000_000.0 + i,
                item=name,
                request_id=name,
                trigger=trigger,
                model=model,
                outcome=outcome,
                shown_chars=shown_chars,
                accepted_chars=accepted,
            )
        )
    log.close()


def test_shown_lines_read_back_and_leave_the_request_records_alone(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _log_with_shown(path)
    line = json.loads(path.read_text().splitlines()[0])
    assert line["event"] == "shown" and line["outcome"] == "accepted"
    assert "before" not in line and "text" not in line, "no code in the log"
    assert read_records(path) == []
    shown = read_shown(path)
    assert [s.item for s in shown] == ["a", "b", "c", "d", "e"]
    assert read_shown(path, since=1_700_000_003.0)[0].item == "d"
    bad = ShownRecord.from_json({"outcome": "exploded", "accepted_chars": -3, "items": True})
    assert (bad.outcome, bad.accepted_chars, bad.items) == ("ignored", 0, 1)


def test_stats_per_shown_suggestion_by_trigger_and_model(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _log_with_shown(path)
    stats = compute_stats(read_records(path), read_shown(path))["shown"]
    assert stats["shown"] == 5
    assert stats["acceptance"] == 0.4 and stats["partial_acceptance"] == 0.2
    assert stats["accepted_chars_mean"] == 4.0  # (10 + 4 + 6) / 5
    assert (stats["typed_over"], stats["dismissed"], stats["superseded"]) == (0.2, 0.2, 0.2)
    auto, explicit = stats["by_trigger"]["automatic"], stats["by_trigger"]["explicit"]
    assert (auto["shown"], auto["acceptance"], auto["partial_acceptance"]) == (3, 0.3333, 0.3333)
    assert (explicit["shown"], explicit["acceptance"]) == (2, 0.5)
    assert stats["by_model"]["m1.gguf"]["accepted_chars_mean"] == 5.0
    assert stats["by_model"]["m2.gguf"]["acceptance"] == 0.0
    table = format_stats(compute_stats([], read_shown(path)))
    header = table.splitlines()[0].split()
    assert header == ["all", "automatic", "explicit", "m1.gguf", "m2.gguf"]
    rows = {line[:22].strip(): line[22:].split() for line in table.splitlines()[2:]}
    assert rows["accepted"] == ["40.0%", "33.3%", "50.0%", "50.0%", "0.0%"]
    assert rows["partly accepted"][0] == "20.0%" and rows["chars accepted (mean)"][0] == "4.0"


def test_cli_prints_the_shown_table(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    _log_with_shown(path)
    cli = [sys.executable, "-m", "lsp_assist.cli.main", "stats", "--metrics", str(path)]
    out = subprocess.run(cli, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "shown suggestions" in out and "partly accepted" in out, out
    as_json = subprocess.run(
        [*cli, "--json"], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert json.loads(as_json)["shown"]["by_trigger"]["explicit"]["shown"] == 2


def test_a_show_heard_after_its_document_closed_opens_nothing() -> None:
    shown, written, _ = tracker()
    offer(shown, "r1", "compute(a, b)")
    shown.closed(URI)
    assert not shown.shown("r1"), "the close forgot the items offered in its document"
    assert shown.bounds(documents=0)["shown.open"].size == 0 and written == []


def test_a_long_typed_through_suggestion_keeps_its_latest_items_and_counts_all(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(telemetry_shown, "SUGGESTION_ITEMS", 3)
    shown, written, _ = tracker()
    text = "compute(alpha, beta)"
    for k in range(len(text) - 1):  # one item per key typed through
        offer(shown, f"r{k}", text[k:], before="    x = " + text[:k])
        assert shown.shown(f"r{k}")
        listed = shown.bounds(documents=1)["shown.items"]
        assert listed.size == min(k + 1, 3) and listed.bound == 3
    assert shown.accepted(f"r{len(text) - 2}")
    [rec] = written
    assert (rec.outcome, rec.items, rec.item) == ("accepted", len(text) - 1, "r0")
    assert rec.accepted_chars == rec.shown_chars == utf16_len(text)
