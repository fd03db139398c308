"""The VS Code extension in real VS Code: code-server 4.96.4 (the VS Code 1.96.4
workbench) in headless Chromium, the real server with SmolLM2.

.ci/code_server.sh installs code-server, playwright-core and Chromium (``bash .ci/setup.sh
--editors`` runs it); these tests skip, saying why, only when that install failed or has
not run. A session fixture packages editors/vscode as a .vsix (``vsce package``) and
installs it into an extensions folder; each test starts a code-server of its own (its
user settings point ``lspAssist.serverPath`` at the venv's lsp-assist and give the
server's settings; the server's ``--log-file`` is under the test's tmp_path, so ``pgrep
-f`` finds its process), opens the workspace in Chromium and types as a user does
(support/code_server.py; vscode_real/drive.mjs answers each action and reading). One
code-server per test, not per module: code-server 4.96 keeps a closed window's extension
host (and the lsp-assist server it started) for its reconnection grace time, three hours,
so only stopping it ends them.

The word suggestions of VS Code (its suggest widget) are turned off in these tests: while
the widget shows, Tab takes its item, not the ghost text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from .support.code_server import (
    USER_SETTINGS,
    VSCODE,
    CodeServer,
    Workbench,
    install_state,
    pids_of,
)
from .support.metrics import first_model_request_after, model_requests, shown_lines, wait_prefilled
from .support.next_edit_source import SHAPES
from .support.project import (
    CURSOR_LINE,
    CURSOR_SETTINGS,
    MAIN,
    SETTINGS,
    STDLIB_FILE,
    one_thread,
)
from .support.typing import (
    KEY_S,
    Tally,
    region_keys,
    typed_lines_show,
    typing_setup,
    without_region,
)

pytestmark = [pytest.mark.editor, pytest.mark.slow]

NODE = shutil.which("node")
T = TypeVar("T")
MANIFEST = json.loads((VSCODE / "package.json").read_text())
NO_GHOST = {"inline": "", "below": []}
NO_DECORATIONS: dict[str, list[Any]] = {"after": [], "ranges": [], "inline": []}


def palette_title(command: str) -> str:
    """The command palette's title of one of the extension's commands ("lsp-assist: ...")."""
    (entry,) = [c for c in MANIFEST["contributes"]["commands"] if c["command"] == command]
    return f"{entry['category']}: {entry['title']}"


@pytest.fixture(scope="session")
def code_server() -> dict[str, Any]:
    """The install .ci/code_server.sh made (skips, with its reason, when there is none)."""
    if NODE is None:
        pytest.skip("node not found (real VS Code needs node 20)")
    info, why = install_state()
    if info is None:
        pytest.skip(why)
    return info


@pytest.fixture(scope="session")
def extensions_dir(code_server: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """editors/vscode packaged by vsce (its prepublish bundles it) and installed."""
    if not (VSCODE / "node_modules" / "@vscode" / "vsce").is_dir():
        pytest.skip("editors/vscode/node_modules missing: run `npm ci` in editors/vscode")
    out = tmp_path_factory.mktemp("vscode-extension")
    vsix = out / "lsp-assist.vsix"
    vsce = VSCODE / "node_modules" / "@vscode" / "vsce" / "vsce"
    packaged = subprocess.run(
        [str(NODE), str(vsce), "package", "--no-dependencies", "-o", str(vsix)],
        cwd=VSCODE,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert packaged.returncode == 0, packaged.stdout[-3000:] + packaged.stderr[-3000:]
    extensions = out / "extensions"
    installed = subprocess.run(
        [
            code_server["codeServer"],
            "--extensions-dir",
            str(extensions),
            "--user-data-dir",
            str(out / "user-data"),
            "--install-extension",
            str(vsix),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env=dict(os.environ, XDG_CONFIG_HOME=str(out / "config"), XDG_DATA_HOME=str(out / "data")),
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    name = f"{MANIFEST['publisher']}.{MANIFEST['name']}-{MANIFEST['version']}"
    assert (extensions / name / "dist" / "extension.js").is_file(), installed.stdout
    return extensions


class Session:
    """A test's VS Code: code-server, the page, and where the server writes its log."""

    def __init__(self, tmp_path: Path, code_server: CodeServer, workbench: Workbench) -> None:
        self.tmp_path = tmp_path
        self.server = code_server
        self.wb = workbench
        self.server_log = tmp_path / "server.log"

    def __call__(self, op: str, timeout: float = 240, **args: Any) -> Any:
        return self.wb(op, timeout=timeout, **args)

    def until(
        self,
        read: Callable[[], T],
        done: Callable[[T], bool],
        what: str,
        timeout: float = 120,
    ) -> T:
        """Poll ``read()`` until ``done`` holds (generous: two busy cores are slow)."""
        deadline = time.monotonic() + timeout
        while True:
            value = read()
            if done(value):
                return value
            if time.monotonic() > deadline:
                shot = self.wb.screenshot("timeout")
                pytest.fail(
                    f"{what}: not within {timeout} s; last reading {value!r} "
                    f"(screenshot {shot})\n{self.context()}"
                )
            time.sleep(0.1)

    def read(self, what: str) -> Any:
        return self.wb("read", what=what)

    def status(self) -> dict[str, str]:
        item: dict[str, str] | None = self.wb("status")
        return item or {"text": "", "label": ""}

    def cursor(self) -> tuple[int, int]:
        """The cursor as the status bar says it: 1-based line and column."""
        value = self.wb("cursor")
        return (value["line"], value["column"]) if value else (0, 0)

    def wait_cursor(self, line: int, column: int) -> None:
        self.until(self.cursor, lambda c: c == (line, column), f"cursor at {line}:{column}")

    def wait_ready(self, timeout: float = 240) -> list[dict[str, str]]:
        """Every status bar reading until it says ready (each change once)."""
        seen: list[dict[str, str]] = []

        def read() -> dict[str, str]:
            item = self.status()
            if not seen or seen[-1] != item:
                seen.append(item)
            return item

        self.until(read, lambda s: "lsp-assist: ready" in s["label"], "status ready", timeout)
        return seen

    def goto(self, line: int, column: int) -> None:
        """Ctrl+G to a 1-based line and column, and wait until the cursor is there."""
        self.wb("press", key="Control+G")
        self.wb("type", text=f"{line}:{column}", delayMs=20)
        self.wb("press", key="Enter")
        self.wait_cursor(line, column)

    def settled_ghost(self) -> dict[str, Any]:
        """The ghost text once it shows and stays the same for a second."""
        last: list[Any] = [None, 0.0]

        def read() -> dict[str, Any]:
            ghost: dict[str, Any] = self.read("ghostText")
            if ghost != last[0]:
                last[:] = [ghost, time.monotonic()]
            return ghost

        return self.until(
            read,
            lambda g: g != NO_GHOST and time.monotonic() - last[1] >= 1.0,
            "ghost text",
        )

    def save_and_read(self, path: Path, before: str) -> str:
        """Ctrl+S, then the file from disk once saved (the tab clean, the text changed and
        the same on two readings: VS Code writes a file in pieces)."""
        self.wb("press", key="Control+S")
        last: list[str | None] = [None]

        def read() -> str:
            text = path.read_text() if not self.wb("dirty") else before
            previous, last[0] = last[0], text
            return text if text == previous else before

        return self.until(read, lambda text: text != before, f"{path.name} saved", 60)

    def context(self) -> str:
        log = (
            self.server_log.read_text(errors="replace")[-3000:] if self.server_log.exists() else ""
        )
        return f"--- server log ---\n{log}\n--- code-server ---\n{self.server.log()[-2000:]}"


@pytest.fixture
def vscode(
    tmp_path: Path,
    code_server: dict[str, Any],
    extensions_dir: Path,
    server_command: str,
) -> Iterator[Callable[[Path, dict[str, Any], dict[str, str]], Session]]:
    """Start VS Code on a folder: ``vscode(folder, server_settings, env[, user_settings,
    log_level=...])``
    (a second one in the same test gets folders of its own under tmp_path)."""
    started: list[Session] = []

    def start(
        folder: Path,
        server_settings: dict[str, Any],
        env: dict[str, str],
        user_settings: dict[str, Any] | None = None,
        log_level: str = "INFO",
    ) -> Session:
        root = tmp_path / f"vscode-{len(started)}" if started else tmp_path
        root.mkdir(exist_ok=True)
        user = {
            **USER_SETTINGS,
            "lspAssist.serverPath": server_command,
            "lspAssist.serverArgs": [
                "serve",
                "--log-file",
                str(root / "server.log"),
                "--log-level",
                log_level,
            ],
            "lspAssist.extraSettings": server_settings,
            **(user_settings or {}),
        }
        server = CodeServer(code_server, root / "code-server", extensions_dir, env, user)
        shots = root / "screenshots"
        shots.mkdir()
        session = Session(root, server, Workbench(code_server, shots))
        started.append(session)
        session("launch", url=server.url(folder))
        return session

    yield start
    for session in started:
        session.wb.close()
        session.server.stop()


def test_vscode_real_ghost_text_and_tab_accepts(
    vscode: Callable[..., Session], workspace: Path, server_env: dict[str, str], small_model: str
) -> None:
    """The status bar goes from starting and loading to ready; typing `ret` at the end of
    main.py shows the server's suggestion as ghost text; Tab puts it in the document (on
    disk after Ctrl+S) and the server counts the shown suggestion accepted."""
    vs = vscode(workspace, SETTINGS, server_env)
    vs("open", file="main.py")
    seen = vs.wait_ready()
    labels = [s["label"] for s in seen]
    assert any("loading the model" in label for label in labels), seen
    assert small_model in labels[-1] and seen[-1]["text"] == "lsp-assist", seen
    (pid,) = vs.until(lambda: pids_of(str(vs.server_log)), bool, "the server's process")

    vs("press", key="Control+End")
    vs("type", text="ret")
    ghost = vs.settled_ghost()
    assert ghost["inline"].strip(), ghost
    lines = vs.read("visibleLines")
    assert lines[-1 - len(ghost["below"])] == "ret" + ghost["inline"], (lines, ghost)
    # The answer's latency, from the middleware's clock.
    status = vs.status()
    assert status["text"].startswith("lsp-assist ") and status["text"].endswith(" ms"), status
    assert 0 < int(status["text"].split()[1]) < 120_000, status

    vs("press", key="Tab")
    vs.until(lambda: vs.read("ghostText"), lambda g: g == NO_GHOST, "ghost text gone")
    suggestion = ghost["inline"] + "".join("\n" + line for line in ghost["below"])
    text = vs.save_and_read(workspace / "main.py", MAIN)
    assert text == MAIN + "ret" + suggestion, vs.context()
    # The cursor at the end of what was inserted.
    last = ("ret" + suggestion).split("\n")[-1]
    vs.wait_cursor(CURSOR_LINE + 1 + len(ghost["below"]), len(last) + 1)

    # The item's command (lspAssist.accept) told the server: one shown suggestion, taken whole.
    cache = Path(server_env["XDG_CACHE_HOME"])
    shown = vs.until(lambda: shown_lines(cache), bool, "a shown record in the metrics log", 60)
    (record,) = [r for r in shown if r["outcome"] == "accepted"]
    assert record["trigger"] == "automatic", shown
    assert record["accepted_chars"] == record["shown_chars"] >= len(ghost["inline"]), shown
    assert pids_of(str(vs.server_log)) == [pid]


def test_vscode_real_restart_server_command(
    vscode: Callable[..., Session], workspace: Path, server_env: dict[str, str]
) -> None:
    """**lsp-assist: Restart server** from the command palette stops the server and starts
    another one (a new process, the old one gone), the status bar comes back to ready, and
    the new server's suggestion shows where the user types."""
    vs = vscode(workspace, SETTINGS, server_env)
    vs("open", file="main.py")
    vs.wait_ready()
    (old,) = vs.until(lambda: pids_of(str(vs.server_log)), bool, "the server's process")

    title = palette_title("lspAssist.restartServer")
    assert title == "lsp-assist: Restart server"
    vs("command", title=title)
    (new,) = vs.until(
        lambda: pids_of(str(vs.server_log)),
        lambda pids: len(pids) == 1 and old not in pids,
        "a new server process, the old one gone",
    )
    assert new != old
    seen = vs.wait_ready()
    assert "lsp-assist: ready" in seen[-1]["label"], seen
    log = vs.server_log.read_text()
    assert log.count(" loaded ") >= 2, log[-3000:]  # the model loaded again

    vs("press", key="Control+End")
    vs("type", text="ret")
    ghost = vs.settled_ghost()
    assert ghost["inline"].strip(), ghost
    assert pids_of(str(vs.server_log)) == [new]


def test_vscode_real_partial_accept_and_dismiss(
    vscode: Callable[..., Session], workspace: Path, server_env: dict[str, str]
) -> None:
    """Ctrl+Right (lspAssist.acceptNextWord) takes the suggestion's first word and leaves
    the rest as ghost text; Escape (lspAssist.dismissSuggestion) removes it. The server's
    metrics log holds the shown suggestion as dismissed, with the word's length accepted."""
    vs = vscode(workspace, SETTINGS, server_env)
    vs("open", file="main.py")
    vs.wait_ready()
    vs("press", key="Control+End")
    vs("type", text="ret")
    ghost = vs.settled_ghost()
    assert not ghost["below"] and " " in ghost["inline"].strip(), (
        f"SmolLM2 here suggests `urn scale([1, 2, 3],`: more than one word: {ghost}"
    )

    vs("press", key="Control+ArrowRight")
    rest = vs.until(
        lambda: vs.read("ghostText"),
        lambda g: g != ghost and g["inline"] != "",
        "the rest of the suggestion after the first word",
    )
    word = ghost["inline"].removesuffix(rest["inline"])
    assert word and word + rest["inline"] == ghost["inline"], (ghost, rest)
    vs.wait_cursor(CURSOR_LINE + 1, len("ret" + word) + 1)

    vs("press", key="Escape")
    vs.until(lambda: vs.read("ghostText"), lambda g: g == NO_GHOST, "ghost text dismissed")
    text = vs.save_and_read(workspace / "main.py", MAIN)
    assert text == MAIN + "ret" + word, vs.context()

    cache = Path(server_env["XDG_CACHE_HOME"])
    shown = vs.until(lambda: shown_lines(cache), bool, "a shown record in the metrics log", 60)
    (record,) = [r for r in shown if r["outcome"] == "dismissed"]
    assert record["accepted_chars"] == len(word), shown
    assert record["shown_chars"] == len(ghost["inline"]), shown


def next_edit_shown(vs: Session, line: str) -> dict[str, Any]:
    """The decorations once they mark an edit on ``line`` (the line's text)."""
    return vs.until(
        lambda: vs.read("extensionDecorations"),
        lambda d: bool(d["after"]) and all(a["line"] == line for a in d["after"]),
        f"a next edit shown on {line!r}",
        60,
    )


def test_vscode_real_next_edit_rename_jump_apply_dismiss_delete(
    vscode: Callable[..., Session], tmp_path: Path
) -> None:
    """Rename `area` to `surface` at its definition: the next edit shows at the use above
    (`area` highlighted, `surface` after it, `next edit (Tab)` at the line's end), Tab
    jumps there, Tab applies it and the next use shows; Escape removes it and **lsp-assist:
    Ask for the next edit** shows it again; remove the parameter `depth`: a call's third
    argument shows struck through with `next edit: delete (Tab)`, Tab, Tab deletes it.
    On disk after Ctrl+S: every use renamed, the extra arguments gone. No model: the
    server's symbolic next edits need none."""
    root = tmp_path / "ws"
    root.mkdir()
    (root / "pyproject.toml").write_text('[project]\nname = "ws"\nversion = "0"\n')
    (root / "shapes.py").write_text(SHAPES)
    settings = {"modelPath": str(root / "absent.gguf"), "metrics": False, "persist": False}
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.setdefault("LSP_ASSIST_THREADS", "2")
    vs = vscode(root, settings, env)
    vs("open", file="shapes.py")
    vs.until(vs.status, lambda s: "model file not found" in s["label"], "status: no model", 120)

    # `def area(` -> `def surface(`: select the word, type over it.
    vs.goto(5, 5)
    vs("press", key="Control+D")
    vs("type", text="surface", delayMs=50)
    use = "    print(area(2, 3))"
    shown = next_edit_shown(vs, use)
    assert shown == {
        "after": [
            {"text": "surface", "line": use, "column": 14},
            {"text": "next edit (Tab)", "line": use, "column": len(use)},
        ],
        "ranges": [{"line": use, "start": 10, "end": 14}],
        "inline": [],
    }, shown
    lines = vs.read("visibleLines")
    assert lines[1] == use and lines[4] == "def surface(width, height, depth):", lines
    vs.wait_cursor(5, 12)

    vs("press", key="Tab")  # jump
    vs.wait_cursor(2, 11)
    assert vs.read("visibleLines")[1] == use
    assert vs.read("extensionDecorations") == shown
    vs("press", key="Tab")  # apply; the next use shows
    second = "    return sum(area(w, h, 1) for w, h in shapes)"
    shown = next_edit_shown(vs, second)
    assert shown["ranges"] == [{"line": second, "start": 15, "end": 19}], shown
    assert vs.read("visibleLines")[1] == "    print(surface(2, 3))"
    vs.wait_cursor(2, 11)

    vs("press", key="Escape")
    vs.until(lambda: vs.read("extensionDecorations"), lambda d: d == NO_DECORATIONS, "dismissed")
    vs("command", title=palette_title("lspAssist.nextEdit"))
    assert next_edit_shown(vs, second)["ranges"] == shown["ranges"]

    vs("press", key="Tab")
    vs.wait_cursor(10, 16)
    vs("press", key="Tab")
    third = "print(area(2, 3, 4))"
    assert next_edit_shown(vs, third)["ranges"] == [{"line": third, "start": 6, "end": 10}]
    vs("press", key="Tab")
    vs.wait_cursor(13, 7)
    vs("press", key="Tab")
    vs.until(lambda: vs.read("extensionDecorations"), lambda d: d == NO_DECORATIONS, "all renamed")
    time.sleep(2)  # nothing more comes
    assert vs.read("extensionDecorations") == NO_DECORATIONS

    # `, depth` removed from the definition: the third argument of the call on line 10.
    vs.goto(5, 26)
    vs("press", key="Shift+ArrowRight", times=7)
    vs("press", key="Delete")
    call = "    return sum(surface(w, h, 1) for w, h in shapes)"
    shown = next_edit_shown(vs, call)
    assert shown["after"] == [
        {"text": "next edit: delete (Tab)", "line": call, "column": len(call)}
    ], shown
    assert shown["ranges"] == [{"line": call, "start": 27, "end": 30}], shown
    struck = "".join(i["text"] for i in shown["inline"])
    assert struck == ", 1" and {i["textDecoration"] for i in shown["inline"]} == {"line-through"}
    vs("press", key="Tab")
    vs.wait_cursor(10, 28)
    vs("press", key="Tab")
    last = "print(surface(2, 3, 4))"
    assert next_edit_shown(vs, last)["ranges"] == [{"line": last, "start": 18, "end": 21}]
    vs("press", key="Tab")
    vs.wait_cursor(13, 19)
    vs("press", key="Tab")
    vs.until(lambda: vs.read("extensionDecorations"), lambda d: d == NO_DECORATIONS, "all deleted")

    text = vs.save_and_read(root / "shapes.py", SHAPES)
    expected = (
        SHAPES.replace("area(", "surface(")
        .replace(", depth)", ")")
        .replace(", 1)", ")")
        .replace(", 4))", "))")
    )
    assert text == expected, vs.context()


def test_vscode_real_reports_where_the_cursor_rests(
    vscode: Callable[..., Session], workspace: Path, server_env: dict[str, str]
) -> None:
    """The cursor jumps far down asyncio/queues.py (Ctrl+G) and rests: the extension
    reports it (lspAssist/didMoveCursor after `lspAssist.reportCursorMs`, 300), the
    server evaluates the prompt there, and the first request after End, Enter finds most
    of its prompt in the KV cache. The control: a second VS Code with `reportCursorMs` 0
    (never), the same rest and End, Enter: that first request evaluates a cold prompt."""
    text = STDLIB_FILE.read_text()
    (workspace / "queues.py").write_text(text)
    lines = text.split("\n")
    rested = next(i for i in range(len(lines) * 4 // 10, len(lines)) if lines[i].strip()) + 1
    cache = Path(server_env["XDG_CACHE_HOME"])

    env = one_thread(server_env)

    def first_request_after_rest(report_ms: int) -> dict[str, Any]:
        user = {"lspAssist.reportCursorMs": report_ms}
        vs = vscode(workspace, CURSOR_SETTINGS, env, user, log_level="DEBUG")
        vs("open", file="queues.py")
        vs.wait_ready()
        time.sleep(2)  # the prefill at the file's start, then the report where it opened
        vs.goto(rested, 1)
        if report_ms:  # the rest: the report after 300 ms, then the prefill
            wait_prefilled(vs.server_log, rested - 1)
        else:
            time.sleep(4)  # as long a rest, with nothing reported
        before = len(model_requests(cache))
        vs("press", key="End")
        vs("press", key="Enter")
        request = first_model_request_after(cache, before)
        vs.wb.close()
        vs.server.stop()
        return request

    warm = first_request_after_rest(300)
    cold = first_request_after_rest(0)
    assert warm["prompt_tokens"] > 200 and cold["prompt_tokens"] > 200, (warm, cold)
    assert warm["reused_tokens"] >= warm["prompt_tokens"] * 0.8, warm
    assert cold["reused_tokens"] < cold["prompt_tokens"] * 0.3, cold


def test_vscode_real_shows_ghost_text_while_the_user_types_at_180_ms_a_key(
    vscode: Callable[..., Session], workspace: Path, server_env: dict[str, str]
) -> None:
    """A steady typist (issue 45): a region of asyncio/queues.py removed, the cursor rests
    at the end of the line above it until the server has evaluated the prompt there, then
    Enter (VS Code indents) and the region typed back at one key every 180 ms without
    waiting (drive.mjs's ``typeReading``: the ghost text read before each key; brackets
    and quotes auto-closed, as VS Code does). Ghost text must show at more than 15 % of
    the keys: a stall in the extension's request path (each request cancelled by the next
    key before its answer) shows none."""
    above, region, text = without_region()
    (workspace / "queues.py").write_text(text)
    env, settings = typing_setup(server_env)
    vs = vscode(workspace, settings, env, log_level="DEBUG")
    vs("open", file="queues.py")
    vs.wait_ready()
    time.sleep(2)  # the prefill at the file's start, then the report where it opened
    vs.goto(above + 1, 1)
    vs("press", key="End")
    wait_prefilled(vs.server_log, above)  # rested: reported after 300 ms, the prompt evaluated
    vs("press", key="Enter")
    keys = region_keys(region)
    readings = vs("typeReading", keys=[key for _, _, key in keys], delayMs=int(KEY_S * 1000))
    lines = vs.read("visibleLines")
    assert typed_lines_show(lines, region), (region, lines)  # indented, brackets closed once
    tally = Tally("vscode")
    for (typed, rest, _), ghost in zip(keys, readings, strict=True):
        tally.key(typed, rest, "\n".join([ghost["inline"], *ghost["below"]]))
    tally.check(vs.context())
