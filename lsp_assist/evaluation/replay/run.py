"""``lsp-assist bench --replay``: how much of a user's code the suggestions write at typing pace.

A simulated user retypes regions of real code (tasks.py) at a fixed pace and
never waits for an answer; at every key the row's :class:`Suggester` hears of the change
and answers when it can; at each key moment the user sees what the screen shows
(user.py) and takes it (Tab, word by word) once it has been on screen for the
reaction time, or types over it. Every row runs the same regions and keys with the same
model: ``default`` and ``plain`` are lsp-assist servers (client.py, the Neovim
plugin's timing) with their settings as initializationOptions, ``llamavim`` is
llama.vim's algorithm against llama-server (peers/llamavim/), ``llmls`` llm.nvim on llm-ls
against llama-cpp-python's server (peers/llmls.py), ``oracle`` the ceiling without a model
(oracle.py). Each row runs at every pace and every reaction time asked for.
Figures, table and plot: report.py. docs/evaluation.md, "Acceptance replay".
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.replay.client import DEBOUNCE_MS
from lsp_assist.evaluation.replay.tasks import (
    Region,
    choose_regions,
    index_regions,
    key_sequence,
    region_buffers,
    within_line,
)
from lsp_assist.evaluation.replay.user import Screen, decide, takeable
from lsp_assist.evaluation.suggester import KeyAware, Suggester

DEFAULT_ROWS = ("default", "plain")
PACES = ("steady", "bursty")
PAUSE_MS = 600
"""The bursty pace's pause after a line end and after ``(`` and ``.``."""
REACT_MS = 150.0
"""The user's reaction time by default: a suggestion is taken only once it has been on
screen this long (0: the moment it shows, as the replay did before)."""
DEFAULT_REGIONS = 16
PLAIN_SETTINGS: dict[str, Any] = {
    "layerFileSummary": False,
    "layerProjectSummary": False,
    "layerRelated": False,
    "layerSimilar": False,
    "relatedRatio": 0.0,
    "summaryRatio": 0.0,
}
"""The ``plain`` row: the editing zone alone (plain FIM of the file around the cursor), at
the same budget as ``default``: with the ratios of the layers that are off at 0, the
zone's share is the budget less the instructions' share and its group cap twice that, so
it may take all that the instructions leave; with the default ratios its share is 40 %
and its widening stops at its cap, 80 % (context/budget.py, zone.py: ``zone_room``)."""
SWITCHED_OFF: dict[str, dict[str, Any]] = {
    "kept-off": {"keptLines": 0},
    "kept-1": {"keptLines": 1},
    "kept-2": {"keptLines": 2},
    "next-line-off": {"nextLineAtEnd": False},
    "block-off": {"dynamicMultiline": False},
    "draft-off": {"draft": "off", "batchInvariant": False},
    "draft-on": {"draft": "prompt-lookup", "batchInvariant": True},
}
"""Rows that are the default with one piece switched: kept lines off (the generation ends
at the line break), or one or two kept where the default keeps four (kept-1, kept-2);
the next line at a finished line's end off (nothing shown there); a line that opens a
block shown alone, its body kept for the next lines (block-off); drafting off (plain
single-row decoding, the fastest, and the default since 2026-12-07, so this row repeats
``default`` and measures the run's noise); drafting on (prompt lookup with
batch-invariant steps, the default before)."""
PEER_ROWS = ("llamavim", "llmls")
"""Rows that are another tool's client, not an lsp-assist server."""
SERVER_ROWS = ("default", "plain", *SWITCHED_OFF)
"""Rows that are lsp-assist servers (the metrics log, the budget)."""
ROW_NAMES = (*SERVER_ROWS, *PEER_ROWS, "oracle")
LLAMAVIM_MODULE = "lsp_assist.evaluation.peers.llamavim.client"


def server_settings(name: str) -> dict[str, Any]:
    """Return what a server row sets over the defaults (``plain``, a switched-off row)."""
    if name == "plain":
        return dict(PLAIN_SETTINGS)
    return dict(SWITCHED_OFF.get(name, {}))


@dataclass
class ReplayConfig:
    """What one ``bench --replay`` runs."""

    workspace: Path
    model: Path
    exclude: list[str] = field(default_factory=list)
    regions: int = DEFAULT_REGIONS
    pace_ms: float = 180.0
    paces: tuple[str, ...] = ("steady",)
    react_ms: tuple[float, ...] = (REACT_MS,)
    """Reaction times to run every row with (each a run of its own: the user's choices
    change the keys the client sees)."""
    debounce_ms: float = DEBOUNCE_MS
    """The lsp-assist rows' client debounce (the Neovim plugin's; 0: ask at every key)."""
    rest_ms: float = 2000.0
    rows: tuple[str, ...] = DEFAULT_ROWS
    settings: dict[str, str] = field(default_factory=dict)
    seed: int = 14
    scratch: Path | None = None
    keep: bool = False


def gap_after(key: str, pace: str, pace_ms: float) -> float:
    """Return the seconds between a key that inserted ``key`` and the next one."""
    if pace == "bursty" and ("\n" in key or key.rstrip().endswith(("(", "."))):
        return PAUSE_MS / 1000
    return pace_ms / 1000


def cursor_at(region: Region, p: int) -> tuple[int, int]:
    """Return the (line, character) of the cursor once ``p`` characters of the region are typed."""
    typed = region.target[:p]
    newlines = typed.count("\n")
    if not newlines:
        return region.start, len(region.indent) + p
    return region.start + newlines, p - (typed.rfind("\n") + 1)


async def replay_region(
    suggester: Suggester,
    path: Path,
    text: str,
    region: Region,
    *,
    pace: str,
    pace_ms: float,
    rest_s: float,
    react_s: float = 0.0,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Retype one region through ``suggester``; return its key records and distinct suggestions.

    ``text`` is the file as it is; the buffer opens with the region removed. The user
    takes a suggestion only once it has been on screen ``react_s`` seconds (of one that grew,
    the part on screen that long: ``ready_text``); a key record's ``too_new`` says that a
    user without that wait would have taken it where this one typed.
    """
    before, after = region_buffers(text, region)
    version = 1
    await suggester.open(path, before + after, version)
    await suggester.rest(path, region.start, len(region.indent), rest_s)
    screen = Screen()
    target = region.target
    p = 0
    plan: tuple[str, ...] = ()
    keys: list[dict[str, Any]] = []
    t0 = deadline = time.perf_counter()
    while p < len(target):
        moment = time.perf_counter()
        shown = screen.at(version, moment)
        new = shown is not None and not any(k["shown_id"] == shown.id for k in keys)
        readable = takeable(shown, moment, react_s)
        whole = shown is not None and readable == shown.text
        action = decide(target, p, readable, plan, tab=whole)
        too_new = (
            shown is not None
            and not whole
            and action.kind == "type"
            and decide(target, p, shown.text).kind != "type"
        )
        plan = action.plan if action.kind == "word" else ()
        keys.append(
            {
                "region": region.id,
                "i": len(keys),
                "at_ms": round((moment - t0) * 1000, 1),
                "pos": p,
                "version": version,
                "first": p == 0,
                "within_line": within_line(target, p),
                "shown": shown.text if shown else None,
                "shown_id": shown.id if shown else None,
                "new": new,
                "latency_ms": round(shown.latency_ms, 1) if shown and new else None,
                "age_ms": round((moment - shown.since) * 1000, 1) if shown else None,
                "ready": readable is not None,
                "ready_text": readable if readable is not None and not whole else None,
                "too_new": too_new,
                "kind": action.kind,
                "text": action.text,
            }
        )
        p += len(action.text)
        version += 1
        line, column = cursor_at(region, p)
        now = time.perf_counter()
        screen.key_times[version] = now
        screen.after_key(action.text, version, action.kind)
        if isinstance(suggester, KeyAware):
            suggester.key_kind(action.kind, screen.current is not None)
        suggester.key(path, before + target[:p] + after, line, column, version, screen.add)
        deadline += gap_after(action.text, pace, pace_ms)
        await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
    shown_records = [
        {
            "region": region.id,
            "id": d.id,
            "text": d.text,
            "latency_ms": round(d.latency_ms, 1),
            "accepted": d.accepted,
            "typed_through": d.typed_through,
            "request_id": d.request_id,
        }
        for d in screen.distinct
    ]
    return keys, shown_records


async def replay_row(
    suggester: Suggester,
    root: Path,
    regions: Sequence[Region],
    *,
    pace: str,
    pace_ms: float,
    rest_s: float,
    react_s: float = 0.0,
    progress: Progress | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Start ``suggester`` on ``root``, replay every region, stop it; return keys and shown.

    Each region is deleted on disk in ``root`` (the workspace copy) while it is typed and
    restored before its buffer closes, so that nothing the server reads holds it.
    """
    keys: list[dict[str, Any]] = []
    shown: list[dict[str, Any]] = []
    await suggester.start(root)
    try:
        for region in regions:
            path = root / region.path
            original = path.read_bytes()
            text = original.decode("utf-8")
            before, after = region_buffers(text, region)
            path.write_text(before + after, encoding="utf-8")
            try:
                k, s = await replay_region(
                    suggester,
                    path,
                    text,
                    region,
                    pace=pace,
                    pace_ms=pace_ms,
                    rest_s=rest_s,
                    react_s=react_s,
                )
            finally:
                path.write_bytes(original)
            await suggester.close_file(path, text)
            keys += k
            shown += s
            if progress is not None:
                progress.step(f"{suggester.label} {pace} {region.id}")
    finally:
        await suggester.stop()
    return keys, shown


def threads_of(settings: dict[str, str]) -> int:
    """Return the threads a row's model runs with (``--setting threads``, else the machine's)."""
    from lsp_assist.config import machine_cpus, parse_settings

    parsed, _ = parse_settings(settings)
    return parsed.model.threads or machine_cpus()


def check_rows(rows: Sequence[str]) -> str:
    """Return why ``rows`` cannot run ('' when they can): unknown names, llama.vim missing."""
    unknown = sorted(set(rows) - set(ROW_NAMES))
    if unknown or not rows:
        return f"unknown rows {','.join(unknown) or '(none)'} (rows: {','.join(ROW_NAMES)})"
    if "llamavim" in rows and importlib.util.find_spec(LLAMAVIM_MODULE) is None:
        return (
            f"row llamavim needs {LLAMAVIM_MODULE} (LlamaVimSuggester), which this checkout "
            "does not have yet"
        )
    return ""


def make_suggester(
    name: str, config: ReplayConfig, base: dict[str, Any], regions: Sequence[Region] = ()
) -> Suggester:
    """Return a fresh suggester for row ``name`` (a server, a peer's client, the oracle)."""
    if name == "oracle":
        from lsp_assist.evaluation.replay.oracle import OracleSuggester

        return OracleSuggester(regions)
    if name == "llmls":
        from lsp_assist.evaluation.peers.llmls import LlmLsSuggester

        return LlmLsSuggester(
            model_path=config.model, threads=threads_of(config.settings), seed=config.seed
        )
    if name == "llamavim":
        module = importlib.import_module(LLAMAVIM_MODULE)
        suggester: Suggester = module.LlamaVimSuggester(
            model_path=config.model, threads=threads_of(config.settings), seed=config.seed
        )
        return suggester
    from lsp_assist.evaluation.replay.client import ServerSuggester
    from lsp_assist.evaluation.server_row import clean_env

    options = {**base, **server_settings(name), **config.settings}
    options["modelPath"] = str(config.model)
    return ServerSuggester(name, options, env=clean_env(False), debounce_ms=config.debounce_ms)


def row_settings(name: str, config: ReplayConfig) -> dict[str, Any]:
    """Return what a row's table line says it ran with."""
    if name in PEER_ROWS:
        return {"threads": threads_of(config.settings), "seed": config.seed}
    if name == "oracle":
        return {}
    return {**server_settings(name), **config.settings}


def run_replay(config: ReplayConfig, command: str) -> dict[str, Any]:
    """Copy the workspace, choose the regions, mark their cross-file lines, run every row at
    every pace and reaction time; return the result."""
    from lsp_assist.evaluation import report
    from lsp_assist.evaluation.workspace import prepare_workspace

    workspace, _ = prepare_workspace(
        config.workspace,
        config.exclude,
        cross_file=0,
        in_file=0,
        typing=0,
        seed=config.seed,
        scratch=config.scratch,
    )
    try:
        regions = choose_regions(workspace.root, workspace.files, config.regions, config.seed)
        if not regions:
            raise RuntimeError(
                f"no region of 3-8 lines inside a function body in {config.workspace}"
            )
        regions = index_regions(workspace.root, config.exclude, workspace.cache_dir, regions)
        base = {**workspace.options(), "logPrompts": False}
        runs = [(n, p, r) for n in config.rows for p in config.paces for r in config.react_ms]
        progress = Progress(len(regions) * len(runs))
        rows = [
            run_one_row(config, base, workspace.root, regions, name, pace, react, progress)
            for name, pace, react in runs
        ]
        progress.close()
    finally:
        if not config.keep:
            workspace.cleanup()
    return {
        "meta": {
            "command": command,
            "date": report.now(),
            "machine": report.machine(),
            "commit": report.commit(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
            "model": str(config.model),
            "workspace": str(config.workspace),
            "seed": config.seed,
            "pace_ms": config.pace_ms,
            "pause_ms": PAUSE_MS,
            "paces": list(config.paces),
            "rest_ms": config.rest_ms,
            "react_ms": list(config.react_ms),
            "debounce_ms": config.debounce_ms,
            "settings": dict(config.settings),
            "regions": len(regions),
            "keys_needed": sum(len(key_sequence(r.target)) for r in regions),
            "chars": sum(len(r.target) for r in regions),
            "cross_lines": sum(len(r.cross_lines) for r in regions),
            "lines": sum(r.end - r.start for r in regions),
            "work": str(workspace.scratch) if config.keep else "",
        },
        "regions": [r.to_json() for r in regions],
        "rows": rows,
    }


def run_one_row(
    config: ReplayConfig,
    base: dict[str, Any],
    root: Path,
    regions: Sequence[Region],
    name: str,
    pace: str,
    react_ms: float,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Run row ``name`` at ``pace`` with a ``react_ms`` user over every region; return its
    results.json row (with ``error`` when it failed: the other rows go on)."""
    from lsp_assist.evaluation.replay import report as replay_report

    started = time.perf_counter()
    row: dict[str, Any] = {
        "name": name,
        "label": name,
        "pace": pace,
        "react_ms": react_ms,
        "settings": row_settings(name, config),
    }
    cache_dir = Path(base.get("cacheDir", ""))
    logged = _logged_ids(cache_dir) if name in SERVER_ROWS else set()
    try:
        suggester = make_suggester(name, config, base, regions)
        row["label"] = getattr(suggester, "label", name)
        row["debounce_ms"] = getattr(suggester, "debounce_ms", None)
        keys, shown = asyncio.run(
            replay_row(
                suggester,
                root,
                regions,
                pace=pace,
                pace_ms=config.pace_ms,
                rest_s=config.rest_ms / 1000,
                react_s=react_ms / 1000,
                progress=progress,
            )
        )
    except Exception as exc:  # one row failing keeps the others' figures
        if progress is not None:
            progress.note(f"row {name} ({pace}) failed: {type(exc).__name__}: {exc}")
        row.update(error=f"{type(exc).__name__}: {exc}", summary={}, keys=[], shown=[])
        return row
    if name in SERVER_ROWS:
        _join_confidence(shown, cache_dir)
        row["requests"] = _row_requests(cache_dir, logged)
        row["budget"] = dict(getattr(suggester, "budget", {}))
    row["stats"] = dict(getattr(suggester, "stats", {}))
    row["messages"] = list(getattr(suggester, "messages", []))
    row["wall_s"] = round(time.perf_counter() - started, 1)
    row["summary"] = replay_report.summarize(keys, shown, regions, row.get("requests"))
    row["keys"], row["shown"] = keys, shown
    return row


def _metrics_dirs(cache_dir: Path) -> list[Path]:
    from lsp_assist.config import parse_settings
    from lsp_assist.telemetry import all_metrics_dirs

    return list(all_metrics_dirs(parse_settings({"cacheDir": str(cache_dir)})[0]))


def _logged_ids(cache_dir: Path) -> set[str]:
    """Return the request ids the workspace copy's metrics log holds already."""
    from lsp_assist.telemetry import read_records

    return {r.request_id for r in read_records(_metrics_dirs(cache_dir)) if r.request_id}


REQUEST_FIELDS = (
    "request_id",
    "trigger",
    "cache_hit",
    "cancelled",
    "prompt_tokens",
    "reused_tokens",
    "output_tokens",
    "drafting",
    "prefill_ms",
    "decode_ms",
    "engine_ms",
)
"""What results.json keeps of each request a server row logged (its model time)."""


def _row_requests(cache_dir: Path, logged: set[str]) -> list[dict[str, Any]]:
    """Return the requests the row's server logged: the records whose request id the
    metrics log did not hold before the row (rows share the workspace copy's cache)."""
    from lsp_assist.telemetry import read_records

    fresh = [
        r
        for r in read_records(_metrics_dirs(cache_dir))
        if r.request_id and r.request_id not in logged
    ]
    return [{name: getattr(r, name) for name in REQUEST_FIELDS} for r in fresh]


def _join_confidence(shown: list[dict[str, Any]], cache_dir: Path) -> None:
    """Give each shown suggestion the confidence its request logged (the server's metrics
    log under the workspace copy's cache): what a confidence gate would be tuned on."""
    from lsp_assist.telemetry import read_records

    confidence = {
        r.request_id: r.confidence for r in read_records(_metrics_dirs(cache_dir)) if r.request_id
    }
    for record in shown:
        record["confidence"] = confidence.get(str(record.get("request_id", "")))


def read_results(path: Path) -> dict[str, Any]:
    """Read a replay's results.json and recompute every row's figures from its records."""
    import json

    from lsp_assist.evaluation.replay import report as replay_report
    from lsp_assist.evaluation.replay.tasks import regions_from_json

    result: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    regions = regions_from_json(result["regions"])
    for row in result["rows"]:
        if not row.get("error"):
            row["summary"] = replay_report.summarize(
                row["keys"], row["shown"], regions, row.get("requests")
            )
    return result


def write_outputs(out: Path, result: dict[str, Any]) -> list[Path]:
    """Write results.json, table.md and replay.png to ``out``; return their paths."""
    from lsp_assist.evaluation import report
    from lsp_assist.evaluation.replay import report as replay_report

    out.mkdir(parents=True, exist_ok=True)
    written = [report.write_json(out / "results.json", result)]
    table = out / "table.md"
    table.write_text(replay_report.markdown(result), encoding="utf-8")
    written.append(table)
    written += replay_report.plot(result, out)
    return written
