"""Everything that grows with use stays at or under its bound (issue 47).

The serving object is driven as an editor drives it, with a fake model (the model is not
the point): files opened, typed into key by key with a completion at each key, some
suggestions shown, typed through and accepted, files closed, parameters renamed and next
edits asked, explains, and a settings change, over a workspace of modules that import and
re-export each other. The module constants that bound the structures are made small
first (and the settings that bound others), so the run feeds many more distinct items
than each bound: once over small files with the count bounds small, once over large
files with the bounds in bytes, characters and tokens small. After every step
``Service.memory`` (what ``lspAssist.memory`` answers) lists every structure: none may be
over its bound, and at the end each of the structures this run feeds must have reached
its bound (its eviction ran), the work in flight none.
The backend's own (the KV states, the healing indexes) are checked through the real
server and model in tests/e2e/test_soak.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from lsp_assist.backends.base import GenerationRequest, GenerationResult
from lsp_assist.config import Settings, parse_settings
from lsp_assist.context import known_code, memory, similar, summaries, syntax, tokens, usage
from lsp_assist.context.retrieval import render, retriever
from lsp_assist.index import symbols
from lsp_assist.serving import Service, next_edit
from lsp_assist.telemetry import metrics, shown
from lsp_assist.telemetry.retention import RETAIN_AFTER_ENV
from tests.serving.fakes import CharBackend

COUNTS: list[tuple[ModuleType, str, int]] = [
    (tokens, "TOKEN_CACHE_CHUNKS", 40),
    (syntax, "CONTEXT_TREES", 3),
    (summaries, "OUTLINE_FILES", 3),
    (retriever, "RESOLVE_MEMO", 6),
    (retriever, "TEXT_FILES", 3),
    (retriever, "RENDERED_DEFINITIONS", 5),
    (retriever, "USAGE_FILES", 2),
    (retriever, "API_FILES", 2),
    (retriever, "FORWARD_FILES", 2),
    (render, "LINE_CACHE_FILES", 3),
    (usage, "IDENT_LINES", 50),
    (similar, "SIMILAR_FILES", 3),
    (known_code, "KNOWN_FILES", 3),
    (memory, "MEMORY_SLOTS", 3),
    (symbols, "UNPACKED_ENTRIES", 3),
    (symbols, "LOOKUP_CACHE_SYMBOLS", 24),
    (shown, "MAX_OFFERED", 5),
    (shown, "MAX_PROBES", 2),
    (shown, "SUGGESTION_ITEMS", 3),
    (next_edit, "REMEMBERED", 3),
    (metrics, "METRICS_MAX_BYTES", 3_000),
    (metrics, "METRICS_BACKUPS", 1),
    # not a bound: the memos' time to live, so that a slow machine (the run takes seconds)
    # does not empty them before they reach their bound (the verdict must not depend on speed)
    (retriever, "RESOLVE_TTL_S", 3_600),
]
"""The count bounds made small for the run over small files (module, name, value)."""

SIZES: list[tuple[ModuleType, str, int]] = [
    (tokens, "TOKEN_CACHE_TOKENS", 4_000),
    (syntax, "CONTEXT_TREE_BYTES", 200_000),
    (render, "LINE_CACHE_CHARS", 60_000),
    (metrics, "METRICS_MAX_BYTES", 3_000),
]
"""The bounds in bytes, characters or tokens made small for the run over large files."""

SETTINGS = {"recentFiles": 3, "cacheEntries": 4, "fileCacheMb": 1}
"""The settings that bound structures, made small too."""

REACHED_COUNTS = {
    "tokens.chunks",
    "trees.files",
    "outline.files",
    "retriever.denied",
    "retriever.resolved",
    "retriever.texts",
    "retriever.rendered",
    "retriever.usage",
    "retriever.apis",
    "retriever.forwards",
    "lines.files",
    "idents.lines",
    "similar.files",
    "known_code.files",
    "recent_files",
    "buffers.recent",
    "prompt_memory.slots",
    "symbols.unpacked",
    "symbols.lookups",
    "symbols.lookup_names",
    "typethrough.entries",
    "engine.last_outcomes",
    "shown.offered",
    "shown.probes",
    "next_edits.answered",
    "metrics.disk",
}
REACHED_SIZES = {"tokens.ids", "trees.bytes", "lines.chars", "index.file_cache", "metrics.disk"}
"""What each run feeds past its bound: each must have reached it (its eviction ran).
Sizes counted in bytes, characters or tokens reach half their bound at least (an entry
that would pass it is not added, or the memo is emptied first)."""

PROFILES = {
    "counts": (COUNTS, REACHED_COUNTS, 0),
    "sizes": (SIZES, REACHED_SIZES, 900),
}
"""Small files with small count bounds; large files (filler lines) with small size bounds:
either kind of bound of a cache reached on its own."""

MODULES = 14
USERS = 12
SUGGESTION = "combined + extra_value"


class FixedBackend(CharBackend):
    """A model that always writes :data:`SUGGESTION` (one character per token)."""

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """The same text whatever the prompt, timed as a backend times it."""
        started = time.perf_counter()
        self.calls += 1
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        result.tokens = [ord(c) for c in SUGGESTION]
        result.text, result.stop_reason = SUGGESTION, "eos"
        result.finish(started)
        return result


class QuietClient:
    """The editor's side: messages and progress, not kept."""

    def warn(self, message: str, *, error: bool = False) -> None:
        """Drop a message."""

    async def begin_progress(self, token: str, title: str) -> bool:
        """No work-done progress."""
        return False

    def report_progress(self, token: str, message: str, percentage: int) -> None:
        """Nothing to report to."""

    def end_progress(self, token: str, message: str) -> None:
        """Nothing to end."""


def make_workspace(root: Path, filler: int) -> list[Path]:
    """Modules with definitions (and ``filler`` more lines each), two packages re-exporting
    them, and files that use them (a sixth of ``filler`` more lines each)."""
    packages = [root / "pkg", root / "pkg2"]
    for package in packages:
        package.mkdir()
    exports = []
    for i in range(MODULES):
        body = [f'"""Module {i}."""', "", "", f"def func_{i}(first, second):"]
        body += [f"    value_{i}_{k} = first * {k} + second" for k in range(8)]
        body += [f"    return value_{i}_0 + value_{i}_7", "", "", f"class Thing_{i}:"]
        body += [f"    def __init__(self, size_{i}):", f"        self.size = size_{i}", ""]
        body += [
            f"FILLER_{i}_{k} = {k} * {i} + len('lines that make the file big')"
            for k in range(filler)
        ]
        (packages[0] / f"mod_{i}.py").write_text("\n".join(body) + "\n")
        exports.append(f"from pkg.mod_{i} import Thing_{i}, func_{i}")
    for package in packages:
        (package / "__init__.py").write_text("\n".join(exports) + "\n")
    users = []
    for j in range(USERS):
        a, b, c = j % MODULES, (j + 5) % MODULES, (j + 9) % MODULES
        lines = [
            f"import pkg.mod_{a} as mod_{a}",
            f"from {packages[j % 2].name} import Thing_{b}, func_{b}",
            f"from pkg.mod_{c} import func_{c}",
            "",
            "",
            "def handle(width, height):",
            f"    thing = Thing_{b}(width)",
            f"    combined = func_{b}(width, height) + mod_{a}.func_{a}(height, width)",
            f"    extra_value = func_{c}(thing.size, width)",
            "    return combined",
            "",
        ]
        lines += [f"LOCAL_{k} = {k} + len('user file lines')" for k in range(filler // 6)]
        path = root / f"use_{j}.py"
        path.write_text("\n".join(lines) + "\n")
        users.append(path)
    return users


def settings(cache: Path) -> Settings:
    values: dict[str, object] = {
        "metrics": True,
        "cacheDir": str(cache),
        "persist": False,
        "watch": False,
        "debounceMs": 0,
        "answerAfterMs": 0,
        "contextBudget": 768,
        "nextEdit": "symbolic",
        **SETTINGS,
    }
    parsed, warnings = parse_settings(values)
    assert isinstance(parsed, Settings) and not warnings, warnings
    return parsed


class Watch:
    """``Service.memory`` after every step: nothing over its bound, the peak of each."""

    def __init__(self, service: Service) -> None:
        self.service = service
        self.peak: dict[str, int] = {}
        self.bound: dict[str, tuple[int, str]] = {}
        self.samples = 0

    def check(self, step: str) -> None:
        answer = self.service.memory()
        over = [
            f"{s['name']}: {s['size']:,} {s['unit']} over {s['bound']:,} ({s['by']})"
            for s in answer["structures"]
            if s["size"] > s["bound"]
        ]
        assert not over, f"after {step}: " + "; ".join(over)
        assert answer["over"] == []
        for s in answer["structures"]:
            self.peak[s["name"]] = max(self.peak.get(s["name"], 0), s["size"])
            self.bound[s["name"]] = (s["bound"], s["unit"])
        self.samples += 1


class Evictions:
    """The retriever's memos that were full when a new key came (their eviction ran). A
    memo emptied when full may be sampled at any size below its bound: a build resolves
    several imports at once, and which builds run depends on the machine's speed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.full: set[int] = set()
        keep = retriever._keep

        def counted(memo: dict[Any, Any], key: Any, value: Any, limit: int) -> None:
            if key not in memo and len(memo) >= limit:
                self.full.add(id(memo))
            keep(memo, key, value, limit)

        monkeypatch.setattr(retriever, "_keep", counted)

    def ran(self, service: Service) -> set[str]:
        """The names (as ``Service.memory`` lists them) of the memos whose eviction ran."""
        engine = service.session.context_engine()
        assert engine is not None
        memos = {
            "retriever.denied": engine.retriever._denied,
            "retriever.resolved": engine.retriever._resolved,
            "retriever.texts": engine.retriever._texts,
            "retriever.rendered": engine.retriever._render_cache,
            "retriever.forwards": engine.retriever._forwards,
            "retriever.usage": engine.retriever._usage,
            "retriever.apis": engine.retriever._apis,
        }
        return {name for name, memo in memos.items() if id(memo) in self.full}


async def until(condition: Callable[[], bool], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("profile", sorted(PROFILES))
async def test_what_grows_with_use_stays_within_its_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, profile: str
) -> None:
    small, reached, filler = PROFILES[profile]
    for module, name, value in small:
        assert hasattr(module, name), f"{module.__name__}.{name}"
        monkeypatch.setattr(module, name, value)
    # not a bound: accepts are measured RETAIN_AFTER_S after; held past the run, so that a
    # slow machine does not measure them before they reach MAX_PROBES
    monkeypatch.setenv(RETAIN_AFTER_ENV, "3600")
    evictions = Evictions(monkeypatch)
    root = tmp_path / "ws"
    root.mkdir()
    users = make_workspace(root, filler)
    service = Service(
        settings(tmp_path / "cache"),
        client=QuietClient(),
        workspace=root,
        backend_factory=lambda _settings: FixedBackend(),
    )
    watch = Watch(service)
    versions: dict[str, int] = {}
    try:
        service.start()
        await until(lambda: service.ready)
        assert service.session.index is not None
        await asyncio.to_thread(service.session.index.scan)
        watch.check("the start")
        for round_ in range(3):
            for j, path in enumerate(users):
                uri = path.as_uri()
                if uri not in versions:
                    versions[uri] = 1
                    service.open(uri, path.read_text(), version=1, language_id="python")
                    watch.check(f"opening {path.name}")
                await type_a_line(service, watch, versions, uri, round_ * USERS + j)
                ghost = (root / f"never_opened_{round_}_{j}.py").as_uri()
                assert (
                    await service.suggest(ghost, 0, 0, "utf-16", automatic=True, inline=True)
                    is None
                )
                watch.check("a request for a document never opened")
                if j % 4 == 3:
                    await rename_and_ask(service, watch, versions, uri, round_)
                    await service.explain(uri, 6, 4, "utf-16")
                    watch.check("an explain")
                if len(versions) > 4:  # the oldest closes
                    oldest = next(iter(versions))
                    service.close_document(oldest)
                    del versions[oldest]
                    watch.check("a close")
            service.apply_settings({"maxLines": 6 + round_})
        await until(lambda: not any(service.memory()["in_flight"].values()))
        metrics_log = service.session.metrics
        assert metrics_log is not None and metrics_log.flush(120)
        watch.check("the end")
        evicted = evictions.ran(service)
    finally:
        service.close()
    missed = []
    for name in sorted(reached):
        assert name in watch.peak, f"{name} was never listed"
        bound, unit = watch.bound[name]
        need = bound // 2 if unit in ("bytes", "characters", "tokens") else bound
        if watch.peak[name] < need and name not in evicted:
            missed.append(f"{name}: peak {watch.peak[name]:,} of {bound:,} {unit}")
    assert not missed, "not fed up to its bound (eviction never ran): " + "; ".join(missed)
    doc = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    undocumented = [name for name in sorted(watch.peak) if f"`{name}`" not in doc]
    assert not undocumented, f"not in docs/configuration.md, What grows with use: {undocumented}"


async def type_a_line(
    service: Service, watch: Watch, versions: dict[str, int], uri: str, n: int
) -> None:
    """Type a new line in ``handle`` key by key, asking at each key; show each suggestion,
    type through the first one shown and accept it."""
    line, text = 9, f"    total_{n} = combined * {n} + func_"
    versions[uri] += 1
    service.change(uri, versions[uri], [((line, 0, line, 0), "\n")], "utf-16")
    for column, char in enumerate(text):
        versions[uri] += 1
        service.change(uri, versions[uri], [((line, column, line, column), char)], "utf-16")
        found = await service.suggest(uri, line, column + 1, "utf-16", automatic=True, inline=True)
        watch.check(f"a key in {uri.rsplit('/', 1)[-1]}")
        if found is not None and column % 4 == 0:  # the others the editor never showed
            service.shown(found.items[0])
    column = len(text)
    for char in SUGGESTION[:6]:  # through the suggestion: each rest shown continues it
        versions[uri] += 1
        service.change(uri, versions[uri], [((line, column, line, column), char)], "utf-16")
        column += 1
        found = await service.suggest(uri, line, column, "utf-16", automatic=True, inline=True)
        if found is not None:
            service.shown(found.items[0])
        watch.check("typing through")
    if found is not None:
        service.accept(found.items[0])
        watch.check("an accept")


async def rename_and_ask(
    service: Service, watch: Watch, versions: dict[str, int], uri: str, round_: int
) -> None:
    """Rename ``handle``'s first parameter and ask for the next edits (its references)."""
    doc = service.session.buffers.get(uri)
    assert doc is not None
    header = doc.text.split("\n")[5]
    start = header.index("(") + 1
    end = header.index(",")
    versions[uri] += 1
    new = f"w{round_}"
    service.change(uri, versions[uri], [((5, start, 5, end), new)], "utf-16")
    edits = await service.propose_edits(uri, versions[uri], (5, start + len(new)), "utf-16")
    watch.check("next edits")
    assert edits, "a renamed parameter leaves references to rename"
