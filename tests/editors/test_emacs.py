"""Emacs 28 + eglot 1.9 with editors/emacs/lsp-assist.el against the real server.

Batch tests load the install snippet of docs/editors.md (the checkout's path put in)
as an init file and run tests/editors/emacs_driver.el, which presses keys through the
command loop (`execute-kbd-macro`) and writes what it saw as JSON. The tmux tests run
`emacs -nw -Q` the way the "Check it works" section says, type with send-keys and read
the screen with capture-pane (tests/editors/support: the snippet, the terminal).
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from .support.emacs import (
    EMACS,
    PLACEHOLDER,
    code_block,
    emacs_in_tmux,
    emacs_section,
    install_snippet,
    needs_eglot,
    quit_without_saving,
    tmux_env,
)
from .support.project import CURSOR_LINE, EARLY_SETTINGS, MAIN, REPO, SETTINGS, one_thread
from .support.tmux import Screen, needs_tmux

pytestmark = [pytest.mark.editor, pytest.mark.slow]

MAIN_LINES = MAIN.splitlines()
DRIVER = REPO / "tests" / "editors" / "emacs_driver.el"


# Files where SmolLM2 (greedy, SETTINGS) answers, each with the cursor for a case:
# a typed prefix at the end of a line, one in the middle of a line, an empty line.
TYPED = '''"""Entry point: prints a few sums."""

from helpers import add, scale


def total(values: list[int]) -> int:
    result = 0
    for v in values:
        result = add(result, v)
    ret


def main() -> None:
    numbers = scale([1, 2, 3], 2)
    print(tot)

    print(add(
'''
EMPTY_FILES = {
    "empty1.py": "import os\nimport sys\n\n",
    "empty2.py": "from helpers import add, scale\n\nprint(add(1, 2))\n\n",
}
PREFIX_CASE = {"kind": "prefix", "file": "typed.py", "line": 10, "column": 7}  # "    ret|"
MIDDLE_CASE = {"kind": "middle", "file": "typed.py", "line": 15, "column": 13}  # "print(tot|)"
# The small model answers nothing at some empty lines: a second place, tried if needed.
EMPTY_CASES = [
    {"kind": "empty", "file": "empty1.py", "line": 3, "column": 0},
    {"kind": "empty", "file": "empty2.py", "line": 4, "column": 0},
]


@pytest.fixture
def emacs_workspace(workspace: Path) -> Path:
    """The editor tests' workspace plus the files of the completion cases."""
    (workspace / "typed.py").write_text(TYPED)
    for name, text in EMPTY_FILES.items():
        (workspace / name).write_text(text)
    return workspace


def run_driver(
    scenario: str,
    workspace: Path,
    server: str,
    env: dict[str, str],
    tmp_path: Path,
    cases: list[dict[str, Any]],
    settings: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Run emacs_driver.el's ``scenario``; return its JSON report."""
    assert EMACS is not None
    init = tmp_path / f"init-{scenario}.el"
    init.write_text(install_snippet())
    out = tmp_path / f"emacs-{scenario}.json"
    env = one_thread(env)
    env.update(
        LSP_ASSIST_TEST_INIT=str(init),
        LSP_ASSIST_TEST_SERVER=server,
        LSP_ASSIST_TEST_SCENARIO=scenario,
        LSP_ASSIST_TEST_CASES=json.dumps([dict(c, file=str(workspace / c["file"])) for c in cases]),
        LSP_ASSIST_TEST_SETTINGS=json.dumps(SETTINGS if settings is None else settings),
        LSP_ASSIST_TEST_OUT=str(out),
        LSP_ASSIST_TEST_TIMEOUT_S="150",
    )
    cmd = [EMACS, "--batch", "-l", str(DRIVER)]
    proc = subprocess.run(
        cmd, cwd=workspace, env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert out.exists(), (
        f"emacs wrote no report (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    report: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return report


def dump(report: dict[str, Any]) -> str:
    """The report, shortened, for assertion messages."""
    return json.dumps(report, indent=1, ensure_ascii=False)[:6000]


@needs_eglot
def test_eglot_connects_and_completes(
    emacs_workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    case = {"file": "main.py", "line": CURSOR_LINE, "column": 0}
    report = run_driver("basic", emacs_workspace, server_command, server_env, tmp_path, [case])
    context = dump(report)

    assert report["errors"] == [], context
    # The install snippet turned the mode on by itself, and it started eglot.
    assert report["global_mode"] and report["major_mode"] == "python-mode", context
    assert report["connected"] and report["managed"], context
    caps = report["capabilities"]
    assert "completionProvider" in caps and "inlineCompletionProvider" in caps, context
    assert "lspAssist.accept" in caps["executeCommandProvider"]["commands"]
    assert caps["textDocumentSync"]["change"] == 2  # incremental
    assert report["lsp_assist_server"] and report["capf_installed"], context

    # The mode line: loading while the model loads, then ready, thinking during a
    # request, and the latency once an answer came.
    assert report["ready_state"] == "ready", context
    states = report["states"]
    assert "loading" in states and "ready" in states and "thinking" in states, context
    assert states.index("loading") < states.index("ready"), context
    assert "✨ready" in report["mode_line_ready"], context
    assert "✨thinking" in report["mode_line_thinking"], context
    assert re.search(r"✨ready \d+ms", report["mode_line_after"]), context

    # A cursor move (C-e, a command) sent an automatic inline completion request and
    # its answer shows after point.
    assert report["auto_request_kind"] == "automatic", context
    assert report["auto_request_method"] == ":textDocument/inlineCompletion", context
    items = report["inline_response"]["items"]
    assert items and report["preview_text"] == items[0]["insertText"], context

    # The textDocument/completion item, inserted by lsp-assist-complete and counted.
    response = report["completion_response"]
    assert isinstance(response, dict) and response["items"], context
    item = response["items"][0]
    assert item["textEdit"]["range"]["start"]["line"] == CURSOR_LINE - 1
    assert item["command"]["command"] == "lspAssist.accept"
    assert "✨" not in item["label"] and "✨" in item["detail"], context
    assert report["line_after"] == report["line_before"] + report["inserted"], context
    assert report["accept_response"]["accepted"] is True, context

    # The server's indexing $/progress reached the mode-line state; a model-loading
    # one (which today's server does not send) would show as loading with its percentage.
    assert "lsp-assist: indexing" in report["progress_seen"], context
    assert report["progress_begin"] == ["loading", " ✨loading 10%"], context
    assert report["progress_report"] == " ✨loading 60%", context
    assert report["progress_end"] == "ready", context

    assert report["explain_text"] and not report["explain_text"].startswith("error:"), context
    assert report["status"]["initialized"] is True, context


@needs_eglot
def test_completion_at_point_keeps_the_typed_text(
    emacs_workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    cases = [PREFIX_CASE, MIDDLE_CASE, *EMPTY_CASES]
    report = run_driver("capf", emacs_workspace, server_command, server_env, tmp_path, cases)
    context = dump(report)
    assert report["errors"] == [], context
    results = report["cases"]
    assert len(results) == len(cases), context
    answered = set()
    for case, result in zip(cases, results, strict=True):
        items = (result.get("response") or {}).get("items") or []
        if not items:
            continue
        answered.add(case["kind"])
        # "off": the driver turned automatic suggestions off, to test C-M-i alone.
        assert result["ready"] == "off" and result["column"] == case["column"], context
        item = items[0]
        before, column = result["before"], result["column"]
        typed = re.search(r"\w*\Z", before[:column])
        assert typed and item["label"].startswith(typed.group(0)), context
        if case["kind"] == "empty":
            assert before == "", context
        # C-M-i applied the item's textEdit at the cursor, the typed text kept.
        expected = before[:column] + item["textEdit"]["newText"] + before[column:]
        assert result["after"] == expected, context
    assert answered == {"prefix", "middle", "empty"}, f"no suggestion for some kind: {context}"


@needs_eglot
def test_preview_keys(
    emacs_workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    report = run_driver(
        "keys", emacs_workspace, server_command, server_env, tmp_path, [PREFIX_CASE]
    )
    context = dump(report)
    assert report["errors"] == [], context
    keys = report["keys"]
    line = TYPED.splitlines()[PREFIX_CASE["line"] - 1]

    # Each trigger was an automatic request after a cursor move, with an answer.
    for name in ("first", "second", "third", "fourth", "fifth", "enabled_again"):
        kind, shown = keys[name]
        assert kind == "automatic" and shown, (name, context)

    # TAB, with the preview's map active, inserted the whole suggestion.
    assert keys["preview_active"] and keys["tab_binding"] == "lsp-assist-accept", context
    assert keys["tab_line"] == line + keys["tab_shown"], context
    assert keys["tab_acceptance"]["accepted"] is True, context

    # M-f, M-f, C-e: a word at a time, then the rest of the line.
    shown = keys["partial_shown"]
    steps = keys["partial_steps"]
    assert [s[0] for s in steps] == ["M-f", "M-f", "C-e"]
    inserted = [s[1][len(line) :] for s in steps]
    assert 0 < len(inserted[0]) < len(inserted[1]) <= len(shown), context
    for text, (_keys, _line, rest) in zip(inserted, steps, strict=True):
        assert shown.startswith(text), context
        if "\n" not in shown:
            assert (rest or "") == shown[len(text) :], context
    assert inserted[2] == shown.split("\n")[0], context

    # Typing the first character of the suggestion keeps the rest, with no request.
    typed = keys["typed_shown"]
    assert keys["typed_line"] == line + typed[0], context
    assert keys["typed_preview"] == typed[1:] or (len(typed) == 1 and not keys["typed_preview"])
    assert keys["typed_requested"] is False, context

    # C-g dismissed it, the text unchanged, and nothing was asked again.
    assert keys["dismissed_line"] == line and keys["dismissed_preview"] is None, context
    assert keys["dismissed_requested"] is False, context

    # M-] after an automatic suggestion asked explicitly; the real server answered with
    # its alternatives, the automatic suggestion first (docs/serving.md), and the second
    # showed; M-p went back to the first without asking again.
    assert keys["cycle_request"] == "invoked" and keys["cycle_preview"], context
    choices = keys["cycle_choices"]
    assert 2 <= len(choices) <= 3 and len(set(choices)) == len(choices), context
    assert choices[0] == keys["fifth"][1], context
    assert keys["cycle_preview"] == choices[1], context
    assert (keys["cycle_message"] or "").startswith(f"lsp-assist: suggestion 2/{len(choices)}")
    assert keys["cycle_back"] == choices[0] and keys["cycle_back_requested"] is False, context

    # Disabled: no automatic request, "off" in the mode line; C-c \ still asks.
    assert "✨off" in keys["disabled_mode_line"], context
    assert keys["disabled_requested"] is False, context
    assert keys["manual_request"] == "invoked" and keys["manual_preview"], context
    assert "✨off" in keys["mode_disabled_mode_line"], context
    assert keys["mode_disabled_requested"] is False, context
    assert keys["mode_enabled_again"][0] == "automatic", context

    # Entering the buffer again asked for a suggestion there.
    assert keys["other_buffer"] == "*scratch*" and keys["entered_buffer"] == "typed.py"
    assert keys["entered_request"] == "automatic", context


@needs_eglot
def test_early_answer_then_the_whole_suggestion(
    emacs_workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    """answerAfterMs 1: the preview shows the start, then (suggestionReady) the whole."""
    case = {"file": "main.py", "line": CURSOR_LINE, "column": 0, "typed": "1, "}
    report = run_driver(
        "early", emacs_workspace, server_command, server_env, tmp_path, [case], EARLY_SETTINGS
    )
    context = dump(report)
    assert report["errors"] == [], context
    # lsp-assist.el opted in (eglot-client-capabilities :around).
    assert report["sent_experimental"] == {"lspAssistSuggestionReady": True}, context
    assert report["ready"] == "ready", context
    early = report["early"]
    line = MAIN_LINES[CURSOR_LINE - 1]

    # Typed the start's first character (type-through, no request), then the notice:
    # the rest of the whole suggestion shows after what was typed. (First: the other
    # place is a prefix of this one, and its whole suggestion would answer this one.)
    typed_first = early["typed_first"]
    assert typed_first, context
    typed_line = line + "1, " + typed_first[0]
    assert early["typed_line"] == typed_line, context
    action, rest = early["typed_after"]
    assert action == "refresh" and rest, context
    whole = typed_first[0] + rest
    refreshed = early["typed_refresh"] or {}
    if early["typed_notice_before"] and refreshed.get("after") == typed_first:
        # the notice's refresh showed the whole before the key: the rest of it after
        assert whole == typed_first, context
    else:
        assert len(whole) > len(typed_first) and whole.startswith(typed_first.rstrip()), context

    # Point rested: the start showed, the notice came, and the whole replaced it.
    first = early["rest_first"]
    action, after = early["rest_after"]
    assert first and action == "refresh", context
    assert len(after) > len(first) and after.startswith(first.rstrip()), context
    assert early["rest_line"] == line, context  # shown, nothing inserted
    notice = early["rest_notice"]
    assert notice["uri"] == (emacs_workspace / "main.py").as_uri(), context
    assert notice["position"] == {"line": CURSOR_LINE - 1, "character": len(line)}, context

    # The same text again: asked, nothing redrawn (the same overlay).
    same = early["same"]
    assert same["action"] == "refresh" and same["requested"] is True, context
    assert same["preview"] == after and same["same_overlay"] is True, context
    assert same["refresh"]["same"] is True, context
    reasons = {
        "other_buffer": "not the current buffer",
        "malformed": "malformed",
        "in_flight": "a request is in flight",
        "dismissed": "no suggestion shown",
    }
    for name, reason in reasons.items():
        entry = early[name]
        assert entry["action"] == reason and entry["requested"] is False, (name, context)
        assert entry["refresh"] is None, (name, context)
    assert early["other_buffer"]["preview"] == after, context
    assert early["dismissed"]["preview"] is None, context
    # The refreshes were answered from the server's type-through cache.
    assert report["status_last"]["cache_hit"] is True, context
    assert report["typethrough"]["hits"] >= 2, context


@needs_eglot
def test_missing_server_and_keys_offline(
    emacs_workspace: Path, server_env: dict[str, str], tmp_path: Path
) -> None:
    missing = str(tmp_path / "no-such-dir" / "lsp-assist")
    cases = [{"file": "main.py"}, {"file": "helpers.py"}]
    report = run_driver("offline", emacs_workspace, missing, server_env, tmp_path, cases)
    context = dump(report)
    assert report["errors"] == [], context

    # Said once, over two buffers, with what to set; the mode off; no error.
    expected = f"lsp-assist not found; set lsp-assist-command (tried {missing})"
    assert report["messages"].count(expected) == 1, context
    assert not any("file-missing" in m or "rror" in m for m in report["messages"]), context
    assert report["mode_on"] == [False, False], context
    assert report["lighter_shown"] is False and report["eglot_managed"] is False, context

    # The preview map on suggestions given directly (no server).
    pure = report["pure"]
    assert pure["tab_binding"] == "lsp-assist-accept", context
    start = "def f(x):\n    ret"
    assert pure["steps"] == [
        ["M-f", start + " =", " scale(result, 10)\n    return ret"],
        ["M-<right>", start + " = scale", "(result, 10)\n    return ret"],
        ["M-f", start + " = scale(", "result, 10)\n    return ret"],
        ["C-e", start + " = scale(result, 10)", "\n    return ret"],
        ["C-M-<right>", start + " = scale(result, 10)\n    return ret", None],
    ], context
    assert pure["tab_text"] == "    return retX = 1", context
    assert pure["no_preview_tab"] == "indent-for-tab-command", context
    assert pure["cycled"] == ["b2", "c3", "a1", "c3", "b2", "c3"], context
    assert pure["meta_bracket"] == "nil", context
    assert pure["after_dismiss"] is None, context
    assert pure["words"] == [" =", "(", "foo", "\n    return", "  "], context
    assert pure["lines"] == ["a = 1", "\nb = 2", "tail"], context


@needs_eglot
def test_model_error_and_doctor(
    emacs_workspace: Path, server_command: str, server_env: dict[str, str], tmp_path: Path
) -> None:
    missing = tmp_path / "missing.gguf"
    settings = dict(SETTINGS, modelPath=str(missing))
    report = run_driver(
        "model-error",
        emacs_workspace,
        server_command,
        server_env,
        tmp_path,
        [{"file": "main.py"}],
        settings,
    )
    context = dump(report)
    assert report["errors"] == [], context
    # The mode line says error, and why (its help-echo, and lsp-assist-state).
    assert report["state"] == "error" and "✨error" in report["mode_line"], context
    assert str(missing) in (report["details"]["error"] or ""), context
    # M-x lsp-assist-doctor ran `lsp-assist doctor` with the settings, into its buffer.
    doctor = report["doctor_output"]
    assert f"doctor --workspace {emacs_workspace}" in doctor, context
    assert f"--setting modelPath={missing}" in doctor, context
    assert "llama.cpp" in doctor and str(missing) in doctor.split("\n", 2)[2], context
    assert re.search(r"\[lsp-assist doctor exited with code \d+\]", doctor), context


def check_it_works_script(try_dir: Path) -> str:
    """The "Check it works" shell block, with the checkout and the scratch folder put in."""
    block = code_block(emacs_section(), "### Check it works", "sh")
    assert PLACEHOLDER in block and "/tmp/lsp-assist-emacs" in block
    return block.replace(PLACEHOLDER, str(REPO)).replace("/tmp/lsp-assist-emacs", str(try_dir))


@needs_eglot
@needs_tmux
def test_emacs_nw_check_it_works(server_env: dict[str, str], tmp_path: Path) -> None:
    try_dir = tmp_path / "try"
    script = tmp_path / "check.sh"
    script.write_text(check_it_works_script(try_dir))
    tmux = Screen(["bash", str(script)], env=tmux_env(server_env), rows=32)
    try:
        # The script wrote the install snippet, the checkout's path put in.
        init = (try_dir / "init.el").read_text() if tmux.search("demo.py", 30) else ""
        assert init == install_snippet(REPO), init
        # 1. The model loads, then the mode line says ready.
        assert tmux.search(r"✨ready", 180), tmux.text()
        # 2. Type at the end of the buffer; the suggestion shows after the cursor.
        tmux.send("M->")
        tmux.send("    print(", literal=True)
        shown = tmux.search(r"^    print\((.+?)\s*$", 180)
        assert shown, tmux.text()
        ghost = shown.group(1)
        x, y = tmux.cursor()
        assert x == len("    print("), tmux.text()  # the cursor stays before it
        assert tmux.search(r"✨ready \d+ms", 30), tmux.text()
        # 3. TAB inserts it: the cursor moves past it, the text stays.
        tmux.send("Tab")
        until = time.monotonic() + 10
        while tmux.cursor() == (x, y) and time.monotonic() < until:
            time.sleep(0.2)
        screen = tmux.text()
        assert tmux.cursor() == (x + len(ghost), y), screen
        assert screen.splitlines()[y] == "    print(" + ghost, screen
        # 4. RET, `ret`, C-M-i: `ret` and then the suggestion, nothing lost.
        tmux.send("Enter")
        tmux.send("ret", literal=True)
        time.sleep(0.5)
        tmux.send("C-M-i")
        until = time.monotonic() + 120
        while tmux.cursor()[0] <= len("    ret") and time.monotonic() < until:
            time.sleep(0.2)
        screen = tmux.text()
        col, row = tmux.cursor()
        line = screen.splitlines()[row]
        assert line.startswith("    ret") and "✨" not in line, screen
        assert col > len("    ret"), screen
        # 5. M-x lsp-assist-doctor.
        tmux.send("M-x")
        tmux.send("lsp-assist-doctor", literal=True)
        tmux.send("Enter")
        assert tmux.search(r"\[lsp-assist doctor exited with code 0\]", 90), tmux.text()
        screen = tmux.text()
        assert "*lsp-assist doctor*" in screen and "grammars" in screen, screen
        # 6. Quit without saving.
        quit_without_saving(tmux, timeout=20)
    finally:
        tmux.close()


@needs_eglot
@needs_tmux
def test_emacs_nw_missing_server(server_env: dict[str, str], tmp_path: Path) -> None:
    try_dir = tmp_path / "try"
    script = tmp_path / "check.sh"
    wrong = tmp_path / "not-the-checkout"
    # The user's mistake: the snippet's path does not lead to the server.
    text = check_it_works_script(try_dir).replace(
        '"$PWD/.venv/bin/lsp-assist"', f'"{wrong}/.venv/bin/lsp-assist"'
    )
    script.write_text(text)
    # Wide enough for the message and its long temporary path on one line.
    tmux = Screen(["bash", str(script)], env=tmux_env(server_env), width=250, rows=32)
    try:
        tried = f"{wrong}/.venv/bin/lsp-assist"
        message = f"lsp-assist not found; set lsp-assist-command (tried {tried})"
        assert tmux.search(re.escape(message), 60), tmux.text()
        tmux.send("C-n")
        tmux.send("C-n")
        time.sleep(1)
        screen = tmux.text()
        assert "file-missing" not in screen and "Error" not in screen, screen
        assert "✨" not in screen, screen  # the mode is off: no lighter
        assert "demo.py" in screen, screen
    finally:
        tmux.close()


@needs_eglot
@needs_tmux
def test_emacs_nw_server_that_dies_while_starting(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    """A wrong argument (`serv`): the mode line says error with the exit code, the echo
    area and the commands give the server's last stderr lines and the restart command;
    after fixing the command, `M-x lsp-assist-restart` brings the server up."""
    try_dir = tmp_path / "try"
    script = tmp_path / "check.sh"
    text = check_it_works_script(try_dir)
    assert '/.venv/bin/lsp-assist" "serve"))' in text
    script.write_text(
        text.replace('/.venv/bin/lsp-assist" "serve"))', '/.venv/bin/lsp-assist" "serv"))')
    )
    tmux = Screen(["bash", str(script)], env=tmux_env(server_env), width=250, rows=32)

    def joined() -> str:
        """The screen with Emacs's continued lines (a `\\` at the edge) joined."""
        return re.sub(r"\\\n", "", tmux.run("capture-pane", "-p", "-t", "t"))

    def wait_joined(pattern: str, timeout: float) -> re.Match[str] | None:
        until = time.monotonic() + timeout
        while True:
            found = re.search(pattern, joined(), re.M)
            if found or time.monotonic() > until:
                return found
            time.sleep(0.2)

    try:
        # The mode line: the error state with the exit code (argparse exits 2).
        assert wait_joined(r"✨error: server exited with code 2", 120), joined()
        # The echo area: the server's own last words and how to restart.
        said = wait_joined(r"invalid choice: 'serv'.*M-x lsp-assist-restart", 20)
        assert said, joined()
        # A command says the server is gone, not "not managed by lsp-assist".
        tmux.send("C-g")
        assert wait_joined(r"^Quit", 10), joined()
        tmux.send("C-c", "\\")
        said = wait_joined(r"lsp-assist: server exited with code 2: .*lsp-assist-restart", 20)
        assert said and "invalid choice: 'serv'" in said.group(0), joined()
        assert "not managed" not in joined(), joined()
        # Fix the command, restart: the server comes up and the mode line says ready.
        tmux.send("M-:")
        tmux.send(
            f'(setq lsp-assist-command (list "{REPO}/.venv/bin/lsp-assist" "serve"))',
            literal=True,
        )
        tmux.send("Enter")
        tmux.send("M-x")
        tmux.send("lsp-assist-restart", literal=True)
        tmux.send("Enter")
        assert wait_joined(r"✨ready", 240), joined()
        assert "✨error" not in joined(), joined()
    finally:
        tmux.close()


KEYS_SETUP = r"""
(switch-to-buffer "*keys*")
(insert "x = ")
(global-set-key (kbd "<f5>")
  (lambda () (interactive)
    (lsp-assist--show-choices
     (list (list :text "foo(bar, baz) + 1" :delete 0) (list :text "qux(2)" :delete 0)) t)))
(call-interactively (key-binding (kbd "<f5>")))
"""


def emacs_nw(tmp_path: Path, server_env: dict[str, str], setup: str) -> Screen:
    """`emacs -nw -Q` in tmux with the install snippet and then SETUP as its init."""
    init = tmp_path / "init.el"
    init.write_text(install_snippet(REPO) + setup)
    return emacs_in_tmux(init, env=tmux_env(server_env))


@needs_eglot
@needs_tmux
def test_emacs_nw_preview_keys_in_a_terminal(server_env: dict[str, str], tmp_path: Path) -> None:
    """The preview keys as a terminal sends them (escape sequences), on given suggestions."""
    tmux = emacs_nw(tmp_path, server_env, KEYS_SETUP)

    def row() -> tuple[str, int]:
        """The text of the first buffer line and the cursor's column."""
        return tmux.text().splitlines()[1], tmux.cursor()[0]

    def press(key: str, expected: tuple[str, int]) -> None:
        until = time.monotonic() + 10
        tmux.send(key)
        while row() != expected and time.monotonic() < until:
            time.sleep(0.1)
        assert row() == expected, (key, tmux.text())

    try:
        assert tmux.search(r"^x = foo\(bar, baz\) \+ 1", 30), tmux.text()
        assert row() == ("x = foo(bar, baz) + 1", 4)  # the cursor before the grey text
        press("M-]", ("x = qux(2)", 4))  # the next alternative
        press("M-p", ("x = foo(bar, baz) + 1", 4))  # and back
        press("M-Right", ("x = foo(bar, baz) + 1", 7))  # a word: "foo"
        press("M-f", ("x = foo(bar, baz) + 1", 8))  # "("
        press("C-M-Right", ("x = foo(bar, baz) + 1", 21))  # the rest of the line
        press("F5", ("x = foo(bar, baz) + 1foo(bar, baz) + 1", 21))  # F5 is ESC [ 1 5 ~
        press("C-]", ("x = foo(bar, baz) + 1", 21))  # dismissed
        press("F5", ("x = foo(bar, baz) + 1foo(bar, baz) + 1", 21))
        press("Tab", ("x = foo(bar, baz) + 1foo(bar, baz) + 1", 38))  # all of it
        press("Left", ("x = foo(bar, baz) + 1foo(bar, baz) + 1", 37))  # plain keys again
    finally:
        tmux.close()


MULTILINE_SETUP = r"""
(switch-to-buffer "*keys*")
(insert "x = ")
(global-set-key (kbd "<f5>")
  (lambda () (interactive)
    (lsp-assist--show-choices
     (list (list :text "foo(1)\n    return x\n    y = 2" :delete 0)) t)))
(global-set-key (kbd "<f6>")
  (lambda () (interactive)
    (lsp-assist--show-choices (list (list :text "\n    z = 3" :delete 0)) t)))
(call-interactively (key-binding (kbd "<f5>")))
"""


@needs_eglot
@needs_tmux
def test_emacs_nw_cursor_at_point_before_a_multiline_ghost(
    server_env: dict[str, str], tmp_path: Path
) -> None:
    """The terminal cursor is drawn at point, also when the rest of a multi-line
    suggestion starts with a newline (after C-e, or shown so)."""
    tmux = emacs_nw(tmp_path, server_env, MULTILINE_SETUP)

    def wait_cursor(expected: tuple[int, int], lines: list[str]) -> None:
        until = time.monotonic() + 10
        while time.monotonic() < until:
            rows = tmux.text().splitlines()[1 : 1 + len(lines)]
            if tmux.cursor() == expected and rows == lines:
                return
            time.sleep(0.1)
        assert (tmux.cursor(), rows) == (expected, lines), tmux.text()

    try:
        assert tmux.search(r"^x = foo\(1\)$", 30), tmux.text()
        # Rows are 0-based with the menu bar on row 0: the buffer's first line is row 1.
        wait_cursor((4, 1), ["x = foo(1)", "    return x", "    y = 2"])
        tmux.send("C-e")  # "foo(1)" inserted; the rest starts with a newline
        wait_cursor((10, 1), ["x = foo(1)", "    return x", "    y = 2"])
        tmux.send("C-e")  # the next line
        wait_cursor((12, 2), ["x = foo(1)", "    return x", "    y = 2"])
        tmux.send("C-]")
        wait_cursor((12, 2), ["x = foo(1)", "    return x", ""])
        tmux.send("F6")  # a suggestion that starts a new line
        wait_cursor((12, 2), ["x = foo(1)", "    return x", "    z = 3"])
        tmux.send("Tab")
        wait_cursor((9, 3), ["x = foo(1)", "    return x", "    z = 3"])
    finally:
        tmux.close()


MODE_LINE_SETUP = r"""
(switch-to-buffer "*keys*")
(lsp-assist-mode 1)  ; the program exists; no file, so no server starts
(defvar test-states
  '((loading (:progress ((:title "lsp-assist: loading model" :percentage 60))))
    (ready (:latency 85 :progress ((:title "lsp-assist: indexing" :percentage 40))))))
(advice-add 'lsp-assist-state :override (lambda () (car test-states)))
(global-set-key (kbd "<f5>")
  (lambda () (interactive) (setq test-states (cdr test-states)) (force-mode-line-update)))
"""


@needs_eglot
@needs_tmux
def test_emacs_nw_mode_line_draws_the_percent(server_env: dict[str, str], tmp_path: Path) -> None:
    """What the mode line draws (not the function's string): the % of a progress."""
    tmux = emacs_nw(tmp_path, server_env, MODE_LINE_SETUP)
    try:
        assert tmux.search(r"\*keys\*", 30), tmux.text()
        assert tmux.search(r"✨loading 60%\)", 10), tmux.text()
        tmux.send("F5")
        assert tmux.search(r"✨ready 85ms indexing 40%\)", 10), tmux.text()
    finally:
        tmux.close()


def documented_cycle_keys() -> dict[str, list[str]]:
    """The keys of the Emacs Keys table's rows for lsp-assist-next and -previous."""
    keys: dict[str, list[str]] = {}
    for row in emacs_section().splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] in ("`lsp-assist-next`", "`lsp-assist-previous`"):
            keys[cells[1].strip("`")] = re.findall(r"`([^`]+)`", cells[0])
    return keys


CYCLE_SETUP = r"""
(switch-to-buffer "*keys*")
(lsp-assist-mode 1)  ; typing removes the preview; no file, so no server starts
(insert "x = ")
(global-set-key (kbd "<f5>")
  (lambda () (interactive)
    (lsp-assist--show-choices
     (list (list :text "a1" :delete 0) (list :text "b2" :delete 0)
           (list :text "c3" :delete 0)) t)))
"""


@needs_eglot
@needs_tmux
def test_emacs_nw_cycle_keys_in_a_terminal(server_env: dict[str, str], tmp_path: Path) -> None:
    """Each documented cycle key works in a terminal and swallows nothing after it."""
    keys = documented_cycle_keys()
    assert keys.get("lsp-assist-next") and keys.get("lsp-assist-previous"), keys
    tmux = emacs_nw(tmp_path, server_env, CYCLE_SETUP)

    def wait_row(expected: str, key: str) -> None:
        until = time.monotonic() + 10
        while tmux.text().splitlines()[1] != expected and time.monotonic() < until:
            time.sleep(0.1)
        assert tmux.text().splitlines()[1] == expected, (key, tmux.text())

    try:
        assert tmux.search(r"\*keys\*", 30), tmux.text()
        typed = ""
        for command, step in (("lsp-assist-next", 1), ("lsp-assist-previous", -1)):
            for key in keys[command]:
                tmux.send("F5")
                wait_row("x = " + typed + "a1", "F5")
                tmux.send(key)
                wait_row("x = " + typed + ("b2" if step == 1 else "c3"), key)
                # The next key is typed, not taken as the rest of an escape sequence.
                tmux.send("q", literal=True)
                typed += "q"
                wait_row("x = " + typed, f"{key} then q")
    finally:
        tmux.close()
