"""Real VS Code for the editor tests: code-server 4.96.4 (VS Code 1.96.4) in headless
Chromium, installed by .ci/code_server.sh and driven by tests/editors/vscode_real/drive.mjs.

``CodeServer`` starts one code-server for one test (its own user data, settings and
environment: the extension host and the lsp-assist server it spawns inherit it) and
stops it with every process it started; ``Workbench`` sends drive.mjs its requests.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from tests.support.ports import free_port

from .project import EDITORS, REPO

HARNESS = REPO / "tests" / "editors" / "vscode_real"
INSTALL_SCRIPT = REPO / ".ci" / "code_server.sh"
VSCODE = EDITORS / "vscode"

# The user settings of every test's VS Code: no welcome page, no trust prompt, nothing
# fetched from the network, no hot exit (a test's unsaved text must not come back).
USER_SETTINGS: dict[str, Any] = {
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": False,
    "telemetry.telemetryLevel": "off",
    "extensions.autoCheckUpdates": False,
    "extensions.autoUpdate": False,
    "workbench.tips.enabled": False,
    "workbench.enableExperiments": False,
    "files.hotExit": "off",
    "editor.minimap.enabled": False,
    "editor.cursorBlinking": "solid",
    "update.mode": "none",
    # Only lsp-assist's ghost text: no suggest widget of words (Tab would take its item).
    "editor.quickSuggestions": {"other": "off", "comments": "off", "strings": "off"},
    "editor.wordBasedSuggestions": "off",
    "editor.suggestOnTriggerCharacters": False,
}


def install_state() -> tuple[dict[str, Any] | None, str]:
    """The install .ci/code_server.sh made (its install.json), or why there is none."""
    proc = subprocess.run(
        ["bash", str(INSTALL_SCRIPT), "--print-dir"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if proc.returncode != 0:
        return None, f"{INSTALL_SCRIPT.name} --print-dir failed: {proc.stderr.strip()}"
    folder = Path(proc.stdout.strip())
    if (folder / "FAILED").is_file():
        reason = (folder / "FAILED").read_text().strip()
        return None, f"real VS Code could not be installed: {reason} (bash .ci/code_server.sh)"
    if not (folder / ".installed").is_file():
        return None, (
            f"real VS Code (code-server) is not installed in {folder}: "
            "run `bash .ci/setup.sh --editors` or `bash .ci/code_server.sh`"
        )
    info: dict[str, Any] = json.loads((folder / "install.json").read_text())
    return info, ""


def pids_of(pattern: str) -> list[int]:
    """PIDs whose command line contains ``pattern`` (pgrep -f, as a fixed string)."""
    proc = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True, check=False)
    return sorted(int(p) for p in proc.stdout.split())


class CodeServer:
    """One code-server serving ``folder``, with its own user data and extensions."""

    def __init__(
        self,
        install: dict[str, Any],
        root: Path,
        extensions: Path,
        env: dict[str, str],
        user_settings: dict[str, Any],
    ) -> None:
        self.root = root
        self.port = free_port()
        user = root / "user-data" / "User"
        user.mkdir(parents=True)
        (user / "settings.json").write_text(json.dumps(user_settings, indent=1))
        self.log_path = root / "code-server.log"
        env = dict(env)
        # code-server's own config.yaml and state, not the user's ~/.config/code-server.
        env["XDG_CONFIG_HOME"] = str(root / "config")
        env["XDG_DATA_HOME"] = str(root / "data")
        env.pop("PASSWORD", None)
        self._log = self.log_path.open("wb")
        self.proc = subprocess.Popen(
            [
                install["codeServer"],
                "--auth",
                "none",
                "--bind-addr",
                f"127.0.0.1:{self.port}",
                "--extensions-dir",
                str(extensions),
                "--user-data-dir",
                str(root / "user-data"),
                "--disable-telemetry",
                "--disable-update-check",
                "--disable-workspace-trust",
                "--disable-getting-started-override",
                "--ignore-last-opened",
            ],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its process group: the extension host, the server
        )
        self._wait_up()

    def _wait_up(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"code-server exited: {self.log()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=5):
                    return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"code-server not up in {timeout} s: {self.log()}") from None
                time.sleep(0.2)

    def url(self, folder: Path) -> str:
        return f"http://127.0.0.1:{self.port}/?folder={folder}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """SIGTERM to its process group, SIGKILL after 10 s."""
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            # code-server gone; what it started may linger a moment.
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                try:
                    os.killpg(self.proc.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.1)
            else:
                continue
            break
        self._log.close()


class DriverError(AssertionError):
    """drive.mjs said a request failed (a wait that timed out, a missing element)."""


class Workbench:
    """drive.mjs: one request at a time, each answered within ``timeout`` seconds."""

    def __init__(self, install: dict[str, Any], screenshots: Path) -> None:
        self.screenshots = screenshots
        self.shots = 0
        self.proc = subprocess.Popen(
            [
                "node",
                str(HARNESS / "drive.mjs"),
                "--modules",
                install["modules"],
                "--chromium",
                install["chromium"],
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self._answers: queue.Queue[str] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._read, args=(self.proc.stdout, True), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, False), daemon=True).start()

    def _read(self, stream: Any, answers: bool) -> None:
        for line in stream:
            if answers:
                self._answers.put(line)
            else:
                self._stderr.append(line)

    def __call__(self, op: str, timeout: float = 240, **args: Any) -> Any:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"op": op, **args}) + "\n")
        self.proc.stdin.flush()
        try:
            line = self._answers.get(timeout=timeout)
        except queue.Empty:
            raise DriverError(
                f"drive.mjs: no answer to {op} in {timeout} s\n{''.join(self._stderr)[-3000:]}"
            ) from None
        answer = json.loads(line)
        if not answer["ok"]:
            shot = self.screenshot(f"failed-{op}") if op != "screenshot" else None
            raise DriverError(f"drive.mjs {op} {args}: {answer['error']} (screenshot {shot})")
        return answer["value"]

    def screenshot(self, name: str) -> Path | None:
        """A PNG of the page under ``screenshots`` (numbered, to follow a test's steps)."""
        self.shots += 1
        path = self.screenshots / f"{self.shots:02d}-{name}.png"
        try:
            self("screenshot", timeout=60, path=str(path))
        except (DriverError, OSError, ValueError):
            return None
        return path

    def close(self) -> None:
        with contextlib.suppress(DriverError, OSError, ValueError):
            self("close", timeout=30)
        if self.proc.stdin:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=5)
