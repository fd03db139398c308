"""The Neovim plugin keeps the records only tests read behind one switch.

nvim_records.lua sets the plugin up as a user does (no ``debug_records``) against
nvim_fake_server.lua, shows a suggestion, gets a suggestionReady notice and accepts it:
the plugin works (the ghost, the inserted text, the server told of the show and the
acceptance) and its records (records.lua) keep none of what the headless drivers turn
on with ``setup({ debug_records = true })``; its state (state.lua) holds no record.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .support.nvim import needs_nvim, run_script

pytestmark = [pytest.mark.editor, needs_nvim]


def test_nvim_keeps_no_test_records_by_default(tmp_path: Path) -> None:
    report = run_script("nvim_records.lua", tmp_path, timeout=60)
    assert report["error"] is None, report["error"]
    # The plugin worked: asked, showed, inserted, told the server.
    assert report["ghost"] == "total([1]))", report
    assert report["line"].endswith("total([1]))"), report
    received = report["received"]
    assert received["inline"] >= 1 and received["shown"] >= 1 and received["accepted"] == 1
    # ... and kept none of the records.
    assert report["kept"] == {
        "requests": 0,
        "responses": 0,
        "last_request": None,
        "last_response": None,
        "history": 0,
        "accepted": 0,
        "telemetry": 0,
        "ready": 0,
        "refreshes": 0,
        "typed_answers": 0,
        "cursor_reports": 0,
        "errors": 0,
        "next_edit_requests": 0,
        "next_edit_count": 0,
    }, report
    # The records are records.lua's: none is a field of the state, even after a session.
    records = set(report["kept"]) - {"next_edit_requests", "next_edit_count"}
    records |= {"partial", "typed_through"}  # kept too, not reported above
    assert len(records) == 14 and records.isdisjoint(report["state_fields"]), report
