"""How much of a prompt one editor's request shares with another's on one server (issue 23, part 2).

A shared llama-server reuses the longest common token prefix of what its slot held
(``cache_prompt``) and, with ``--cache-ram``, of earlier prompts kept in host memory.
This script simulates a team without a server and without decoding: K editors
(``--editors``, default 4), each its own :class:`~lsp_assist.serving.Session` (its own
index, buffers and context engine, as K ``lsp-assist serve`` processes on K checkouts of
the same commit under the same folder name), working in one repository (default: a copy
of the installed standard library's ``asyncio`` package, or ``--workspace``).

The mix. Editor i owns the i-th largest Python file of the workspace. Each editor makes
``--lines`` visits; a visit goes to a file another editor owns with probability
``--same-file`` (default 0.25), else to its own file, at a seeded code line (at least 8
characters after its indentation), which is blanked to its indentation and retyped one
character at a time: one automatic request after each of the first ``--keystrokes``
characters (the server's own trigger rules skip some: mid-word, in a string or a
comment; a skipped keystroke sends nothing). The line is put back after the visit. The
editors take turns, one keystroke each per round, in a seeded order each round.

Each request is built by the server's own code: ``CompletionEngine.complete`` with a
backend that records the ``GenerationRequest`` instead of generating (a vocabulary-only
load of the model), so the prompt ids (the healed tail appended, as for any backend that
does not heal tokens) and the ``/infill`` parts (``serving/infill_parts.py``) are what
the remote backend would get. From it, per ``remoteApi``:

- ``completions``: the body of ``remote_api.completions_body`` with the prompt as ids
  (what ``RemoteBackend`` sends with a local vocabulary): its ``prompt`` is the token list;
- ``infill``: the body of ``remote_api.infill_body``, made into tokens the way llama-server
  does (``format_infill`` in llama.cpp's server: ``<|repo_name|>myproject``, one
  ``<|file_sep|>`` block per ``input_extra`` chunk, ``<|file_sep|>filename``, then
  ``<|fim_prefix|>`` prefix typed ``<|fim_suffix|>`` suffix ``<|fim_middle|>``; the
  prefix cut to 3/4 of ``--batch``, the suffix to a quarter less the typed part, the
  extra part to ``--slot-ctx - --batch + 2`` tokens taken from its end, the server's
  default ``n_predict`` of -1).

Per request and mode, in tokens of the model's tokenizer: (a) the longest common prefix
with the same editor's previous prompt; (b) the longest with another editor's latest
prompt (what a slot last used by that editor holds), and with any earlier prompt of
another editor (what ``--cache-ram`` could hold at best); (c) the stable head: the format
head (BOS, the repository header; the language/file comment of a comment format) and the
project summary when the prompt starts with them (``completions``), the server's
``<|repo_name|>myproject`` line when the extra part was not cut from its start
(``infill``), and whether every other editor's latest prompt starts with the same bytes.
Sharing "a whole block past the head" means the common prefix reaches the end of the
first block after the head (the next ``<|file_sep|>``, ``<|fim_prefix|>`` or
``<|fim_suffix|>`` token after the one opening it): one other file's chunk, or the
current file's FIM prefix in a prompt without other files.

Run:

    nice -n 5 .venv/bin/python benchmarks/bench_prefix_sharing.py \\
        [--workspace DIR] [--editors 4] [--lines 6] [--keystrokes 8] [--same-file 0.25] \\
        [--seed 3] [--budget 1024[,768,...]] [--slot-ctx 2048] [--batch 512] \\
        [--setting KEY=VALUE]...

The asyncio copy is a byte-identical copy of the standard library, whose related and
similar blocks the server leaves out by default (``layerStandardLibrary``); the script
sets ``layerStandardLibrary: true`` so that the copy stands for a team's own code (give
``--setting layerStandardLibrary=false`` for what the defaults send on it).
Not part of ``make test`` (a script, not a test_ file), like the other benchmarks.
"""

from __future__ import annotations

import argparse
import bisect
import random
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.bench_common import parse_setting_args, pct  # noqa: E402
from lsp_assist.backends import (  # noqa: E402
    GenerationRequest,
    GenerationResult,
    VocabularyBackend,
    resolve_model_path,
)
from lsp_assist.backends.remote_api import completions_body, infill_body  # noqa: E402
from lsp_assist.config import ModelSettings, parse_settings  # noqa: E402
from lsp_assist.documents import Position  # noqa: E402
from lsp_assist.serving import CompletionEngine, Session  # noqa: E402
from lsp_assist.serving.model import CompletionQuery  # noqa: E402

MODES = ("completions", "infill")
SERVER_REPO = "myproject\n"
"""The repository name llama-server's ``/infill`` writes after ``<|repo_name|>``."""
SERVER_FILE = "filename\n"
"""The name it gives the current file."""
MIN_LINE = 8
"""Characters a visited line has after its indentation."""


class RecordingBackend(VocabularyBackend):
    """A vocabulary-only backend that keeps each request instead of generating."""

    name = "recording"

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.requests: list[GenerationRequest] = []

    @property
    def wants_infill_parts(self) -> bool:
        """True: serving fills ``GenerationRequest.infill`` as for ``remoteApi: infill``."""
        return True

    def generate(self, request: GenerationRequest) -> GenerationResult:
        """Record ``request``; answer nothing."""
        self.requests.append(request)
        result = GenerationResult(prompt_tokens=len(request.prompt_tokens))
        result.stop_reason = "eos"
        return result


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Return the length of the longest common prefix of ``a`` and ``b``."""
    n = min(len(a), len(b))
    i = 0
    while i + 64 <= n and a[i : i + 64] == b[i : i + 64]:
        i += 64
    while i < n and a[i] == b[i]:
        i += 1
    return i


class PrefixStore:
    """Earlier prompts, sorted: the longest common prefix with any of them in O(log n)."""

    def __init__(self) -> None:
        self.items: list[tuple[int, ...]] = []

    def add(self, tokens: Sequence[int]) -> None:
        """Keep ``tokens``."""
        bisect.insort(self.items, tuple(tokens))

    def longest(self, tokens: Sequence[int]) -> int:
        """Return the longest common prefix of ``tokens`` with a kept prompt (0: none)."""
        key = tuple(tokens)
        at = bisect.bisect_left(self.items, key)
        near = self.items[max(0, at - 1) : at + 1]
        return max((common_prefix(key, other) for other in near), default=0)


@dataclass(frozen=True)
class ServerLimits:
    """The llama-server settings that cut an ``/infill`` prompt."""

    slot_ctx: int = 2048
    batch: int = 512
    n_predict: int = -1
    """The server's ``--n-predict`` (not the request's): -1 by default."""


def infill_tokens(
    body: dict[str, Any],
    tokenize: Callable[[str], list[int]],
    ids: dict[str, int | None],
    limits: ServerLimits,
) -> tuple[list[int], int]:
    """Return llama-server's prompt for an ``/infill`` body and the length of its head.

    Follows ``format_infill`` of llama.cpp's server (the repository-level layout, the
    prefix, suffix and extra cuts); the head is ``<|repo_name|>myproject\\n`` (and the
    fixed ``<|file_sep|>filename\\n`` when there is no extra chunk) when the extra part
    kept its start, else 0.
    """
    prefix = tokenize(body["input_prefix"])
    suffix = tokenize(body["input_suffix"])
    typed = tokenize(body["prompt"])
    extra: list[int] = []
    head = 0
    if ids["repo"] is not None:
        extra += [ids["repo"], *tokenize(SERVER_REPO)]
        head = len(extra)
    for chunk in body["input_extra"]:
        if ids["sep"] is not None:
            extra += [ids["sep"], *tokenize(chunk["filename"] + "\n")]
        else:
            extra += tokenize("\n\n--- snippet ---\n\n")
        extra += tokenize(chunk["text"])
    if ids["sep"] is not None:
        extra += [ids["sep"], *tokenize(SERVER_FILE)]
    if not body["input_extra"]:
        head = len(extra)  # no chunk: the fixed "filename" block is the same for everyone
    batch = limits.batch
    prefix = prefix[len(prefix) - min(len(prefix), 3 * (batch // 4)) :]
    suffix = suffix[: min(len(suffix), max(0, batch // 4 - (2 + len(typed))))]
    take = min(max(0, limits.slot_ctx - batch - 2 * limits.n_predict), len(extra))
    if take < len(extra):
        head = 0
    start = [ids["bos"]] if ids["bos"] is not None else []
    tokens = [*extra[len(extra) - take :], *start, ids["pre"], *prefix, *typed]
    tokens += [ids["suf"], *suffix, ids["mid"]]
    return [t for t in tokens if t is not None], head


@dataclass
class Request:
    """One request of one editor: its prompt per mode and how much it shares."""

    editor: int
    rel: str
    line: int
    column: int
    tokens: dict[str, list[int]] = field(default_factory=dict)
    head: dict[str, int] = field(default_factory=dict)
    head_text: dict[str, str] = field(default_factory=dict)
    own: dict[str, int] = field(default_factory=dict)
    other: dict[str, int] = field(default_factory=dict)
    other_any: dict[str, int] = field(default_factory=dict)
    head_identical: dict[str, bool] = field(default_factory=dict)
    block_end: dict[str, int] = field(default_factory=dict)
    """Where the first block after the head ends: the next file separator, FIM prefix or
    suffix token after the one that starts it (sharing that much is one whole block)."""
    same_file_other: bool = False
    """Another editor's latest request was in the same file."""
    has_own: bool = False
    """The editor sent a request before this one."""
    has_other: bool = False
    """Another editor sent a request before this one."""


@dataclass
class Visit:
    """A line an editor blanks and retypes."""

    rel: str
    line: int
    indent: int
    text: str


class Editor:
    """One editor: its session (its own index and buffers) and its visits."""

    def __init__(self, number: int, root: Path, settings: dict[str, Any], model: Path) -> None:
        self.number = number
        self.root = root
        parsed, warnings = parse_settings(settings)
        if warnings:
            raise SystemExit(f"error: {'; '.join(warnings)}")
        self.backend = RecordingBackend(model)
        backend = self.backend
        self.session = Session(parsed, workspace=root, backend_factory=lambda _s: backend)
        if self.session.index is not None:
            self.session.index.scan()
        self.session.load_backend()
        self.engine = CompletionEngine(self.session)
        self.visits: list[Visit] = []
        self.uris: dict[str, str] = {}
        self.previous: dict[str, list[int]] = {}

    def uri(self, rel: str) -> str:
        """Open ``rel`` as it is on disk once; return its URI."""
        if rel not in self.uris:
            path = self.root / rel
            doc = self.session.buffers.open(
                path.as_uri(), path.read_text(encoding="utf-8"), language_id="python"
            )
            self.uris[rel] = doc.uri
        return self.uris[rel]

    def edit(self, uri: str, start: Position, end: Position, text: str) -> None:
        """Apply one change to the buffer (a new version)."""
        version = (self.session.buffers.version(uri) or 0) + 1
        self.session.buffers.change(uri, version, [(start, end, text)])

    def keystrokes(self, visit: Visit, count: int) -> list[tuple[str, int, int]]:
        """The (file, line, column) after each typed character of ``visit``'s first ``count``."""
        typed = visit.text[visit.indent :][:count]
        return [(visit.rel, visit.line, visit.indent + i + 1) for i in range(len(typed))]

    def request(self, visit: Visit, column: int) -> GenerationRequest | None:
        """Type up to ``column`` on the visit's line; return the request sent (None: skipped)."""
        uri = self.uri(visit.rel)
        doc = self.session.buffers.get(uri)
        assert doc is not None
        current = doc.snapshot().line(visit.line)
        have = len(current)
        want = visit.text[:column]
        if not want.startswith(current) or have < visit.indent:
            raise AssertionError(f"{visit.rel}:{visit.line + 1}: buffer is {current!r}")
        self.edit(uri, Position(visit.line, have), Position(visit.line, have), want[have:])
        snapshot = self.session.buffers.snapshot(uri)
        assert snapshot is not None
        query = CompletionQuery(
            snapshot=snapshot, line=visit.line, column=column, trigger="automatic"
        )
        before = len(self.backend.requests)
        outcome = self.engine.complete(query)
        if outcome.error:
            raise SystemExit(f"error: {visit.rel}:{visit.line + 1}: {outcome.error}")
        if len(self.backend.requests) == before:
            return None
        return self.backend.requests[-1]

    def blank(self, visit: Visit) -> None:
        """Blank the visit's line to its indentation."""
        uri = self.uri(visit.rel)
        end = len(visit.text)
        self.edit(uri, Position(visit.line, visit.indent), Position(visit.line, end), "")

    def restore(self, visit: Visit) -> None:
        """Put the visit's line back as it was."""
        uri = self.uri(visit.rel)
        doc = self.session.buffers.get(uri)
        assert doc is not None
        have = len(doc.snapshot().line(visit.line))
        self.edit(uri, Position(visit.line, 0), Position(visit.line, have), visit.text)

    def close(self) -> None:
        """Close the session."""
        self.session.close()


def code_lines(text: str) -> list[int]:
    """Return the lines worth a visit: code with at least MIN_LINE characters."""
    found = []
    for number, line in enumerate(text.split("\n")):
        body = line.strip()
        if len(body) >= MIN_LINE and not body.startswith(("#", '"', "'", "@")):
            found.append(number)
    return found


def own_files(root: Path, count: int) -> list[str]:
    """Return the ``count`` largest Python files under ``root`` (workspace-relative)."""
    files = sorted(
        (p for p in root.rglob("*.py") if p.name != "__init__.py" and "__pycache__" not in p.parts),
        key=lambda p: (-p.stat().st_size, str(p)),
    )
    if len(files) < count:
        raise SystemExit(f"error: {root} has {len(files)} Python files for {count} editors")
    return [p.relative_to(root).as_posix() for p in files[:count]]


def plan_visits(
    root: Path, files: list[str], editors: int, lines: int, same_file: float, seed: int
) -> list[list[Visit]]:
    """Return each editor's visits: mostly its own file, sometimes another editor's."""
    rng = random.Random(seed)
    texts = {rel: (root / rel).read_text(encoding="utf-8") for rel in files}
    plans: list[list[Visit]] = []
    for number in range(editors):
        visits: list[Visit] = []
        for _ in range(lines):
            rel = files[number]
            if editors > 1 and rng.random() < same_file:
                rel = rng.choice([f for i, f in enumerate(files) if i != number])
            text = texts[rel]
            line = rng.choice(code_lines(text))
            source = text.split("\n")[line]
            indent = len(source) - len(source.lstrip())
            visits.append(Visit(rel, line, indent, source))
        plans.append(visits)
    return plans


def special_ids(editor: Editor) -> dict[str, int | None]:
    """Return the ids llama-server's infill layout uses (None where the model lacks one)."""
    backend = editor.backend
    info = backend.info
    engine = editor.session.context_engine()
    assert engine is not None

    def one(text: str) -> int | None:
        ids = backend.tokenize(text, special=True)
        return ids[0] if len(ids) == 1 else None

    return {
        "repo": one("<|repo_name|>"),
        "sep": one("<|file_sep|>"),
        "pre": info.fim_prefix_id,
        "suf": info.fim_suffix_id,
        "mid": info.fim_middle_id,
        "bos": engine.format.bos_id,
    }


def first_block_end(tokens: Sequence[int], head: int, markers: set[int]) -> int:
    """Return where the first block at or after ``head`` ends (the prompt's length: never)."""
    found = [i for i in range(head, len(tokens)) if tokens[i] in markers][:2]
    return found[1] if len(found) == 2 else len(tokens)


def completions_head(editor: Editor, request: GenerationRequest, rel: str) -> tuple[int, str]:
    """Return the stable head of the request's completions prompt: (tokens, text).

    The format head (BOS, repository header, a comment format's language line) and the
    project summary, when the prompt starts with them (a FIM prompt with repository
    tokens and no other file drops the header: a plain FIM prompt).
    """
    engine = editor.session.context_engine()
    assert engine is not None
    path = editor.root / rel
    head = engine.maker.head("python", engine.relative(path), engine.repo_name)
    ids = [i for piece in head for i in piece.ids]
    text = "".join(piece.text for piece in head)
    prompt = list(request.prompt_tokens)
    if prompt[: len(ids)] != ids:
        bos = engine.format.bos_id
        if bos is not None and prompt[:1] == [bos]:
            return 1, engine.format.text_of(bos)
        return 0, ""
    return len(ids), text


def simulate(
    root: Path,
    model: Path,
    *,
    editors: int = 4,
    lines: int = 6,
    keystrokes: int = 8,
    same_file: float = 0.25,
    seed: int = 3,
    budget: int | Sequence[int] = 1024,
    settings: dict[str, Any] | None = None,
    limits: ServerLimits | None = None,
    files: list[str] | None = None,
    cache_dir: Path | None = None,
) -> list[Request]:
    """Run the team over ``root`` and return every request that reached the model.

    ``budget``: every editor's ``contextBudget``, or one per editor, cycled (editors whose
    adaptive budgets differ).
    """
    budgets = [budget] if isinstance(budget, int) else list(budget)
    limits = limits or ServerLimits()
    files = files or own_files(root, editors)
    plans = plan_visits(root, files, editors, lines, same_file, seed)
    scratch = Path(tempfile.mkdtemp(prefix="prefix-sharing-", dir=cache_dir))
    team: list[Editor] = []
    try:
        for number in range(editors):
            options = {
                "cacheDir": str(scratch / f"editor{number}"),
                "watch": False,
                "draft": "off",
                "contextBudget": budgets[number % len(budgets)],
                "layerStandardLibrary": True,
                **(settings or {}),
                "modelPath": str(model),
            }
            team.append(Editor(number, root, options, model))
        for editor, visits in zip(team, plans, strict=True):
            editor.visits = visits
        ids = special_ids(team[0])
        markers = {i for i in (ids["sep"], ids["pre"], ids["suf"]) if i is not None}

        def tokenize(text: str) -> list[int]:
            return team[0].backend.tokenize(text)

        # each editor's keystrokes in order: (visit, column), blank before, restore after
        queues: list[list[tuple[Visit, int, bool, bool]]] = []
        for editor in team:
            steps: list[tuple[Visit, int, bool, bool]] = []
            for visit in editor.visits:
                strokes = editor.keystrokes(visit, keystrokes)
                for i, (_rel, _line, column) in enumerate(strokes):
                    steps.append((visit, column, i == 0, i == len(strokes) - 1))
            queues.append(steps)
        rng = random.Random(seed + 1)
        latest: dict[int, Request] = {}
        stores = {mode: [PrefixStore() for _ in team] for mode in MODES}
        requests: list[Request] = []
        while any(queues):
            order = [i for i, q in enumerate(queues) if q]
            rng.shuffle(order)
            for number in order:
                editor = team[number]
                visit, column, first, last = queues[number].pop(0)
                if first:
                    editor.blank(visit)
                sent = editor.request(visit, column)
                if last:
                    editor.restore(visit)
                if sent is None:
                    continue
                record = Request(number, visit.rel, visit.line, column)
                record.tokens["completions"] = list(
                    completions_body(sent, list(sent.prompt_tokens), "")["prompt"]
                )
                record.head["completions"], record.head_text["completions"] = completions_head(
                    editor, sent, visit.rel
                )
                assert sent.infill is not None
                body = infill_body(sent, sent.infill)
                record.tokens["infill"], record.head["infill"] = infill_tokens(
                    body, tokenize, ids, limits
                )
                prompt = record.tokens["infill"]
                record.head_text["infill"] = team[0].backend.detokenize(
                    prompt[: record.head["infill"]]
                )
                others = [latest[i] for i in latest if i != number]
                record.same_file_other = any(o.rel == visit.rel for o in others)
                record.has_own, record.has_other = bool(editor.previous), bool(others)
                for mode in MODES:
                    tokens = record.tokens[mode]
                    record.block_end[mode] = first_block_end(tokens, record.head[mode], markers)
                    previous = editor.previous.get(mode)
                    record.own[mode] = common_prefix(tokens, previous) if previous else 0
                    record.other[mode] = max(
                        (common_prefix(tokens, o.tokens[mode]) for o in others), default=0
                    )
                    record.other_any[mode] = max(
                        (stores[mode][i].longest(tokens) for i in range(editors) if i != number),
                        default=0,
                    )
                    head = record.head[mode]
                    record.head_identical[mode] = bool(others) and all(
                        o.tokens[mode][:head] == tokens[:head] for o in others
                    )
                    editor.previous[mode] = tokens
                    stores[mode][number].add(tokens)
                latest[number] = record
                requests.append(record)
        return requests
    finally:
        for editor in team:
            editor.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _head_shared(r: Request, mode: str) -> bool:
    return r.head_identical[mode]


def _block_from_latest(r: Request, mode: str) -> bool:
    return r.other[mode] >= r.block_end[mode]


def _block_from_any(r: Request, mode: str) -> bool:
    return r.other_any[mode] >= r.block_end[mode]


def summary(requests: list[Request]) -> list[str]:
    """Return the table's lines: per mode, the shared prefixes and how often they pass the head."""
    lines = [
        "| remoteApi | requests | prompt P50 | head P50 / P90 (in every other's latest) "
        "| own previous P50 / P90 (share P50 / P90) "
        "| other editor's latest P50 / P90 (share P50 / P90) "
        "| any earlier of another P50 / P90 (share P50 / P90) "
        "| a whole block past the head from another's latest: all / same file / other files "
        "| from any earlier: all |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def pair(values: list[float], fmt: str) -> str:
        return f"{pct(values, 50):{fmt}} / {pct(values, 90):{fmt}}"

    def frac(rows: list[Request], test: Callable[[Request, str], bool], mode: str) -> str:
        if not rows:
            return "n/a"
        hits = sum(test(r, mode) for r in rows)
        return f"{hits / len(rows):.0%} ({hits}/{len(rows)})"

    for mode in MODES:
        rows = requests
        sizes = [float(len(r.tokens[mode])) for r in rows]
        # own: requests after the editor's first; other: requests after another editor's first
        mine = [r for r in rows if r.has_own]
        theirs = [r for r in rows if r.has_other]
        own = [float(r.own[mode]) for r in mine]
        own_share = [r.own[mode] / len(r.tokens[mode]) for r in mine]
        other = [float(r.other[mode]) for r in theirs]
        other_share = [r.other[mode] / len(r.tokens[mode]) for r in theirs]
        anyone = [float(r.other_any[mode]) for r in theirs]
        any_share = [r.other_any[mode] / len(r.tokens[mode]) for r in theirs]
        heads = [float(r.head[mode]) for r in rows]
        identical = frac(theirs, _head_shared, mode)
        same = [r for r in theirs if r.same_file_other]
        apart = [r for r in theirs if not r.same_file_other]
        lines.append(
            f"| {mode} | {len(rows)} | {pct(sizes, 50):.0f} "
            f"| {pair(heads, '.0f')} ({identical}) "
            f"| {pair(own, '.0f')} ({pair(own_share, '.0%')}) "
            f"| {pair(other, '.0f')} ({pair(other_share, '.0%')}) "
            f"| {pair(anyone, '.0f')} ({pair(any_share, '.0%')}) "
            f"| {frac(theirs, _block_from_latest, mode)} / "
            f"{frac(same, _block_from_latest, mode)} / {frac(apart, _block_from_latest, mode)} "
            f"| {frac(theirs, _block_from_any, mode)} |"
        )
    return lines


def main() -> int:
    """Simulate the team and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="coder-0.5b", help="preset or GGUF path")
    parser.add_argument(
        "--workspace", type=Path, help="folder of code (default: a copy of the stdlib's asyncio)"
    )
    parser.add_argument("--editors", type=int, default=4)
    parser.add_argument("--lines", type=int, default=6, help="visits per editor")
    parser.add_argument("--keystrokes", type=int, default=8, help="typed characters per visit")
    parser.add_argument("--same-file", type=float, default=0.25)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument(
        "--budget", default="1024", help="contextBudget of every editor, or one per editor: A,B,..."
    )
    parser.add_argument("--slot-ctx", type=int, default=2048, help="llama-server's slot context")
    parser.add_argument("--batch", type=int, default=512, help="llama-server's --batch-size")
    parser.add_argument("--setting", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    model = resolve_model_path(ModelSettings(model=args.model))
    scratch = Path(tempfile.mkdtemp(prefix="prefix-sharing-ws-"))
    try:
        if args.workspace is not None:
            source = args.workspace.resolve()
        else:
            source = Path(sysconfig.get_paths()["stdlib"]).resolve() / "asyncio"
        root = scratch / source.name
        shutil.copytree(source, root, ignore=shutil.ignore_patterns("__pycache__", ".*"))
        started = time.perf_counter()
        requests = simulate(
            root,
            model,
            editors=args.editors,
            lines=args.lines,
            keystrokes=args.keystrokes,
            same_file=args.same_file,
            seed=args.seed,
            budget=[int(b) for b in args.budget.split(",")],
            settings=parse_setting_args(args.setting),
            limits=ServerLimits(slot_ctx=args.slot_ctx, batch=args.batch),
            cache_dir=scratch,
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(
        f"model {model.name}, {args.editors} editors on {source}, {args.lines} lines x "
        f"{args.keystrokes} keystrokes each, same-file {args.same_file}, seed {args.seed}, "
        f"budget {args.budget}, slot {args.slot_ctx} / batch {args.batch}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    print("\n".join(summary(requests)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
