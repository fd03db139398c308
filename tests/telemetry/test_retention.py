"""What users keep: accepted characters followed through edits, measured later; quiet keys."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import TypeVar

import pytest

from lsp_assist.documents import Document, Position
from lsp_assist.telemetry import (
    KeysRecord,
    MetricsLog,
    OfferedItem,
    RetainedRecord,
    ShownRecord,
    ShownSuggestions,
    TelemetryEvent,
    compute_stats,
    format_stats,
    read_outcomes,
)
from lsp_assist.telemetry.retention import (
    KEYS_FLUSH,
    RETAIN_AFTER_ENV,
    locate,
    retain_after_s,
    retained,
    track,
    trim_edit,
    utf16_prefix,
)
from tests.support.telemetry import URI, Clock, offer

T = TypeVar("T")
TEXT = "import os\n\ndef f():\n    x = \n    return x\n"
LINE, BEFORE = 3, "    x = "


class Editor:
    """Documents the tracker reads, and edits told to it as the server tells them."""

    def __init__(self) -> None:
        self.docs: dict[str, Document] = {URI: Document(URI, TEXT)}
        self.written: list[TelemetryEvent] = []
        self.clock = Clock()
        self.shown = ShownSuggestions(
            self.written.append, document_of=self.docs.get, retain_after=30.0, clock=self.clock
        )

    def edit(self, start: int, end: int, text: str, uri: str = URI) -> None:
        """Replace code points [start, end) (as didChange does: buffers, then the tracker)."""
        doc = self.docs[uri]
        old = doc.text
        doc.apply_change(doc.position_at_offset(start), doc.position_at_offset(end), text)
        if self.shown.follows(uri):
            self.shown.changed(uri, *trim_edit(old, start, end, text))
        self.shown.edited(uri, doc.line)

    def offset(self, line: int, column: int) -> int:
        return self.docs[URI].offset_at(Position(line, column))

    def offer(self, name: str, text: str, before: str = BEFORE, after: str = "") -> str:
        return offer(self.shown, name, text, before=before, line=LINE, after=after)

    def of(self, kind: type[T]) -> list[T]:
        return [w for w in self.written if isinstance(w, kind)]


# -- the pieces ---------------------------------------------------------------------


def test_track_shifts_keeps_and_grows_the_span() -> None:
    span = (10, 20)
    assert track(*span, 0, 0, 5) == (15, 25), "an insertion before shifts it"
    assert track(*span, 2, 8, 0) == (4, 14), "a deletion before shifts it back"
    assert track(*span, 10, 10, 3) == (13, 23), "an insertion at its start is before it"
    assert track(*span, 5, 10, 1) == (6, 16), "a replacement ending at its start is before it"
    assert track(*span, 20, 20, 4) == (10, 20), "an insertion at its end is after it"
    assert track(*span, 25, 30, 0) == (10, 20), "after it: nothing moves"
    assert track(*span, 12, 15, 1) == (10, 18), "inside it: it shrinks"
    assert track(*span, 12, 12, 6) == (10, 26), "inside it: it grows"
    assert track(*span, 5, 15, 2) == (5, 12), "overlapping its start: the new text joins it"
    assert track(*span, 0, 40, 3) == (0, 3), "over all of it: the new text is the span"


def test_trim_edit_leaves_out_what_did_not_change() -> None:
    old = "abc def ghi"
    assert trim_edit(old, 0, len(old), "abc DEF ghi") == (4, 7, "DEF")
    assert trim_edit(old, 4, 7, "def") == (7, 7, ""), "same text: an empty edit"
    assert trim_edit(old, 0, 3, "abcx") == (3, 3, "x")
    assert trim_edit("aaaa", 0, 4, "aa") == (2, 4, ""), "the head and the tail never overlap"


def test_locate_finds_the_accepted_text_at_or_near_its_place() -> None:
    text = "x = foo(1)\ny = foo(1)\n"
    assert locate(text, "foo(1)", 4) == 4
    assert locate(text, "foo(1)", 13) == 15, "the nearest of two places"
    assert locate(text, "bar", 4) is None
    assert locate(text, "", 4) is None
    assert locate("a" * 5000 + "foo", "foo", 0, window=100) is None, "too far: not it"


def test_retained_counts_matching_characters_in_utf16() -> None:
    assert retained("compute(a, b)", "compute(a, b)") == 13, "kept"
    assert retained("compute(a, b)", "compute(a)") == 10, "partly deleted"
    assert retained("compute(a, b)", "compute(a, bb, c)") == 13, "inserted into: all still there"
    assert retained("compute(a, b)", "") == 0, "deleted"
    assert retained("'😀' + x", "'😀'") == 4, "the emoji counts two units"
    assert utf16_prefix("a😀b", 2) == "a", "half a surrogate pair is not taken"
    assert utf16_prefix("a😀b", 3) == "a😀"


def test_retain_after_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RETAIN_AFTER_ENV, raising=False)
    assert retain_after_s() == 30.0
    monkeypatch.setenv(RETAIN_AFTER_ENV, "0.5")
    assert retain_after_s() == 0.5
    monkeypatch.setenv(RETAIN_AFTER_ENV, "soon")
    assert retain_after_s() == 30.0


# -- the tracker --------------------------------------------------------------------


def accept_whole(ed: Editor, text: str = "compute(a, b)") -> int:
    """Show ``text`` at the end of line 3, insert it, accept it; return its start."""
    ed.shown.shown(ed.offer("r1", text))
    start = ed.offset(LINE, len(BEFORE))
    ed.edit(start, start, text)
    assert ed.shown.accepted("r1")
    return start


def test_kept_text_is_all_retained_after_30_s() -> None:
    ed = Editor()
    accept_whole(ed)
    ed.clock.now += 29.0
    assert ed.shown.measure_due() == 0, "not yet"
    assert ed.shown.next_due() == pytest.approx(1.0)
    ed.clock.now += 1.0
    assert ed.shown.measure_due() == 1
    [rec] = ed.of(RetainedRecord)
    assert (rec.item, rec.measured, rec.accepted_chars, rec.retained_chars) == (
        "r1",
        "on_time",
        13,
        13,
    )
    assert rec.after_s == 30.0 and (rec.trigger, rec.model) == ("automatic", "m.gguf")
    assert ed.shown.next_due() is None and ed.shown.measure_due() == 0, "measured once"


def test_edits_before_and_after_shift_the_span_and_do_not_count() -> None:
    ed = Editor()
    start = accept_whole(ed)
    ed.edit(0, 0, "import sys\n")  # a line above: the span moves down
    ed.edit(0, 6, "")  # "import" deleted above it
    end = ed.offset(LINE + 1, len(BEFORE) + 13)
    ed.edit(end, end, "  # compute(a, b)")  # after it, the same text: not the accepted one
    ed.edit(ed.offset(LINE + 1, 0), ed.offset(LINE + 1, 0), "")  # an empty edit
    assert ed.docs[URI].line(LINE + 1) == "    x = compute(a, b)  # compute(a, b)"
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert rec.retained_chars == 13
    assert start > 0


def test_partly_edited_text_is_partly_retained() -> None:
    ed = Editor()
    start = accept_whole(ed)
    ed.edit(start + 9, start + 12, "")  # "compute(a, b)" -> "compute(a)"
    ed.edit(start + 8, start + 9, "left")  # -> "compute(left)"
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert ed.docs[URI].line(LINE) == "    x = compute(left)"
    assert rec.retained_chars == len("compute(") + len(")") == 9


def test_deleted_text_is_not_retained_even_if_retyped_elsewhere() -> None:
    ed = Editor()
    start = accept_whole(ed)
    ed.edit(start, start + 13, "")
    ed.edit(start, start, "other()")  # typed at the same place: not the accepted text
    ed.edit(0, 0, "compute(a, b)\n")
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert rec.retained_chars == 0


def test_a_formatter_rewriting_the_whole_document_keeps_it() -> None:
    ed = Editor()
    accept_whole(ed)
    doc = ed.docs[URI]
    new = doc.text.replace("import os", "import os  # formatted").replace("return x", "return (x)")
    ed.edit(0, len(doc.text), new)  # one edit over everything, as full sync sends
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert rec.retained_chars == 13


def test_partial_accepts_extend_the_span_and_restart_the_clock() -> None:
    ed = Editor()
    ed.shown.shown(ed.offer("r1", "compute(a, b)"))
    start = ed.offset(LINE, len(BEFORE))
    ed.edit(start, start, "compute")
    assert ed.shown.partially_accepted("r1", 7)
    ed.clock.now += 20
    ed.edit(start + 7, start + 7, "(a")
    assert ed.shown.partially_accepted("r1", 9)
    ed.edit(start + 9, start + 9, "))")  # typed over the rest: the suggestion ends
    [shown] = ed.of(ShownRecord)
    assert (shown.outcome, shown.accepted_chars) == ("typed_over", 9)
    ed.clock.now += 20
    assert ed.shown.measure_due() == 0, "30 s after the last accept, not the first"
    ed.edit(start, start + 7, "calc")  # the first word renamed
    ed.clock.now += 10
    assert ed.shown.measure_due() == 1
    [rec] = ed.of(RetainedRecord)
    # "compute(a" -> "calc(a": "(a" kept and, of "compute", the "c" that "calc" starts with
    assert (rec.accepted_chars, rec.retained_chars) == (9, 3)


def test_typed_through_characters_are_in_the_span() -> None:
    ed = Editor()
    ed.shown.shown(ed.offer("r1", "compute(a, b)"))
    start = ed.offset(LINE, len(BEFORE))
    ed.edit(start, start, "com")  # typed through
    ed.shown.shown(ed.offer("r2", "pute(a, b)", before=BEFORE + "com"))
    ed.edit(start + 3, start + 3, "pute(a, b)")
    ed.shown.accepted("r2")
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert (rec.item, rec.accepted_chars, rec.retained_chars) == ("r1", 13, 13)


def test_closed_document_is_measured_early_and_text_not_found_is_not_measured() -> None:
    ed = Editor()
    accept_whole(ed)
    ed.clock.now += 5
    ed.shown.closed(URI)
    [rec] = ed.of(RetainedRecord)
    assert (rec.measured, rec.retained_chars, rec.after_s) == ("early", 13, 5.0)

    ed = Editor()
    ed.shown.shown(ed.offer("r1", "compute(a, b)"))
    ed.shown.accepted("r1")  # the client put nothing in: nothing to follow
    ed.shown.close()
    [rec] = ed.of(RetainedRecord)
    assert (rec.measured, rec.retained_chars) == ("none", None)


def test_session_end_measures_early() -> None:
    ed = Editor()
    accept_whole(ed)
    ed.shown.close()
    [rec] = ed.of(RetainedRecord)
    assert (rec.measured, rec.retained_chars) == ("early", 13)


def test_without_documents_nothing_is_measured() -> None:
    written: list[TelemetryEvent] = []
    shown = ShownSuggestions(written.append)
    shown.offer(
        OfferedItem(
            item="r1",
            request_id="r1",
            uri=URI,
            line=0,
            column=0,
            before="",
            text="x",
            trigger="automatic",
            model="m",
        )
    )
    shown.accepted("r1")
    shown.close()
    assert [type(w) for w in written] == [ShownRecord]


# -- quiet keys ---------------------------------------------------------------------


def test_quiet_keys_are_changes_with_nothing_shown_before_the_next() -> None:
    ed = Editor()
    at = ed.offset(LINE, len(BEFORE))
    ed.edit(at, at, "z")  # before the client asked inline completions: not a key
    ed.shown.asked(URI)
    ed.edit(at + 1, at + 1, "z")  # key 1: a suggestion shows after it
    ed.shown.shown(ed.offer("r1", "ip(a, b)", before=BEFORE + "zz"))
    ed.edit(at + 2, at + 2, "i")  # key 2: typed through, the rest still shows
    ed.edit(at + 3, at + 3, "x")  # key 3: typed over, nothing shows after it: quiet
    ed.edit(at + 4, at + 4, "y")  # key 4: a suggestion shows after it
    ed.shown.shown(ed.offer("r2", "(1)", before=BEFORE + "zzixy"))
    ed.edit(at + 5, at + 5, "(1)")  # the accept's own change: not a key
    ed.shown.accepted("r2")
    ed.edit(at + 8, at + 8, ";")  # key 5, counted when the document closes: quiet
    ed.shown.closed(URI)
    ed.edit(at + 9, at + 9, ";")  # closed: no longer a key
    ed.shown.close()
    [keys] = ed.of(KeysRecord)
    assert (keys.keys, keys.quiet) == (5, 2)


def test_keys_are_written_in_batches() -> None:
    ed = Editor()
    ed.shown.asked(URI)
    for _ in range(KEYS_FLUSH + 1):
        ed.edit(0, 0, "#")
    [keys] = ed.of(KeysRecord)
    assert (keys.keys, keys.quiet) == (KEYS_FLUSH, KEYS_FLUSH)
    ed.shown.close()
    assert [(k.keys, k.quiet) for k in ed.of(KeysRecord)] == [(KEYS_FLUSH, KEYS_FLUSH), (1, 1)]


# -- the log and the stats ----------------------------------------------------------


def write_log(path: Path) -> None:
    log = MetricsLog(path)
    for name, trigger, accepted in (
        ("a", "automatic", 10),
        ("b", "explicit", 20),
        ("c", "automatic", 0),
    ):
        log.record_shown(
            ShownRecord(
                item=name,
                request_id=name,
                trigger=trigger,
                model="m.gguf",
                outcome="accepted" if accepted else "dismissed",
                shown_chars=max(accepted, 5),
                accepted_chars=accepted,
            )
        )
    log.record_shown(
        RetainedRecord(
            item="a", trigger="automatic", model="m.gguf", accepted_chars=10, retained_chars=9
        )
    )
    log.record_shown(  # measured twice (a late accept): the last one counts
        RetainedRecord(
            item="b", trigger="explicit", model="m.gguf", accepted_chars=20, retained_chars=1
        )
    )
    log.record_shown(
        RetainedRecord(
            item="b", trigger="explicit", model="m.gguf", accepted_chars=20, retained_chars=11
        )
    )
    log.record_shown(
        RetainedRecord(
            item="d",
            trigger="automatic",
            model="m.gguf",
            measured="early",
            accepted_chars=7,
            retained_chars=7,
        )
    )
    log.record_shown(
        RetainedRecord(
            item="e", trigger="automatic", model="m.gguf", measured="none", accepted_chars=3
        )
    )
    log.record_shown(KeysRecord(keys=40, quiet=30))
    log.record_shown(KeysRecord(keys=10, quiet=0))
    log.close()


def test_stats_of_retained_characters_and_quiet_keys(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write_log(path)
    outcomes = read_outcomes(path)
    assert len(outcomes.shown) == 3 and len(outcomes.retained) == 4 and len(outcomes.keys) == 2
    stats = compute_stats([], outcomes.shown, outcomes.retained, outcomes.keys)["shown"]
    assert stats["acceptance"] == round(2 / 3, 4), "acceptance per shown suggestion"
    assert stats["accepted_chars"] == 30
    assert stats["retained_chars"] == 20, "on time only: 9 + 11 (the early 7 apart)"
    assert stats["retained_share"] == round(20 / 30, 4)
    assert (stats["retention_measured"], stats["retention_early"]) == (2, 1)
    assert stats["retention_unmeasured"] == 1
    assert (stats["keys"], stats["quiet_keys"], stats["quiet_rate"]) == (50, 30, 0.6)
    auto = stats["by_trigger"]["automatic"]
    assert (auto["accepted_chars"], auto["retained_chars"], auto["retained_share"]) == (10, 9, 0.9)
    assert stats["by_trigger"]["explicit"]["retained_share"] == 0.55
    table = format_stats(compute_stats([], outcomes.shown, outcomes.retained, outcomes.keys))
    rows = {line.split("  ")[0]: line.split() for line in table.splitlines()}
    assert rows["chars accepted"][-4:] == ["30", "10", "20", "30"]
    assert rows["chars retained (30 s)"][-4:] == ["20", "9", "11", "20"]
    assert rows["retained share"][-4:] == ["66.7%", "90.0%", "55.0%", "66.7%"]
    assert rows["quiet keys"][-4:] == ["60.0%", "-", "-", "-"]


def test_no_retention_measured_is_none_not_zero() -> None:
    stats = compute_stats([], [ShownRecord(outcome="dismissed")])["shown"]
    assert stats["retained_chars"] is None and stats["retained_share"] is None
    assert stats["quiet_rate"] is None and stats["accepted_chars"] == 0


def test_cli_prints_retained_characters(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    write_log(path)
    cmd = [sys.executable, "-m", "lsp_assist.cli.main", "stats", "--metrics", str(path)]
    table = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=True).stdout
    assert "chars retained (30 s)" in table and "66.7%" in table and "quiet keys" in table
    out = subprocess.run([*cmd, "--json"], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout)["shown"]["retained_chars"] == 20


def test_text_that_comes_after_the_accept_is_found_at_the_next_change() -> None:
    ed = Editor()
    ed.shown.shown(ed.offer("r1", "compute(a, b)"))
    ed.shown.accepted("r1")  # a client that sends the accept first, the change later
    start = ed.offset(LINE, len(BEFORE))
    ed.edit(start, start, "compute(a, b)")
    ed.edit(start + 12, start + 13, "")  # the ")" deleted
    ed.clock.now += 30
    ed.shown.measure_due()
    [rec] = ed.of(RetainedRecord)
    assert (rec.measured, rec.retained_chars) == ("on_time", 12)
