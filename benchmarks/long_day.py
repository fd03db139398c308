"""A long day at the keyboard (issue 47): the real server over a long session, sampled.

Usage:
  .venv/bin/python benchmarks/long_day.py [--requests 50000] [--model coder-0.5b|GGUF]
        [--threads N] [--workspace DIR] [--every 500] [--window 5000] [--trace 0|FRAMES]
        [--top 15] [--checkpoints 5] [--seed 47] [--out DIR]

Starts ``lsp-assist serve`` over stdio on a copy of a workspace of a few hundred real
files (default: the ``pip`` package installed in this virtual environment, 439 files with
its vendored packages; ``--workspace`` another folder, copied too) and replays a working
day with a seeded random typist (:class:`Typist`): each keystroke a didChange and an
inline request (every third invoked, the others automatic), every 7th request cancelled
by the client while the next is sent; a real line of the file deleted and typed again
key by key, the suggestion shown (``didShowCompletion``) and accepted when it is the
rest of the line (the accept command, its text inserted); a file switch every 30
requests (a new file or one open already, the cursor's rest reported, at most 8 open:
the oldest closed), a next-edit request every 100, an explain every 250, an edit of
another file on disk every 150 (every fifth a new file, the one before deleted: the
watcher and the index at work) and a ``didChangeConfiguration`` every 1,000.

Every ``--every`` requests it samples the server: RSS, threads and descriptors (from
/proc), and ``lspAssist.memory`` (every bounded structure's size against its bound, the
work in flight, the Python heap's live blocks and, with ``--trace``, its traced size;
the top allocators at ``--checkpoints`` points). Latency is the client's round trip of
each request answered (not those it cancelled), P50/P90/P99 per ``--window`` requests.
It writes ``results.json``, ``table.md`` and ``long-day.png`` (matplotlib, as ``lsp-assist
stats --plot`` does) into ``--out``, and prints the table.

``--trace N`` runs the server under tracemalloc with N frames (``LSP_ASSIST_TRACEMALLOC``)
for the traced heap and its top allocators. It is off by default: tracing makes the
server slower and bigger (a trace per live block, ~50 bytes; a snapshot for the top
allocators takes hundreds of MB for a moment, and RSS keeps some of it), so RSS and
latency are measured without it and the heap by its live blocks
(``sys.getallocatedblocks``); a traced run says who holds the heap. RSS is read before
each ``lspAssist.memory``. The lead's run: ``--requests 50000 --model coder-0.5b`` on a
quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsp_assist.backends.models import small_model_path  # noqa: E402
from lsp_assist.serving import TRACEMALLOC_ENV  # noqa: E402
from lsp_assist.telemetry import percentile  # noqa: E402
from tests.support.lsp_load import LoadClient, SoakReport, suggestion_of  # noqa: E402

EXCLUDED_PARTS = frozenset({"tests", "test", "__pycache__"})
MAX_OPEN = 8
"""Documents the typist keeps open (the oldest closed past it)."""
PLOTTED = 8
"""Structures drawn on the fill chart: the fullest ones (size / bound) at the end."""


def default_workspace() -> Path:
    """The ``pip`` package of this interpreter's site-packages (a few hundred real files)."""
    import pip

    return Path(pip.__file__).resolve().parent


def copy_workspace(source: Path, target: Path) -> list[Path]:
    """Copy the Python files of ``source`` (tests left out) to ``target``; return them."""
    files: list[Path] = []
    for path in sorted(source.rglob("*.py")):
        rel = path.relative_to(source)
        if EXCLUDED_PARTS.intersection(rel.parts):
            continue
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        files.append(dest)
    return files


@dataclass
class Doc:
    """An open document as the typist holds it."""

    uri: str
    lines: list[str]
    version: int = 1
    line: int = 0
    target: str = ""
    """The line being typed again (its text after the indentation)."""
    indent: str = ""
    typed: str = ""


@dataclass(kw_only=True)
class Tally(SoakReport):
    """What the day did: the soak's counts and the day's other events."""

    opens: int = 0
    closes: int = 0
    accepts: int = 0
    next_edits: int = 0
    explains: int = 0
    disk_edits: int = 0
    configurations: int = 0


_BODY_LINE = re.compile(r"^(\s{4,})(\S.{7,78})$")


class Typist:
    """A seeded typist over a workspace, driving one server (see the module's docstring)."""

    def __init__(self, client: LoadClient, files: list[Path], rng: random.Random) -> None:
        self.client = client
        self.files = files
        self.rng = rng
        self.tally = Tally()
        self.latencies: list[float] = []
        """The round trip (ms) of each answered request, in request order (None-free)."""
        self.latency_at: list[int] = []
        """The request number of each latency."""
        self.docs: dict[Path, Doc] = {}
        self.order: list[Path] = []
        """Open documents, least recently used first."""
        self.current: Path | None = None
        self._pending: list[tuple[int, float]] = []
        self._new_file: Path | None = None
        self._max_lines = 8

    # -- documents -----------------------------------------------------------------

    def _open(self, path: Path) -> Doc:
        text = path.read_text(encoding="utf-8", errors="replace")
        doc = Doc(self.client.open(path, text), text.split("\n"))
        self.docs[path] = doc
        self.tally.opens += 1
        return doc

    def _close(self, path: Path) -> None:
        doc = self.docs.pop(path)
        self.order.remove(path)
        self.client.close_document(doc.uri)
        self.tally.closes += 1

    def _change(self, doc: Doc, line: int, start: int, end: int, text: str) -> None:
        doc.version += 1
        self.client.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "contentChanges": [
                    {
                        "range": {
                            "start": {"line": line, "character": start},
                            "end": {"line": line, "character": end},
                        },
                        "text": text,
                    }
                ],
            },
        )
        old = doc.lines[line]
        doc.lines[line] = old[:start] + text + old[end:]

    def _next_line(self, doc: Doc) -> bool:
        """Pick a line in a body, delete its text (keeping its indentation); False: none.

        Mostly the next such line below the last one (a typist goes on down the function),
        one time in five anywhere in the file.
        """
        candidates = [i for i, text in enumerate(doc.lines) if _BODY_LINE.match(text)]
        if not candidates:
            return False
        below = [i for i in candidates if doc.line < i <= doc.line + 20]
        if below and doc.target and self.rng.random() < 0.8:
            doc.line = below[0]
        else:
            doc.line = self.rng.choice(candidates)
        match = _BODY_LINE.match(doc.lines[doc.line])
        assert match is not None
        doc.indent, doc.target, doc.typed = match.group(1), match.group(2), ""
        self._change(doc, doc.line, len(doc.indent), len(doc.lines[doc.line]), "")
        return True

    def switch(self) -> None:
        """Move to another file: one open already (a third of the time) or a new one."""
        left = self.current
        others = [p for p in self.order if p != left]
        if others and self.rng.random() < 1 / 3:
            path = self.rng.choice(others)
        else:
            path = self.rng.choice(self.files)
        if path not in self.docs:
            doc = self._open(path)
            if not self._next_line(doc):
                self._close_new(path)
                return
        if path in self.order:
            self.order.remove(path)
        self.order.append(path)
        while len(self.order) > MAX_OPEN:
            self._close(self.order[0])
        self.current = path
        self.tally.switches += 1
        doc = self.docs[path]
        self.client.notify(
            "lspAssist/didMoveCursor",
            {
                "textDocument": {"uri": doc.uri, "version": doc.version},
                "position": {"line": doc.line, "character": len(doc.indent) + len(doc.typed)},
            },
        )

    def _close_new(self, path: Path) -> None:
        doc = self.docs.pop(path)
        self.client.close_document(doc.uri)
        self.tally.closes += 1

    # -- requests --------------------------------------------------------------------

    def _collect(self, request_id: int, sent: float, *, timed: bool) -> Any:
        try:
            message = self.client.response(request_id, 300)
        except queue.Empty:
            self.tally.unanswered += 1
            return None
        error = message.get("error")
        if error is not None:
            if error.get("code") == -32800:  # RequestCancelled
                self.tally.cancelled += 1
            else:
                self.tally.errors.append(f"{error.get('code')}: {error.get('message')}")
            return None
        if timed:
            self.latencies.append((time.monotonic() - sent) * 1000)
            self.latency_at.append(self.tally.requests)
        result = message.get("result")
        if suggestion_of(result):
            self.tally.shown += 1
        else:
            self.tally.empty += 1
        return result

    def keystroke(self, number: int) -> None:
        """Type the next character of the line, ask, maybe cancel, show and accept."""
        if self.current is None:
            self.switch()
            return
        doc = self.docs[self.current]
        if len(doc.typed) >= len(doc.target) and not self._next_line(doc):
            self.switch()
            return
        char = doc.target[len(doc.typed)]
        column = len(doc.indent) + len(doc.typed)
        self._change(doc, doc.line, column, column, char)
        doc.typed += char
        self.tally.keystrokes += 1
        request_id = self.client.inline(doc.uri, doc.line, column + 1, automatic=number % 3 != 0)
        sent = time.monotonic()
        self.tally.requests += 1
        for earlier, at in self._pending:
            self._collect(earlier, at, timed=False)
        self._pending.clear()
        if number % 7 == 6:
            self.client.cancel(request_id)
            self.tally.cancels += 1
            self._pending.append((request_id, sent))
            return
        result = self._collect(request_id, sent, timed=True)
        if suggestion_of(result):
            self._show_and_maybe_accept(doc, result)

    def _show_and_maybe_accept(self, doc: Doc, result: Any) -> None:
        items = result.get("items", []) if isinstance(result, dict) else result
        item = items[0]
        arguments = (item.get("command") or {}).get("arguments") or []
        if not arguments:
            return
        self.client.notify("textDocument/didShowCompletion", {"item": item})
        text = suggestion_of(result)
        rest = doc.target[len(doc.typed) :]
        if not rest or "\n" in text or not rest.startswith(text):
            return
        column = len(doc.indent) + len(doc.typed)
        self._change(doc, doc.line, column, column, text)
        doc.typed += text
        self.client.command("lspAssist.accept", arguments[0])
        self.tally.accepts += 1

    def next_edit(self) -> None:
        """Ask for the next edits where the cursor is."""
        doc = self.docs[self.current] if self.current is not None else None
        if doc is None:
            return
        position = {"line": doc.line, "character": len(doc.indent) + len(doc.typed)}
        params = {
            "textDocument": {"uri": doc.uri, "version": doc.version},
            "position": position,
            "context": {"triggerKind": 2},
        }
        self._quiet_request("textDocument/copilotInlineEdit", params)
        self.tally.next_edits += 1

    def explain(self) -> None:
        """Ask what prompt the server would build at the cursor."""
        doc = self.docs[self.current] if self.current is not None else None
        if doc is None:
            return
        column = len(doc.indent) + len(doc.typed)
        params = {"command": "lspAssist.explainContext", "arguments": [doc.uri, doc.line, column]}
        self._quiet_request("workspace/executeCommand", params)
        self.tally.explains += 1

    def _quiet_request(self, method: str, params: Any) -> None:
        request_id = self.client.start(method, params)
        try:
            message = self.client.response(request_id, 300)
        except queue.Empty:
            self.tally.unanswered += 1
            return
        if "error" in message:
            self.tally.errors.append(f"{method}: {message['error'].get('message')}")

    def disk_edit(self, number: int, root: Path) -> None:
        """Change a file that is not open on disk; every fifth time add one (and delete the
        one added before)."""
        if self.tally.disk_edits % 5 == 4:
            if self._new_file is not None:
                self._new_file.unlink(missing_ok=True)
            self._new_file = root / f"long_day_{number}.py"
            self._new_file.write_text(
                f'"""Added by the long day at request {number}."""\n\n\n'
                f"def added_{number}(value):\n    return value + {number}\n"
            )
        else:
            closed = [p for p in self.files if p not in self.docs]
            path = self.rng.choice(closed)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(f"\n\ndef edited_on_disk_{number}():\n    return {number}\n")
        self.tally.disk_edits += 1

    def configure(self) -> None:
        """Change a setting that keeps the model (``maxLines`` 8 <-> 6)."""
        self._max_lines = 6 if self._max_lines == 8 else 8
        self.client.notify(
            "workspace/didChangeConfiguration",
            {"settings": {"lspAssist": {"maxLines": self._max_lines}}},
        )
        self.tally.configurations += 1

    def finish(self) -> None:
        """Collect what is still in flight."""
        for earlier, at in self._pending:
            self._collect(earlier, at, timed=False)
        self._pending.clear()


def sample(client: LoadClient, requests: int, top: int) -> dict[str, Any]:
    """One sample of the server: /proc figures, then ``lspAssist.memory`` (a tracemalloc
    snapshot for the top allocators takes memory of its own: RSS is read before it)."""
    rss, threads, fds = round(client.rss_mb(), 1), client.threads(), client.fds()
    memory = client.command("lspAssist.memory", top)
    process = memory["process"]
    return {
        "requests": requests,
        "rss_mb": rss,
        "threads": threads,
        "fds": fds,
        "python_blocks": process.get("python_blocks"),
        "traced_mb": process.get("traced_mb"),
        "top": process.get("top", []),
        "documents": memory["documents"],
        "sizes": {s["name"]: s["size"] for s in memory["structures"]},
        "bounds": {s["name"]: [s["bound"], s["unit"], s["by"]] for s in memory["structures"]},
        "over": memory["over"],
        "in_flight": memory["in_flight"],
    }


def windows(latencies: list[float], at: list[int], size: int) -> list[dict[str, Any]]:
    """P50/P90/P99 of the latencies of each ``size`` requests (by request number)."""
    out: list[dict[str, Any]] = []
    last = max(at, default=0)
    start = 0
    while start < last:
        chunk = [v for v, n in zip(latencies, at, strict=True) if start < n <= start + size]
        if chunk:
            out.append(
                {
                    "from": start + 1,
                    "to": min(start + size, last),
                    "answered": len(chunk),
                    "p50": round(percentile(chunk, 50) or 0.0, 1),
                    "p90": round(percentile(chunk, 90) or 0.0, 1),
                    "p99": round(percentile(chunk, 99) or 0.0, 1),
                }
            )
        start += size
    return out


def table(results: dict[str, Any]) -> str:
    """The run as markdown: what it did, the samples, the latency windows, the fullest."""
    tally, samples = results["tally"], results["samples"]
    lines = [
        f"model `{Path(results['model']).name}`, threads {results['threads']}, workspace "
        f"{results['workspace']} ({results['files']} files), {tally['requests']:,} requests "
        f"in {tally['seconds'] / 60:.1f} min, tracemalloc {results['trace'] or 'off'}"
        + (" (stopped early: partial)" if results.get("partial") else ""),
        "",
        f"keystrokes {tally['keystrokes']:,}, cancels {tally['cancels']:,}, switches "
        f"{tally['switches']:,}, opens {tally['opens']:,}, closes {tally['closes']:,}, accepts "
        f"{tally['accepts']:,}, next edits {tally['next_edits']:,}, explains "
        f"{tally['explains']:,}, disk edits {tally['disk_edits']:,}, configurations "
        f"{tally['configurations']:,}",
        "",
        f"outcomes: {tally['shown']:,} shown, {tally['empty']:,} empty, {tally['cancelled']:,} "
        f"cancelled, {len(tally['errors'])} errors, {tally['unanswered']} unanswered",
        "",
        "| requests | RSS MB | Python blocks | traced MB | threads | fds | over a bound |",
        "|---:|---:|---:|---:|---:|---:|---|",
    ]
    for row in samples:
        traced = "" if row["traced_mb"] is None else f"{row['traced_mb']:.1f}"
        over = ", ".join(row["over"]) or "none"
        lines.append(
            f"| {row['requests']:,} | {row['rss_mb']:.1f} | {row['python_blocks']:,} | {traced} "
            f"| {row['threads']} | {row['fds']} | {over} |"
        )
    lines += ["", "| requests | answered | P50 ms | P90 ms | P99 ms |", "|---|---:|---:|---:|---:|"]
    for w in results["windows"]:
        lines.append(
            f"| {w['from']:,}-{w['to']:,} | {w['answered']:,} | {w['p50']:.0f} | {w['p90']:.0f} "
            f"| {w['p99']:.0f} |"
        )
    last = samples[-1]
    lines += ["", "| structure | size at the end | peak | bound | unit | named by |"]
    lines.append("|---|---:|---:|---:|---|---|")
    for name, (bound, unit, by) in sorted(last["bounds"].items()):
        peak = max(row["sizes"].get(name, 0) for row in samples)
        lines.append(
            f"| `{name}` | {last['sizes'][name]:,} | {peak:,} | {bound:,} | {unit} | {by} |"
        )
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> Path:
    """Draw memory, threads and descriptors, latency per window and the fullest structures."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    samples = results["samples"]
    x = [row["requests"] for row in samples]
    fig = Figure(figsize=(11, 9), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.subplots(2, 2)
    memory, resources, latency, fill = ax[0][0], ax[0][1], ax[1][0], ax[1][1]
    memory.plot(x, [row["rss_mb"] for row in samples], label="RSS MB")
    if any(row["traced_mb"] is not None for row in samples):
        memory.plot(x, [row["traced_mb"] or 0 for row in samples], label="traced heap MB")
    kv = [row["sizes"].get("kv_states.bytes", 0) / 2**20 for row in samples]
    memory.plot(x, kv, label="saved KV states MB")
    blocks = memory.twinx()
    blocks.plot(
        x, [row["python_blocks"] / 1000 for row in samples], "g:", label="Python blocks (k)"
    )
    blocks.set_ylabel("live Python blocks (thousands)")
    memory.set_title("memory")
    memory.set_xlabel("requests")
    memory.legend(loc="upper left")
    blocks.legend(loc="lower right")
    resources.plot(x, [row["threads"] for row in samples], label="threads")
    resources.plot(x, [row["fds"] for row in samples], label="fds")
    resources.set_title("threads and descriptors")
    resources.set_xlabel("requests")
    resources.legend()
    wins = results["windows"]
    mid = [(w["from"] + w["to"]) / 2 for w in wins]
    for key in ("p50", "p90", "p99"):
        latency.plot(mid, [w[key] for w in wins], marker="o", label=key.upper())
    latency.set_title(f"round trip per {results['window']:,} requests (ms)")
    latency.set_xlabel("requests")
    latency.legend()
    last = samples[-1]
    ratios = {  # what is kept per open document is as full as the documents open
        name: max(row["sizes"].get(name, 0) for row in samples) / bound
        for name, (bound, _, by) in last["bounds"].items()
        if bound > 0 and "open document" not in by
    }
    for name in sorted(ratios, key=lambda n: -ratios[n])[:PLOTTED]:
        bound = last["bounds"][name][0]
        fill.plot(x, [row["sizes"].get(name, 0) / bound for row in samples], label=name)
    fill.axhline(1.0, color="k", linestyle="--", linewidth=0.8)
    fill.set_title("fullest structures: size / bound (not per document)")
    fill.set_xlabel("requests")
    fill.legend(fontsize=7)
    fig.suptitle(
        f"lsp-assist, a long day: {Path(results['model']).name}, threads {results['threads']}, "
        f"{results['tally']['requests']:,} requests"
    )
    fig.tight_layout()
    fig.savefig(path, format="png")
    return path


def run(args: argparse.Namespace, out: Path) -> dict[str, Any]:
    """Replay the day against a fresh server; return the results (``out/results.json``
    is written at each sample too, ``"partial": true`` until the day ends)."""
    rng = random.Random(args.seed)
    tmp = Path(tempfile.mkdtemp(prefix="lsp-assist-long-day-"))
    source = Path(args.workspace) if args.workspace else default_workspace()
    workspace = tmp / "workspace"
    files = copy_workspace(source, workspace)
    env = {k: v for k, v in os.environ.items() if not k.startswith("LSP_ASSIST_")}
    if args.trace:
        env[TRACEMALLOC_ENV] = str(args.trace)
    client = LoadClient(env=env)
    options = {
        "cacheDir": str(tmp / "cache"),
        "model": args.model,
        "threads": args.threads,
    }
    client.initialize_workspace(workspace, options)
    deadline = time.monotonic() + 600
    while True:  # the model loads and the workspace is indexed before the day starts
        status = client.command("lspAssist.status")
        if status["model"]["error"]:
            raise SystemExit(status["model"]["error"])
        if status["ready"] and client.index_finished():
            break
        if time.monotonic() > deadline:
            raise SystemExit("the server was not ready within 10 minutes")
        time.sleep(0.5)
    client.notifications.clear()
    typist = Typist(client, files, rng)

    def results(partial: bool) -> dict[str, Any]:
        found = {
            "model": args.model,
            "threads": args.threads,
            "workspace": source.name,
            "files": len(files),
            "trace": args.trace,
            "window": args.window,
            "every": args.every,
            "seed": args.seed,
            "partial": partial,
            "tally": {**typist.tally.__dict__, "seconds": time.monotonic() - started},
            "samples": samples,
            "windows": windows(typist.latencies, typist.latency_at, args.window),
        }
        (out / "results.json").write_text(json.dumps(found, indent=1))
        return found

    checkpoints = {
        round(args.requests * k / max(1, args.checkpoints - 1)) for k in range(args.checkpoints)
    }
    samples = [sample(client, 0, args.top if 0 in checkpoints else 0)]
    started = time.monotonic()
    typist.switch()
    number = 0
    try:
        while typist.tally.requests < args.requests:
            number += 1
            if number % 30 == 0:
                typist.switch()
            if number % 100 == 0:
                typist.next_edit()
            if number % 250 == 0:
                typist.explain()
            if number % 150 == 0:
                typist.disk_edit(number, workspace)
            if number % 1000 == 0:
                typist.configure()
            before = typist.tally.requests
            typist.keystroke(typist.tally.requests)
            done = typist.tally.requests
            if done != before and done % args.every == 0:
                top = args.top if any(before < c <= done for c in checkpoints) else 0
                samples.append(sample(client, done, top))
                client.notifications.clear()
                results(partial=True)
                print(
                    f"{done:>7,} requests  RSS {samples[-1]['rss_mb']:.1f} MB"
                    f"  blocks {samples[-1]['python_blocks']:,}"
                    f"  over {samples[-1]['over'] or 'none'}",
                    flush=True,
                )
        typist.finish()
        if samples[-1]["requests"] != typist.tally.requests:
            samples.append(sample(client, typist.tally.requests, args.top))
        found = results(partial=False)
    finally:
        client.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return found


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=50_000)
    parser.add_argument(
        "--model", default="", help="a preset or a GGUF (default: the tests' SmolLM2)"
    )
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads (0: all)")
    parser.add_argument("--workspace", default="", help="a folder to copy (default: pip)")
    parser.add_argument("--every", type=int, default=500, help="requests between samples")
    parser.add_argument("--window", type=int, default=5000, help="requests per latency row")
    parser.add_argument("--trace", type=int, default=0, help="tracemalloc frames (0: off)")
    parser.add_argument("--top", type=int, default=15, help="top allocators at checkpoints")
    parser.add_argument("--checkpoints", type=int, default=5, help="samples with allocators")
    parser.add_argument("--seed", type=int, default=47)
    parser.add_argument("--out", default="", help="folder for results.json, table.md, PNG")
    parser.add_argument(
        "--replot", metavar="JSON", help="only draw the table and PNG of a results.json"
    )
    args = parser.parse_args()
    args.model = args.model or str(small_model_path())
    out = Path(args.out or tempfile.mkdtemp(prefix="lsp-assist-long-day-out-"))
    out.mkdir(parents=True, exist_ok=True)
    results = json.loads(Path(args.replot).read_text()) if args.replot else run(args, out)
    text = table(results)
    (out / "table.md").write_text(text)
    plot(results, out / "long-day.png")
    print(text)
    for row in results["samples"]:
        for entry in row["top"]:
            print(
                f"  at {row['requests']:,}: {entry['kb']:>9.1f} kB"
                f" {entry['blocks']:>7,} {entry['where']}"
            )
    for error in results["tally"]["errors"][:5]:
        print("  error:", error)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
