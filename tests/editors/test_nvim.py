"""Neovim 0.11 with editors/nvim: headless against the real server and a fake, and in tmux.

nvim_init.lua drives the real ``lsp-assist serve`` the way a user does (open main.py,
insert mode, type, accept a word and the rest, ask with <C-o>:LspAssistComplete, cycle
the server's alternatives with <M-\\> <M-]> <M-[>, explain, status) and writes what it
saw as JSON; the second test forces the textDocument/completion fallback. nvim_keys.lua
drives every key, command and status state against nvim_fake_server.lua (an in-process
LSP server with fixed answers), so the exact text each key inserts is known. The tmux
test types those keys into a real terminal (no termguicolors) and reads the screen with
its colours. The health test runs :checkhealth lsp-assist with the real executable and
with a missing one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .support.nvim import HERE, NO_NVIM, NVIM, headless, needs_nvim, next_word, run_script, status
from .support.project import CURSOR_LINE, EARLY_SETTINGS, EDITORS, MAIN, REPO, SETTINGS
from .support.tmux import SGR, TMUX, Screen, foregrounds

pytestmark = [pytest.mark.editor]

LAST_LINE = MAIN.splitlines()[CURSOR_LINE - 1]
# What nvim_keys.lua's fake server suggests (Automatic requests get only the first).
ITEMS = ["1, 2))\n    print(total([3]))", "total([1]))", "scale([2], 2)[0])"]

EARLY_TYPED = "1, "


def run_nvim(
    workspace: Path,
    server: str,
    env: dict[str, str],
    out: Path,
    typed: str,
    method: str = "auto",
    script: str = "nvim_init.lua",
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run ``script`` (tests/editors) headless at the end of main.py's CURSOR_LINE."""
    assert NVIM is not None
    env = dict(env)
    env.update(
        LSP_ASSIST_TEST_PLUGIN=str(EDITORS / "nvim"),
        LSP_ASSIST_TEST_SERVER=server,
        LSP_ASSIST_TEST_FILE=str(workspace / "main.py"),
        LSP_ASSIST_TEST_LINE=str(CURSOR_LINE),
        LSP_ASSIST_TEST_TYPE=typed,
        LSP_ASSIST_TEST_SETTINGS=json.dumps(SETTINGS if settings is None else settings),
        LSP_ASSIST_TEST_OUT=str(out),
        LSP_ASSIST_TEST_TIMEOUT_MS="120000",
        LSP_ASSIST_TEST_METHOD=method,
    )
    proc = headless(["-u", str(HERE / script)], workspace, env)
    assert out.exists(), (
        f"nvim wrote no report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    report: dict[str, Any] = json.loads(out.read_text())
    report["_stderr"] = proc.stderr
    return report


@needs_nvim
@pytest.mark.slow
def test_nvim_plugin_gets_inline_completion(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_nvim(workspace, server_command, server_env, tmp_path / "nvim.json", "1, ")
    context = json.dumps({k: v for k, v in report.items() if k != "buffer"}, indent=1)[:5000]

    assert not report["timeout"] and report.get("lua_error") is None, context
    assert report["nvim"].startswith("0.1"), context
    # The client started the server, initialized, and attached to the buffer.
    assert report["setup"] and report["attached"], context
    assert report["lsp_clients"] == 1 and report["client_initialized"], context
    (client,) = report["clients"]
    assert client["name"] == "lsp_assist"
    assert client["inline"], "server did not advertise inlineCompletionProvider"
    assert "lspAssist.accept" in client["commands"], context

    # Entering insert mode asked at the end of the line before anything was typed.
    enter = report["insert_enter_request"]
    assert enter["method"] == "textDocument/inlineCompletion"
    assert enter["params"]["context"]["triggerKind"] == 2 and not enter["invoked"]
    assert enter["params"]["position"] == {"line": CURSOR_LINE - 1, "character": len(LAST_LINE)}
    # Typing made the plugin ask again (autocmd + debounce, not a direct call).
    assert report["typed_request"], context
    request = report["last_request"]
    assert request["method"] == "textDocument/inlineCompletion"
    assert request["params"]["position"]["line"] == CURSOR_LINE - 1

    # Every answer was a result, never a protocol error, shaped as an InlineCompletionList.
    assert report["responses"], context
    for response in report["responses"]:
        assert response["method"] == "textDocument/inlineCompletion"
        assert response.get("err") is None, context
    assert all(not entry["err"] for entry in report["history"]), context
    last = report["last_response"]
    result = last["result"]
    items = result["items"] if isinstance(result, dict) else result
    assert isinstance(items, list), context
    for item in items:
        assert isinstance(item["insertText"], str | dict)
        assert item["command"]["command"] == "lspAssist.accept"
    assert report["errors"] == [], context

    # The model suggested something: <M-Right> inserted its first word and left the rest
    # on screen; <Tab> inserted the rest and the server counted the acceptance.
    ghost = report.get("ghost_text")
    assert ghost, f"no suggestion after {report['trigger_attempts']} explicit asks\n{context}"
    word = next_word(ghost)
    typed_line = LAST_LINE + "1, "
    keyed = {k: report.get(k) for k in ("ghost_text", "ghost_at_key", "line_at_key", "after_word")}
    assert report["ghost_at_key"] == ghost and report["line_at_key"] == typed_line, keyed
    assert report["after_word"]["line"] == typed_line + word, keyed
    rest = ghost[len(word) :]
    assert report["after_word"]["ghost"] == (rest if rest else None), keyed
    (accepted,) = report["accepted"]
    assert accepted["inserted"] == ghost
    assert report["accept_line"] == typed_line + ghost.split("\n")[0]
    assert accepted["command"]["command"] == "lspAssist.accept"
    assert accepted["response"].get("err") is None, context
    assert accepted["response"]["result"]["accepted"] is True, context

    # <C-o>:LspAssistComplete asked explicitly and its answer was not dropped as stale.
    invoked = [entry for entry in report["ctrl_o"] if entry["invoked"]]
    assert invoked and not invoked[0]["stale"] and not invoked[0]["err"], context
    assert report["ctrl_o_ghost"] == (invoked[0]["items"] > 0), context
    # Back where the first suggestion showed, an explicit ask gets the server's
    # alternatives (docs/serving.md): <M-]> shows the second item, <M-[> the first again.
    cycle = report["cycle"]
    assert cycle["errors"] == 0, context
    items = cycle["items"]
    assert 2 <= len(items) <= 3 and len(set(items)) == len(items), context
    assert cycle["first"] == {"index": 1, "count": len(items), "text": items[0]}, context
    assert cycle["second"] == {"index": 2, "count": len(items), "text": items[1]}, context
    assert cycle["back"]["index"] == 1 and cycle["back"]["text"] == items[0], context
    assert cycle["line"] == report["typed_line"] == typed_line, context  # nothing inserted

    # The statusline said loading while the model loaded, then ready with a latency.
    lines = report["statuslines"]
    first_loading = next(i for i, t in enumerate(lines) if t.startswith("lsp-assist: loading"))
    first_ready = next(i for i, t in enumerate(lines) if t.startswith("lsp-assist: ready"))
    assert first_loading < first_ready, lines
    # The server's $/progress for the model load (lsp-assist/model) reached the statusline,
    # alone or beside the indexing progress (the two run at once).
    assert any(re.match(r"lsp-assist: loading \(.*loading model", t) for t in lines), lines
    assert re.fullmatch(r"lsp-assist: ready \d+ ms", lines[-1]), lines
    assert report["final_status"]["state"] == "ready", context

    # The plugin's commands go through workspace/executeCommand.
    assert report["status"].get("err") is None, context
    assert report["status"]["result"]["initialized"] is True
    assert report["explain"].get("err") is None, context
    assert report["explain"]["has_text"], context


@needs_nvim
@pytest.mark.slow
def test_nvim_plugin_completion_fallback(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_nvim(
        workspace, server_command, server_env, tmp_path / "nvim.json", "1, ", "completion"
    )
    context = json.dumps({k: v for k, v in report.items() if k != "buffer"}, indent=1)[:4000]

    assert not report["timeout"] and report.get("lua_error") is None, context
    assert report["attached"] and report["client_initialized"], context
    assert report["typed_request"], context
    assert report["last_request"]["method"] == "textDocument/completion"
    assert report["responses"], context
    for response in report["responses"]:
        assert response["method"] == "textDocument/completion"
        assert response.get("err") is None, context
    result = report["last_response"]["result"]
    items = result["items"] if isinstance(result, dict) else result
    assert isinstance(items, list), context
    for item in items:
        assert item["label"]
        assert item["textEdit"]["range"]["start"]["line"] == CURSOR_LINE - 1
        assert item["command"]["command"] == "lspAssist.accept"
    assert report["errors"] == [], context
    # The item's textEdit showed as ghost text; <Tab> inserted it and reported it.
    if report.get("ghost_text"):
        accepted = report["accepted"][0]
        assert accepted["inserted"] == report["ghost_text"]
        assert report["ghost_text"].split("\n")[0] in report["accept_line"]
        assert accepted["response"]["result"]["accepted"] is True, context


@needs_nvim
@pytest.mark.slow
def test_nvim_early_answer_then_the_whole_suggestion(
    workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    """answerAfterMs 1: the ghost shows the start, then (suggestionReady) the whole."""
    report = run_nvim(
        workspace,
        server_command,
        server_env,
        tmp_path / "early.json",
        EARLY_TYPED,
        script="nvim_early.lua",
        settings=EARLY_SETTINGS,
    )
    context = json.dumps(report, indent=1)[:6000]
    assert not report["timeout"] and report.get("lua_error") is None, context
    assert report["errors"] == [], context
    assert report["sent_experimental"] == {"lspAssistSuggestionReady": True}, context
    assert report["ready"], context
    attempt = report["attempts"][-1]
    assert attempt.get("noticed"), f"no lspAssist/suggestionReady after an early answer\n{context}"
    notice = report["notices"][-1]
    assert notice["uri"] == (workspace / "main.py").as_uri(), context
    assert notice["position"]["line"] == CURSOR_LINE - 1, context
    # The plugin asked again and the longer text replaced the start on screen; the
    # start is where it begins (post-processing may trim a trailing blank of the start).
    assert notice["action"] == "refresh" and attempt["refreshed"], context
    first, after = attempt["first"], attempt["after"]
    assert isinstance(first, str) and isinstance(after, str), context
    assert len(after) > len(first) and after.startswith(first.rstrip()), context
    assert attempt["refresh"] == {
        "before": first,
        "after": after,
        "same": False,
        "ms": attempt["refresh"]["ms"],
    }, context
    assert attempt["line_after"] == attempt["line"], context  # shown, nothing inserted
    # That answer came from the server's type-through cache, not the model.
    last = report["status"]["last"]
    assert last["cache_hit"] is True and last["text"] == after, context
    assert report["status"]["typethrough"]["hits"] >= 1, context


# The keys, commands and status against the fake server ---------------------------------


@pytest.fixture(scope="module")
def keys_report(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Run nvim_keys.lua once; every test below reads a part of its report."""
    if NVIM is None:
        pytest.skip(NO_NVIM)
    report = run_script("nvim_keys.lua", tmp_path_factory.mktemp("nvim-keys"))
    assert report["errors"] == [], report["errors"]
    assert report["checks"]["attached"] is True, report
    return report


def checks(report: dict[str, Any], *sections: str) -> dict[str, Any]:
    """The report's checks, after asserting the named sections ran without a Lua error."""
    errors = {name: report["section_errors"].get(name) for name in sections}
    assert all(error is None for error in errors.values()), errors
    assert report["plugin_errors"] == [], report["plugin_errors"]
    result: dict[str, Any] = report["checks"]
    return result


def test_nvim_ghost_highlight_has_cterm_colour(keys_report: dict[str, Any]) -> None:
    """LspAssistGhost has a 256-colour grey as well as a GUI one, and stays overridable."""
    assert keys_report["checks"]["highlight"] == {"ctermfg": 244, "fg": 0x808080}
    c = checks(keys_report, "highlight")
    assert c["highlight_user"] == {"ctermfg": 1, "fg": 0xFF0000}  # default = true
    assert c["highlight_after_colorscheme"] == {"ctermfg": 244, "fg": 0x808080}


def test_nvim_complete_command_shows_its_answer(keys_report: dict[str, Any]) -> None:
    """:LspAssistComplete after <C-o> and from normal mode shows the answer (not stale)."""
    c = checks(keys_report, "ctrl_o", "normal_complete")
    ctrl_o = c["ctrl_o_complete"]
    assert ctrl_o["character"] == ctrl_o["line_length"], ctrl_o  # asked at the cursor
    assert ctrl_o["last_stale"] is False, ctrl_o
    assert ctrl_o["ghost"] == ITEMS[0] and ctrl_o["mode"] == "i", ctrl_o
    assert [(a["invoked"], a["stale"], a["items"]) for a in ctrl_o["invoked"]] == [(True, False, 3)]
    normal = c["normal_complete"]
    assert normal["mode"] == "i" and normal["ghost"] == ITEMS[0], normal
    # Like `a`: asked after the last character of the line.
    assert normal["character"] == normal["line_length"], normal
    assert [a["invoked"] for a in normal["invoked"]] == [True]


def test_nvim_missing_server_is_reported_at_setup(keys_report: dict[str, Any]) -> None:
    """A cmd that is not executable: an ERROR notification naming the fix, no server."""
    bad = checks(keys_report, "bad_cmd")["bad_cmd"]
    errors = [n["msg"] for n in bad["notes"] if n["level"] == bad["error_level"]]
    assert len(errors) == 1, bad
    assert bad.get("setup") is False, bad
    assert "/nonexistent/bin/lsp-assist" in errors[0] and "not executable" in errors[0]
    assert ".venv/bin/lsp-assist" in errors[0] and "PATH" in errors[0], errors[0]
    assert bad["status"]["state"] == "error"


def test_nvim_accept_word_line_and_all(keys_report: dict[str, Any]) -> None:
    """<M-Right> a word, <M-C-Right> a line; the acceptance is reported once, when whole."""
    c = checks(keys_report, "insert_enter", "accept_parts")
    base = LAST_LINE
    assert c["word1"] == {"line": base + "1", "ghost": ", 2))\n    print(total([3]))"}
    assert c["word2"] == {"line": base + "1, 2", "ghost": "))\n    print(total([3]))"}
    rest = "\n    print(total([3]))"
    assert c["line1"] == {"line": base + "1, 2))", "ghost": rest, "accepted": 0}
    line2 = c["line2"]
    assert line2["lines"] == [base + "1, 2))", "    print(total([3]))"], line2
    assert line2["inserted"] == ITEMS[0]
    assert line2["fake_accepted"] == ["req-1"], line2


def test_nvim_trigger_dismiss_and_insert_triggers(keys_report: dict[str, Any]) -> None:
    """<M-\\> asks (Invoked), <C-]> dismisses; InsertEnter and CursorMovedI ask too."""
    c = checks(keys_report, "insert_enter", "trigger_dismiss", "cursor_moved")
    assert c["insert_enter"] == {"ghost": ITEMS[0], "requests": 1, "kind": 2}
    assert c["trigger"] == {"ghost": ITEMS[0], "requests": 1, "kind": 1}
    assert c["dismiss"]["ghost"] is None and c["dismiss"]["unchanged"], c["dismiss"]
    moved = c["cursor_moved"]
    assert moved["requests"] >= 1 and moved["character"] == moved["col"] - 1, moved


def test_nvim_cycle_alternatives(keys_report: dict[str, Any]) -> None:
    """<M-]>/<M-[> go through the items of an answer; Tab accepts the one shown."""
    c = checks(keys_report, "cycle", "cycle_after_auto")
    seen = c["cycle"]
    assert seen[0] == {"index": 1, "count": 3}
    assert [s["index"] for s in seen[1:]] == [2, 3, 1, 3]
    assert [s["text"] for s in seen[1:]] == [ITEMS[1], ITEMS[2], ITEMS[0], ITEMS[2]]
    assert seen[1]["status"].endswith(" 2/3"), seen[1]
    assert c["cycle_accept"]["argument"] == "req-3"
    assert c["cycle_accept"]["line"].endswith(ITEMS[2])
    # After an Automatic answer (one item) <M-]> asks again, explicitly, and moves on.
    assert c["auto_count"] == 1
    after = c["cycle_after_auto"]
    assert after == {"requests": 1, "kind": 1, "ghost": ITEMS[1], "index": 2}, after


def test_nvim_enable_disable(keys_report: dict[str, Any]) -> None:
    """:LspAssistDisable [ft], :LspAssistEnable [ft], :LspAssistToggle (buffer)."""
    c = checks(keys_report, "enable_disable")
    for name in ("disabled_ft", "disabled_all", "disabled_buffer"):
        assert c[name] == {"requests": 0, "ghost": None, "status": "lsp-assist: off"}, name
    for name in ("enabled_ft", "enabled_buffer"):
        assert c[name]["requests"] == 1 and c[name]["ghost"] == ITEMS[0], name
        assert c[name]["status"].startswith("lsp-assist: ready"), name


def test_nvim_statusline_states(keys_report: dict[str, Any]) -> None:
    """statusline(): loading/ready from lspAssist.status and $/progress, thinking, latency."""
    c = checks(keys_report, "status", "insert_enter", "thinking")
    assert c["status_polled_loading"] is True and c["status_polled_ready"] is True
    assert c["status_progress_loading"] == "lsp-assist: loading (loading model 10%)"
    assert c["status_progress_ready"] == "lsp-assist: ready"
    assert re.fullmatch(r"lsp-assist: ready \d+ ms", c["statusline_latency"])
    assert c["thinking"] == "lsp-assist: thinking"
    latency = re.fullmatch(r"lsp-assist: ready (\d+) ms 1/3", c["after_thinking"])
    assert latency and int(latency.group(1)) >= 400, c["after_thinking"]


def test_nvim_suggestion_ready_refreshes_the_ghost(keys_report: dict[str, Any]) -> None:
    """lspAssist/suggestionReady: opt-in sent; the shown start is replaced, once, in place."""
    c = checks(keys_report, "suggestion_ready")
    assert c["ready_capability"] == {"lspAssistSuggestionReady": True}
    refresh = c["ready_refresh"]
    assert refresh["first"] == {"ghost": "1, ", "requests": 1, "kind": 2}, refresh
    # The notice asked again at the cursor, Automatic (the server's cache answers those),
    # and the longer text replaced the start.
    longer = refresh["longer"]
    assert longer["action"] == "refresh" and longer["requests"] == 1 and longer["kind"] == 2
    assert longer["ghost"] == "1, 2))", longer
    assert longer["refresh"]["before"] == "1, " and longer["refresh"]["same"] is False
    # The same text again: asked, but not redrawn (the extmark is the same one).
    same = refresh["same"]
    assert same["ghost"] == "1, 2))" and same["refresh"]["same"] is True, same
    assert same["extmark"] == longer["extmark"], (same, longer)
    # After typing a character of the suggestion, a notice for the request's place
    # (left of the cursor now) still applies.
    typed = c["ready_after_typing"]
    assert typed["action"] == "refresh" and typed["ghost"] == ", 2))", typed
    assert typed["refresh"]["before"] == ", 2", typed
    ignored = c["ready_ignored"]
    reasons = {
        "other_buffer": "not the current buffer",
        "malformed": "malformed",
        "in_flight": "a request is in flight",
        "dismissed": "no suggestion shown",
        "normal_mode": "not in insert mode",
    }
    for name, reason in reasons.items():
        entry = ignored[name]
        assert entry["action"] == reason and entry["requests"] == 0, (name, entry)
        assert entry["refresh"] is None, (name, entry)
    # Ignoring leaves what shows alone: nothing came back after the dismiss.
    assert ignored["dismissed"]["ghost"] is None
    assert ignored["other_buffer"]["ghost"] == ", 2))"


# In a terminal: tmux without termguicolors --------------------------------------------


def start_tmux_nvim(tmp_path: Path, *env: str) -> Screen:
    """nvim_keys.lua in interactive mode in tmux (TERM=tmux-256color, no termguicolors),
    with the extra `NAME=value` environment of `env` (the fake server's options)."""
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    (tmp_path / "main.py").write_text(MAIN)
    command = " ".join(
        [
            "env",
            f"LSP_ASSIST_TEST_PLUGIN={EDITORS / 'nvim'}",
            f"LSP_ASSIST_TEST_FILE={tmp_path / 'main.py'}",
            "LSP_ASSIST_TEST_INTERACTIVE=1",
            *env,
            str(NVIM),
            "--clean",
            "-u",
            str(HERE / "nvim_keys.lua"),
        ]
    )
    return Screen(command, tmp_path, rows=20)


@pytest.fixture
def tmux_nvim(tmp_path: Path) -> Iterator[Screen]:
    """nvim_keys.lua in interactive mode in tmux."""
    tmux = start_tmux_nvim(tmp_path)
    try:
        yield tmux
    finally:
        tmux.close()


def cursor_line(lines: list[str]) -> str:
    """The screen line that holds the last line of main.py."""
    return next(line for line in lines if "print(add(" in SGR.sub("", line))


def test_nvim_in_tmux_ghost_is_coloured_and_keys_work(tmux_nvim: Screen) -> None:
    """What a user sees: grey ghost text in a 256-colour terminal; the keys as typed."""
    tmux = tmux_nvim
    tmux.wait_for(lambda lines: any("lsp-assist: ready" in line for line in lines))
    tmux.send("A")
    first = ITEMS[0].split("\n")[0]
    tmux.wait_for(lambda lines: cursor_line(lines).endswith(LAST_LINE + first))

    def colours() -> tuple[set[str | None], set[str | None]]:
        """Foregrounds of the typed code "(add(" and of the ghost after it."""
        chars = foregrounds(cursor_line(tmux.screen(colours=True)))
        text = "".join(ch for ch, _ in chars)
        start = text.index("print(add(") + len("print(")
        code = {fg for _, fg in chars[start : start + 4]}
        ghost = {fg for _, fg in chars[len(LAST_LINE) :]}
        return code, ghost

    code, ghost = colours()
    assert ghost == {"38;5;244"}, (code, ghost)
    assert code.isdisjoint(ghost), (code, ghost)

    tmux.send("M-Right")  # accept a word: "1" becomes text, the rest stays grey
    time.sleep(0.3)
    chars = foregrounds(cursor_line(tmux.screen(colours=True)))
    assert chars[len(LAST_LINE)][0] == "1" and chars[len(LAST_LINE)][1] != "38;5;244"
    assert {fg for _, fg in chars[len(LAST_LINE) + 1 :]} == {"38;5;244"}

    tmux.send("C-]")  # dismiss
    tmux.wait_for(lambda lines: cursor_line(lines).rstrip() == LAST_LINE + "1")
    tmux.send("M-\\")  # ask: three items
    tmux.wait_for(lambda lines: any("1/3" in line for line in lines))
    tmux.send("M-]")  # the second
    tmux.wait_for(lambda lines: cursor_line(lines).rstrip() == LAST_LINE + "1" + ITEMS[1])
    tmux.send("Tab")  # accept it: all of it is text now
    time.sleep(0.3)
    chars = foregrounds(cursor_line(tmux.screen(colours=True)))
    accepted = len(LAST_LINE + "1" + ITEMS[1])
    assert "".join(ch for ch, _ in chars[:accepted]) == LAST_LINE + "1" + ITEMS[1], chars
    # (A new automatic suggestion may show after it, grey.)
    assert "38;5;244" not in {fg for _, fg in chars[:accepted]}, chars


def test_nvim_in_tmux_typing_through_keeps_the_ghost(tmp_path: Path) -> None:
    """Typing the ghost's next characters keeps the rest on screen: the screen, sampled
    every ~20 ms while typing at ~7 characters a second, shows the ghost in every
    sample after the first. The fake server answers in 80 ms, as the real one's
    type-through cache did (64-105 ms), with the rest of the suggestion."""
    tmux = start_tmux_nvim(
        tmp_path, "LSP_ASSIST_TEST_FAKE_DELAY_MS=80", "LSP_ASSIST_TEST_FAKE_TYPETHROUGH=1"
    )
    try:
        tmux.wait_for(lambda lines: any("lsp-assist: ready" in line for line in lines))
        tmux.send("A")
        first = ITEMS[0].split("\n")[0]  # "1, 2))"
        tmux.wait_for(lambda lines: cursor_line(lines).endswith(LAST_LINE + first))

        def ghost() -> str:
            """The grey text on the cursor's line."""
            chars = foregrounds(cursor_line(tmux.screen(colours=True)))
            return "".join(ch for ch, fg in chars if fg == "38;5;244")

        samples: list[tuple[str, str]] = []
        typed = first[:-1]  # all but the last character: some ghost always remains
        for char in typed:
            tmux.send("-l", char)
            until = time.monotonic() + 0.15
            while time.monotonic() < until:
                samples.append((char, ghost()))
                time.sleep(0.02)
        # Then the ghost settles as the rest of the suggestion after the typed text.
        lines = tmux.wait_for(
            lambda lines: cursor_line(lines).rstrip() == LAST_LINE + first, timeout=10
        )
        missing = [sample for sample in samples if not sample[1]]
        assert len(samples) >= 3 * len(typed), samples
        assert not missing, (f"{len(missing)}/{len(samples)} samples without the ghost", samples)
        assert ghost() == first[len(typed) :], lines
    finally:
        tmux.close()


# :checkhealth ---------------------------------------------------------------------------


@needs_nvim
@pytest.mark.slow
def test_nvim_checkhealth(
    server_command: str, server_env: dict[str, str], workspace: Path, tmp_path: Path
) -> None:
    """:checkhealth lsp-assist: executable, a server that answers, the running client's
    model (loaded or loading, not an error), doctor; or, with a missing executable, the fix."""
    assert NVIM is not None
    bad, good = tmp_path / "bad.txt", tmp_path / "good.txt"
    plugin = EDITORS / "nvim"
    # The client is up (the model may still be loading: health says which).
    attached = "next(require('lsp-assist').state.attached) ~= nil"
    commands = [
        f"set rtp^={plugin}",
        "lua require('lsp-assist').setup({ cmd = { '/nonexistent/lsp-assist', 'serve' } })",
        "checkhealth lsp-assist",
        f"write! {bad}",
        f"lua require('lsp-assist').setup({{ cmd = {{ '{server_command}', 'serve' }} }})",
        f"edit {workspace / 'main.py'}",
        f"lua vim.wait(60000, function() return {attached} end, 50)",
        "checkhealth lsp-assist",
        f"write! {good}",
        "qa!",
    ]
    args: list[str] = []
    for command in commands:
        args += ["-c", command]
    proc = headless(args, workspace, server_env, timeout=320)
    assert bad.exists() and good.exists(), proc.stderr
    bad_text, good_text = bad.read_text(), good.read_text()
    assert "ERROR" in bad_text and "/nonexistent/lsp-assist" in bad_text, bad_text
    assert ".venv/bin/lsp-assist" in bad_text, bad_text
    assert f"OK server executable: {server_command}" in good_text, good_text
    assert "starts and answers initialize" in good_text, good_text
    model = server_env["LSP_ASSIST_MODEL_PATH"]
    running = (f"OK running, model loaded: {model}", "running, the model is still loading")
    assert any(line in good_text for line in running), good_text
    assert "llama.cpp" in good_text and "grammars" in good_text, good_text  # doctor's report
    assert "OK `lsp-assist doctor` found nothing broken" in good_text, good_text
    assert "ERROR" not in good_text, good_text


# docs/editors.md, "Check it works", literally ------------------------------------------


def docs_block(section: str, subsection: str) -> str:
    """The first ```sh block of `subsection` inside `section` of docs/editors.md."""
    text = (REPO / "docs" / "editors.md").read_text()
    start = text.index(f"\n## {section}")
    start = text.index(f"\n### {subsection}", start)
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert block is not None, f"no sh block under {section} / {subsection}"
    return block.group(1)


@pytest.mark.slow
def test_nvim_check_it_works(
    tmp_path: Path, server_env: dict[str, str], server_command: str
) -> None:
    """The Neovim "Check it works" commands and steps, in tmux, with the default model
    (Gemma-3-270M, as the steps say: SmolLM2 suggests nothing after `return` there)."""
    if NVIM is None or TMUX is None:
        pytest.skip("needs nvim and tmux (apt-get install tmux)")
    script = docs_block("Neovim", "Check it works")
    assert script.startswith("cd /path/to/lsp-assist")
    # The checkout is this one; the scratch folder is the test's own.
    script = script.replace("/path/to/lsp-assist", str(REPO), 1)
    script = script.replace("/tmp/lsp-assist-try", str(tmp_path / "try"))
    (tmp_path / "try.sh").write_text(script)
    env = {k: server_env[k] for k in ("XDG_CACHE_HOME", "LSP_ASSIST_THREADS", "HOME", "PATH")}
    env["XDG_STATE_HOME"] = str(tmp_path / "state")  # swap files, logs
    # As SETTINGS: on a loaded machine a slow answer, not an empty one.
    env["LSP_ASSIST_PROMPT_TIMEOUT_MS"] = env["LSP_ASSIST_GENERATION_TIMEOUT_MS"] = "60000"
    exports = " ".join(f"{k}={v}" for k, v in env.items())
    command = f"env -i TERM=tmux-256color {exports} bash {tmp_path / 'try.sh'}"
    tmux = Screen(command, tmp_path, rows=50)  # room for :checkhealth's report
    try:
        tmux.wait_for(lambda lines: status(lines).startswith("lsp-assist: loading"), timeout=60)
        tmux.wait_for(lambda lines: status(lines).startswith("lsp-assist: ready"), timeout=120)
        tmux.send("G", "o")
        tmux.send("-l", "return")

        def typed_row(lines: list[str]) -> int:
            """The screen row of the line typed (the last one starting with `return`)."""
            return max(i for i, line in enumerate(lines) if line.strip().startswith("return"))

        def suggested(lines: list[str]) -> bool:
            return "38;5;244" in tmux.screen(colours=True)[typed_row(lines)]

        try:
            tmux.wait_for(suggested, timeout=60)
        except pytest.fail.Exception:
            tmux.send("M-\\")  # step 3's "asks again"
            tmux.wait_for(suggested, timeout=60)
        assert re.fullmatch(r"lsp-assist: ready \d+ ms", status(tmux.screen()))
        row = typed_row(tmux.screen())
        shown = tmux.screen()[row].rstrip()
        tmux.send("Tab")

        def inserted(lines: list[str]) -> bool:
            """The row starts with what was shown, none of it grey (a next suggestion may
            follow it in grey)."""
            chars = foregrounds(tmux.screen(colours=True)[row])
            text = "".join(ch for ch, _ in chars)
            head = chars[: len(shown)]
            return text.startswith(shown) and all(fg != "38;5;244" for _, fg in head)

        tmux.wait_for(inserted)
        tmux.send("Escape", ":checkhealth lsp-assist", "Enter")
        health = tmux.wait_for(
            lambda lines: any("found nothing broken" in line for line in lines), timeout=90
        )
        text = "\n".join(health)
        assert "OK server executable" in text and "starts and answers initialize" in text
        assert "OK running, model loaded" in text, text
        tmux.send(":q", "Enter", ":qa!", "Enter")
    finally:
        tmux.close()
