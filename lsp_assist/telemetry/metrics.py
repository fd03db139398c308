"""Per-request metrics: one JSON line per request in a local, rotated log.

The log lives in the cache directory (``metrics_dir``), never leaves the machine, and
holds no code or prompt text unless prompt logging (``logPrompts``) is on. Files rotate
like ``logging.handlers.RotatingFileHandler``: ``metrics.jsonl`` is written, and when it
would pass ``max_bytes`` it becomes ``metrics.jsonl.1`` (older ones shift to ``.2`` ...,
the oldest beyond ``backups`` is deleted). An accepted suggestion adds an event line
``{"event": "accept", "request_id": ..., "ts": ...}`` that :func:`read_records` joins
back onto its request; a shown suggestion's outcome is a line with ``"event": "shown"``
(:class:`~lsp_assist.telemetry.shown.ShownRecord`, read by :func:`read_shown`). See
docs/telemetry.md.

:class:`MetricsLog` owns the writing: ``record`` and ``mark_accepted`` only turn the
record into its line and queue it, so the thread that calls them (the event loop for a
type-through hit or an accept) never touches the file system; one writer thread per
log appends the lines (and rotates), started with the first line and ended after
:data:`WRITER_IDLE_S` without one, or by ``close`` (which first writes what is queued,
as ``flush`` does). Logs left open are flushed at interpreter exit.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import logging
import os
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsp_assist.backends.base import BACKEND_USAGE_FIELDS, BackendUsage
from lsp_assist.config import Bounded, Settings, cache_root, workspace_cache_dir
from lsp_assist.telemetry.retention import KEYS_EVENT, RETAINED_EVENT, KeysRecord, RetainedRecord
from lsp_assist.telemetry.shown import SHOWN_EVENT, ShownRecord, TelemetryEvent

log = logging.getLogger(__name__)

METRICS_FILE = "metrics.jsonl"
"""Name of the live metrics file inside the metrics directory."""

ACCEPT_EVENT = "accept"

WRITER_IDLE_S = 5.0
"""A log's writer thread ends after this long without a line (the next line starts one)."""

METRICS_MAX_BYTES = 5_000_000
"""The live log file is rotated before it would pass this size."""
METRICS_BACKUPS = 3
"""Rotated files kept (``metrics.jsonl.1`` ... ``.3``): the log takes at most
``METRICS_MAX_BYTES`` x (1 + ``METRICS_BACKUPS``) on disk, 20 MB."""
MAX_QUEUED_LINES = 10_000
"""Lines queued for the writer thread at most: a writer that falls this far behind (a
stalled disk) loses the oldest (counted in ``dropped``, a warning once), so the queue
never holds the log in memory."""

_TEXT_FIELDS = ("prompt", "completion")


@dataclass(kw_only=True)
class RequestTimes:
    """A request's own figures, which no backend sees: the one definition of these fields.

    The scheduler, the context engine and early answers measure them (serving's
    ``CompletionOutcome`` composes them with the backend's
    :class:`~lsp_assist.backends.base.BackendUsage`), and the record carries them on;
    docs/telemetry.md defines each. They are declared here, below serving, because the
    record that holds them is telemetry's and is read back by ``lsp-assist stats``.
    """

    layer_tokens: dict[str, int] = field(default_factory=dict)
    """Prompt tokens spent per context layer."""
    debounce_ms: float = 0.0
    """Arrival to the hand-over to the model thread (the debounce wait and checks)."""
    queue_ms: float = 0.0
    """Hand-over to the model thread starting the request (waiting behind older work)."""
    context_ms: float = 0.0
    """Model thread start to the backend call: skip rules, building the prompt."""
    engine_ms: float = 0.0
    """Time on the model thread: context_ms + prefill_ms + decode_ms + post-processing."""
    whole_ms: float = 0.0
    """Arrival to the whole suggestion: ``latency_ms``, or later when the engine answered
    early (``answerAfterMs``) and wrote the rest on for the type-through cache."""
    answered_early: bool = False
    """The editor got the suggestion's start at ``latency_ms``; the rest came at ``whole_ms``."""

    def copy_times(self, other: RequestTimes) -> None:
        """Copy this object's :class:`RequestTimes` fields onto ``other``."""
        for name in REQUEST_TIMES_FIELDS:
            value = getattr(self, name)
            setattr(other, name, dict(value) if isinstance(value, dict) else value)


REQUEST_TIMES_FIELDS = tuple(f.name for f in dataclasses.fields(RequestTimes))
"""Every :class:`RequestTimes` field, in order."""

METRIC_FIELDS = (*BACKEND_USAGE_FIELDS, *REQUEST_TIMES_FIELDS)
"""The metric fields of a record: the backend's usage, then the request's times."""


@dataclass(kw_only=True)
class MetricsRecord(RequestTimes, BackendUsage):
    """What one request cost and how it ended (one line of the metrics log).

    The token counts and times are the :class:`~lsp_assist.backends.base.BackendUsage`
    and :class:`RequestTimes` fields, copied whole from the engine's outcome.
    """

    ts: float = field(default_factory=time.time)
    """When the request was recorded (unix seconds)."""
    request_id: str = ""
    task_type: str = "completion"
    """completion, explain, test ..."""
    language: str = ""
    strategy: str = ""
    """Context strategy: layered or baseline (typethrough for a cache hit)."""
    trigger: str = "invoked"
    """invoked, automatic, typethrough or cli."""
    cancelled: bool = False
    cache_hit: bool = False
    """Answered from the type-through cache without the model."""
    accepted: bool = False
    """The user took the suggestion (joined from accept events when read back)."""
    confidence: float | None = None
    """The mean log probability of the suggestion's first line (None: unknown)."""
    error: str = ""
    prompt: str | None = None
    """Prompt text; only written when prompt logging is on."""
    completion: str | None = None
    """Suggestion text; only written when prompt logging is on."""

    def to_json(self, *, log_prompts: bool = False) -> dict[str, Any]:
        """Return the JSON object written to the log (text fields only with ``log_prompts``)."""
        # the record's own fields first (ts, request_id ...), the usage ones, the texts last
        own = [f.name for f in dataclasses.fields(self) if f.name not in METRIC_FIELDS]
        names = [n for n in own if n not in _TEXT_FIELDS] + [*METRIC_FIELDS, *_TEXT_FIELDS]
        data = {name: getattr(self, name) for name in names}
        data["layer_tokens"] = dict(self.layer_tokens)
        for name in _TEXT_FIELDS:
            if not log_prompts or data.get(name) is None:
                data.pop(name, None)
        data["ts"] = round(self.ts, 6)
        for name in METRIC_FIELDS:
            if name.endswith("_ms"):
                data[name] = round(float(data[name]), 3)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MetricsRecord:
        """Return a record from a log object; unknown keys are ignored, bad values defaulted."""
        kwargs: dict[str, Any] = {}
        defaults = cls()
        for f in dataclasses.fields(cls):
            if f.name not in data:
                continue
            value = data[f.name]
            default = getattr(defaults, f.name)
            kwargs[f.name] = _coerce(value, default, f.name)
        return cls(**kwargs)


def _coerce(value: Any, default: Any, name: str) -> Any:
    """Return ``value`` converted to the type of ``default``, or ``default`` if it cannot be."""
    if name in _TEXT_FIELDS:
        return value if isinstance(value, str) else None
    try:
        if isinstance(default, bool):
            return bool(value)
        if isinstance(default, int):
            return int(value)
        if isinstance(default, float):
            return float(value)
        if isinstance(default, str):
            return str(value)
        if isinstance(default, dict):
            return {str(k): int(v) for k, v in dict(value).items()}
    except (TypeError, ValueError):
        return default
    return value


class MetricsLog:
    """Appends records to a JSON-lines file, rotating it by size, from a writer thread.

    Safe across threads; the callers of ``record`` and ``mark_accepted`` only queue.
    """

    def __init__(
        self,
        path: Path,
        *,
        max_bytes: int | None = None,
        backups: int | None = None,
        log_prompts: bool = False,
    ) -> None:
        self.path = Path(path)
        self.max_bytes = METRICS_MAX_BYTES if max_bytes is None else max_bytes
        self.backups = METRICS_BACKUPS if backups is None else backups
        self.log_prompts = log_prompts
        self._cond = threading.Condition()
        self._queue: deque[bytes] = deque()
        self._queued = 0
        """Lines queued since the log was made; ``_written`` counts those done with."""
        self._written = 0
        self._writer: threading.Thread | None = None
        self._closing = False
        self._warned = False
        self.dropped = 0
        """Lines lost because the queue was full (:data:`MAX_QUEUED_LINES`)."""
        _OPEN_LOGS.add(self)

    def record(self, rec: MetricsRecord) -> None:
        """Queue one request record (never raises: a failing log only warns once)."""
        self._put(rec.to_json(log_prompts=self.log_prompts))

    def mark_accepted(self, request_id: str) -> None:
        """Queue an acceptance event for ``request_id`` (joined by :func:`read_records`)."""
        self._put({"event": ACCEPT_EVENT, "request_id": request_id, "ts": round(time.time(), 6)})

    def record_shown(self, shown: TelemetryEvent) -> None:
        """Queue a shown suggestion's outcome, a retention measurement or a count of keys
        (read back by :func:`read_shown`, :func:`read_outcomes`)."""
        self._put(shown.to_json())

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every line queued so far is written; False when ``timeout`` passed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            target = self._queued
            while self._written < target:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def close(self) -> None:
        """Write what is queued and end the writer thread (a later line starts another)."""
        with self._cond:
            writer = self._writer
            self._closing = True
            self._cond.notify_all()
        if writer is not None and writer is not threading.current_thread():
            writer.join()
        with self._cond:
            self._closing = False

    def _put(self, obj: Mapping[str, Any]) -> None:
        line = (json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n").encode()
        with self._cond:
            if len(self._queue) >= MAX_QUEUED_LINES:
                self._queue.popleft()
                self._written += 1  # done with: a flush waits for it no longer
                self.dropped += 1
                if self.dropped == 1:
                    log.warning("metrics log %s: the writer fell behind, lines lost", self.path)
            self._queue.append(line)
            self._queued += 1
            if self._writer is None:
                self._writer = threading.Thread(
                    target=self._write_queued, name="lsp-assist-metrics", daemon=True
                )
                self._writer.start()
            else:
                self._cond.notify_all()

    def _write_queued(self) -> None:
        """The writer thread: append queued lines until idle (or closing) with none left."""
        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(WRITER_IDLE_S)
                if not self._queue:
                    self._writer = None
                    self._cond.notify_all()
                    return
                lines = list(self._queue)
                self._queue.clear()
            try:
                self._append(lines)
            except Exception:  # a bug, not the disk: keep the writer and its counts going
                log.exception("metrics log %s: lines lost", self.path)
            finally:
                with self._cond:
                    self._written += len(lines)
                    self._cond.notify_all()

    def _append(self, lines: list[bytes]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            for line in lines:
                self._maybe_rotate(len(line))
                with open(self.path, "ab") as fh:
                    fh.write(line)
        except OSError as exc:
            if not self._warned:
                log.warning("metrics log %s not writable: %s", self.path, exc)
                self._warned = True

    def _maybe_rotate(self, incoming: int) -> None:
        """Rotate when appending ``incoming`` bytes would pass ``max_bytes``."""
        if self.max_bytes <= 0:
            return
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.max_bytes:
            return
        if self.backups <= 0:
            self.path.unlink(missing_ok=True)
            return
        for i in range(self.backups - 1, 0, -1):
            src = self.path.with_name(f"{self.path.name}.{i}")
            if src.exists():
                os.replace(src, self.path.with_name(f"{self.path.name}.{i + 1}"))
        os.replace(self.path, self.path.with_name(f"{self.path.name}.1"))

    def files(self) -> list[Path]:
        """Return the log files that exist, oldest first."""
        return log_files(self.path)

    def bounds(self) -> dict[str, Bounded]:
        """The lines queued in memory and the log's bytes on disk, against their bounds."""
        with self._cond:
            queued = len(self._queue)
        on_disk = 0
        for path in self.files():
            try:
                on_disk += path.stat().st_size
            except OSError:
                continue
        disk_bound = self.max_bytes * (1 + max(0, self.backups)) if self.max_bytes > 0 else 0
        where = "telemetry/metrics.py {}"
        return {
            "metrics.queue": Bounded(
                queued, MAX_QUEUED_LINES, "lines", where.format("MAX_QUEUED_LINES")
            ),
            "metrics.disk": Bounded(
                on_disk,
                disk_bound,
                "bytes",
                where.format("METRICS_MAX_BYTES x (1 + METRICS_BACKUPS), on disk"),
            ),
        }


_OPEN_LOGS: weakref.WeakSet[MetricsLog] = weakref.WeakSet()


@atexit.register
def _flush_open_logs() -> None:
    """Write what the logs still hold before the interpreter ends (daemon writers die)."""
    for metrics in list(_OPEN_LOGS):
        metrics.close()


def log_files(dir_or_file: Path) -> list[Path]:
    """Return a metrics log and its rotated files that exist, oldest first."""
    base = Path(dir_or_file)
    if base.is_dir():
        base = base / METRICS_FILE
    rotated: list[tuple[int, Path]] = []
    if base.parent.is_dir():
        prefix = base.name + "."
        for candidate in base.parent.iterdir():
            suffix = candidate.name[len(prefix) :]
            if candidate.name.startswith(prefix) and suffix.isdigit():
                rotated.append((int(suffix), candidate))
    found = [p for _, p in sorted(rotated, reverse=True)]
    if base.is_file():
        found.append(base)
    return found


def _iter_objects(paths: Iterable[Path]) -> Iterable[dict[str, Any]]:
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        obj = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if isinstance(obj, dict):
                        yield obj
        except OSError as exc:
            log.warning("cannot read metrics file %s: %s", path, exc)


def read_records(
    dir_or_file: Path | Sequence[Path], since: float | None = None
) -> list[MetricsRecord]:
    """Return the records of metrics directories or files (rotated files included), by time.

    Acceptance events are joined onto their request (``accepted=True``); records older
    than ``since`` (unix seconds) are left out; malformed lines are skipped.
    """
    records: list[MetricsRecord] = []
    accepted: set[str] = set()
    sources = [dir_or_file] if isinstance(dir_or_file, str | Path) else list(dir_or_file)
    paths = [p for source in sources for p in log_files(Path(source))]
    for obj in _iter_objects(paths):
        if "event" in obj:
            if obj.get("event") == ACCEPT_EVENT and obj.get("request_id"):
                accepted.add(str(obj["request_id"]))
            continue
        records.append(MetricsRecord.from_json(obj))
    for rec in records:
        if rec.request_id and rec.request_id in accepted:
            rec.accepted = True
    if since is not None:
        records = [r for r in records if r.ts >= since]
    records.sort(key=lambda r: r.ts)
    return records


def read_shown(dir_or_file: Path | Sequence[Path], since: float | None = None) -> list[ShownRecord]:
    """Return the shown suggestions' outcomes of metrics directories or files, by time."""
    return read_outcomes(dir_or_file, since).shown


@dataclass
class Outcomes:
    """What became of the suggestions shown: the lines :func:`read_outcomes` reads."""

    shown: list[ShownRecord] = field(default_factory=list)
    retained: list[RetainedRecord] = field(default_factory=list)
    """One per accepted suggestion (the last, if a late accept measured one twice)."""
    keys: list[KeysRecord] = field(default_factory=list)


def read_outcomes(dir_or_file: Path | Sequence[Path], since: float | None = None) -> Outcomes:
    """Return the shown, retained and keys lines of metrics directories or files, by time."""
    sources = [dir_or_file] if isinstance(dir_or_file, str | Path) else list(dir_or_file)
    paths = [p for source in sources for p in log_files(Path(source))]
    out = Outcomes()
    retained: dict[str, RetainedRecord] = {}
    for obj in _iter_objects(paths):
        event = obj.get("event")
        if event == SHOWN_EVENT:
            out.shown.append(ShownRecord.from_json(obj))
        elif event == RETAINED_EVENT:
            record = RetainedRecord.from_json(obj)
            key = record.item or f"#{len(retained)}"
            if key not in retained or retained[key].ts <= record.ts:
                retained[key] = record
        elif event == KEYS_EVENT:
            out.keys.append(KeysRecord.from_json(obj))
    out.retained = list(retained.values())
    if since is not None:
        out.shown = [s for s in out.shown if s.ts >= since]
        out.retained = [r for r in out.retained if r.ts >= since]
        out.keys = [k for k in out.keys if k.ts >= since]
    out.shown.sort(key=lambda s: s.ts)
    out.retained.sort(key=lambda r: r.ts)
    out.keys.sort(key=lambda k: k.ts)
    return out


def metrics_dir(settings: Settings, workspace: Path | None = None) -> Path:
    """Return the metrics directory: the workspace's cache directory, else the cache root."""
    if workspace is not None:
        return workspace_cache_dir(settings, workspace)
    return cache_root(settings)


def all_metrics_dirs(settings: Settings) -> list[Path]:
    """Return every directory under the cache root that holds a metrics log."""
    root = cache_root(settings)
    candidates = [root]
    workspaces = root / "workspaces"
    if workspaces.is_dir():
        candidates += sorted(p for p in workspaces.iterdir() if p.is_dir())
    return [d for d in candidates if log_files(d)]


def metrics_log(settings: Settings, workspace: Path | None = None) -> MetricsLog:
    """Return the metrics log the settings ask for (prompt logging per ``logPrompts``)."""
    return MetricsLog(
        metrics_dir(settings, workspace) / METRICS_FILE,
        log_prompts=settings.telemetry.log_prompts,
    )
