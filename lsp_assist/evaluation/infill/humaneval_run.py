"""Running HumanEval infilling: the plain-FIM arm, the server arm, the result.

This module owns how the tasks of humaneval.py (single-line) and humaneval_sets.py
(multi-line, random-span) are answered: ``plain`` builds the plain FIM prompt as token
ids itself (llama-cpp-python's ``suffix=`` is not used) and decodes greedily with
:class:`~lsp_assist.backends.llama_engine.LlamaEngine` in this process, to the first
line break for a single-line task and to the end-of-text for the other sets;
``server`` starts the real ``lsp-assist serve`` over stdio on a scratch workspace
holding each problem as its own file, opens the task's file blanked and sends one
inline request at the cursor: automatic, as an editor does while the user types, or with
``trigger="invoked"`` as when the user asks (Alt+\\; the trigger rules skip nothing)
(for the other sets the first item's text is applied over its range). :func:`run_humaneval`
runs the arms asked for over the set asked for (the chained arm, ``--chain``, through
humaneval_chain.py), scores every answer (on the other sets also the plain answer
truncated as published, ``plain_trunc``) and returns the result that humaneval.py
writes. docs/evaluation.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lsp_assist.config import machine_cpus, parse_settings
from lsp_assist.evaluation.client import (
    close_document,
    command,
    open_document,
    start_server,
    stop_server,
    wait_loaded,
)
from lsp_assist.evaluation.infill import humaneval as he
from lsp_assist.evaluation.infill import humaneval_chain as hc
from lsp_assist.evaluation.infill import humaneval_sets as hs
from lsp_assist.evaluation.progress import Progress
from lsp_assist.evaluation.rows import CAPS
from lsp_assist.evaluation.server_row import clean_env

if TYPE_CHECKING:
    from lsp_assist.backends import LlamaEngine

PLAIN_MAX_TOKENS = 64
"""Tokens the plain arm may write for one line (it stops at the first newline)."""
SPAN_MAX_TOKENS = 256
"""Tokens the plain arm may write for a multi-line or random-span task (it stops at its
end-of-text or a special token): the longest removed part of either set is 239 tokens
of Qwen2.5-Coder's vocabulary (a whole solution)."""
SERVER_SETTINGS: dict[str, Any] = {"answerAfterMs": 0, **CAPS}
"""What the server arm sets: whole suggestions, and time caps that let every request answer."""
OUTCOME_KEYS = (
    "prompt_tokens",
    "reused_tokens",
    "output_tokens",
    "ttft_ms",
    "skipped",
    "cancelled",
    "error",
    "cache_hit",
    "multiline",
    "strategy",
)
"""What the server's last outcome adds to an answer (the arms' shared record)."""
T = TypeVar("T")
Task = he.LineTask | hs.SpanTask
"""A task of any set."""


class FimTask(Protocol):
    """What the plain prompt needs of a task: the program around the cursor."""

    def prefix(self) -> str:
        """Return the program before the cursor."""

    def suffix(self) -> str:
        """Return the program after the blanked part."""


@dataclass(slots=True)
class HumanEvalConfig:
    """What ``lsp-assist bench --humaneval`` was asked for."""

    model: Path
    tasks: int = 164
    """Sample size; 0: every task of the set."""
    seed: int = 14
    task_set: str = "single"
    """``single``, ``multi`` or ``span`` (humaneval.SET_NAMES)."""
    arms: tuple[str, ...] = he.ARMS
    settings: dict[str, Any] = field(default_factory=dict)
    """``--setting`` values: the server arm gets them all, the plain arm ``threads`` and
    ``contextLength``."""
    trigger: str = "automatic"
    """The server arm's inline request (``--trigger``, humaneval.TRIGGERS): ``automatic``
    (the trigger rules apply) or ``invoked`` (the user asked)."""
    timeout_s: float = he.TEST_TIMEOUT_S
    data: Path | None = None
    """A HumanEval jsonl(.gz) other than the package's (tests)."""
    problems: int = 0
    """Use only the first N problems (0: all; tests)."""
    out: Path | None = None
    """Where humaneval.md and .json are written after each arm (None: not written here)."""


Answer = dict[str, Any]
"""One arm's answer to one task: ``suggestion``, ``latency_ms`` and what the arm adds."""


# -- plain FIM --------------------------------------------------------------------------


def plain_prompt(
    task: FimTask,
    tokenize: Callable[[str], list[int]],
    fim: tuple[int, int, int] | None,
    bos: Sequence[int] = (),
) -> list[int]:
    """Return the plain prompt's ids: BOS, FIM prefix, prefix, FIM suffix, suffix, FIM middle.

    Without FIM ids (``fim`` None) the prompt is BOS and the prefix alone.
    """
    head = list(bos)
    if fim is None:
        return head + tokenize(task.prefix())
    pre, suf, mid = fim
    return [*head, pre, *tokenize(task.prefix()), suf, *tokenize(task.suffix()), mid]


class PlainModel:
    """The model alone: one llama.cpp context, plain prompts, greedy to the line's end."""

    def __init__(self, model: Path, *, threads: int, n_ctx: int) -> None:
        from lsp_assist.backends import LlamaEngine, llama_cpp_lib

        self.engine = LlamaEngine(model, n_ctx=n_ctx, threads=threads)
        ll = llama_cpp_lib()
        vocab = ll.llama_model_get_vocab(self.engine.model)
        ids = [
            int(f(vocab))
            for f in (ll.llama_vocab_fim_pre, ll.llama_vocab_fim_suf, ll.llama_vocab_fim_mid)
        ]
        self.fim: tuple[int, int, int] | None = None
        if all(i >= 0 for i in ids):
            self.fim = (ids[0], ids[1], ids[2])
        bos = int(ll.llama_vocab_bos(vocab))
        self.bos = [bos] if bos >= 0 and ll.llama_vocab_get_add_bos(vocab) else []

    def prompt(self, task: FimTask) -> list[int]:
        """Return the task's plain prompt ids for this model."""
        return plain_prompt(task, self.engine.tokenize, self.fim, self.bos)

    def complete(
        self, task: FimTask, max_tokens: int = PLAIN_MAX_TOKENS, *, one_line: bool = True
    ) -> Answer:
        """Return the greedy completion of the task (with ``one_line``, of its line) and its
        token counts and time."""
        started = time.perf_counter()
        prompt = self.prompt(task)
        if len(prompt) + max_tokens > self.engine.n_ctx:
            return {"suggestion": "", "latency_ms": None, "error": "prompt over the context"}
        text, common, written, first = greedy(self.engine, prompt, max_tokens, one_line=one_line)
        done = time.perf_counter()
        return {
            "suggestion": text,
            "latency_ms": round((done - started) * 1000, 2),
            "ttft_ms": round((first - started) * 1000, 2),
            "prompt_tokens": len(prompt),
            "reused_tokens": common,
            "output_tokens": written,
        }

    def close(self) -> None:
        """Free the model."""
        self.engine.close()


def complete_any(plain: PlainModel, task: Task) -> Answer:
    """Return the plain arm's answer: a single-line task's first line, else the whole
    greedy answer to the end-of-text (at most :data:`SPAN_MAX_TOKENS`)."""
    if isinstance(task, he.LineTask):
        return plain.complete(task)
    return plain.complete(task, SPAN_MAX_TOKENS, one_line=False)


def greedy(
    engine: LlamaEngine, prompt: list[int], max_tokens: int, *, one_line: bool = False
) -> tuple[str, int, int, float]:
    """Decode greedily after ``prompt`` to the end-of-text or a special token, at most
    ``max_tokens`` (with ``one_line``, to the first newline, which is cut off), reusing
    what the engine's context already holds of the prompt.

    Returns the text, the prompt tokens reused, the tokens written and when the first
    token's logits were ready (``time.perf_counter``).
    """
    common = 0
    for have, want in zip(engine.tokens, prompt, strict=False):
        if have != want:
            break
        common += 1
    common = min(common, len(prompt) - 1)  # the last prompt token gives the logits
    engine.truncate(common)
    engine.eval(prompt[common:], n_logits=1)
    first = time.perf_counter()
    out = bytearray()
    written = 0
    while written < max_tokens:
        token = engine.argmax(0)
        if engine.is_eog(token) or engine.is_special(token):
            break
        out += engine.piece(token, special=False)
        written += 1
        if one_line and b"\n" in out:
            del out[out.index(b"\n") :]
            break
        engine.eval([token], n_logits=1)
    return out.decode("utf-8", "replace"), common, written, first


def run_plain(
    tasks: Sequence[T],
    model: Path,
    *,
    threads: int,
    n_ctx: int,
    answer: Callable[[PlainModel, T], Answer],
    on_answer: Callable[[T, Answer], None],
) -> dict[str, Any]:
    """Answer every task with the model alone (``answer``); return the session (load time,
    FIM or not)."""
    started = time.perf_counter()
    plain = PlainModel(model, threads=threads, n_ctx=n_ctx)
    session: dict[str, Any] = {
        "load_s": round(time.perf_counter() - started, 2),
        "fim": plain.fim is not None,
        "threads": threads,
        "n_ctx": n_ctx,
    }
    try:
        for task in tasks:
            on_answer(task, answer(plain, task))
    finally:
        plain.close()
    session["wall_s"] = round(time.perf_counter() - started, 1)
    return session


# -- through the server ------------------------------------------------------------------


def server_options(model: Path, cache_dir: Path, settings: dict[str, Any]) -> dict[str, Any]:
    """Return the server arm's initializationOptions: ours, then ``--setting``, then the model."""
    own = {"cacheDir": str(cache_dir), "watch": False, "metrics": True, "logPrompts": True}
    return {**own, **SERVER_SETTINGS, **settings, "modelPath": str(model)}


@dataclass(slots=True)
class ScratchServer:
    """A started ``lsp-assist serve`` on a scratch workspace (see :func:`scratch_server`)."""

    client: Any
    root: Path
    """The workspace folder."""
    session: dict[str, Any]
    """The session's record: settings, load time, budget; messages and wall time at the end."""


@contextlib.asynccontextmanager
async def scratch_server(
    name: str,
    model: Path,
    settings: dict[str, Any],
    files: Mapping[str, str],
    after_stop: Callable[[Path], None] | None = None,
) -> AsyncIterator[ScratchServer]:
    """Start ``lsp-assist serve`` (client ``bench-<name>``) on a scratch workspace holding
    ``files`` (name: text), wait until it has loaded and yield it. At the end it is
    stopped, ``after_stop`` is given its cache folder, the scratch folder is removed and
    the session gets the server's messages and the wall time."""
    started = time.perf_counter()
    scratch = Path(tempfile.mkdtemp(prefix=f"lsp-assist-{name}-"))
    root = scratch / "workspace"
    root.mkdir()
    for file_name, text in files.items():
        (root / file_name).write_text(text, encoding="utf-8")
    options = server_options(model, scratch / "cache", settings)
    messages: list[str] = []
    client, _ = await start_server(
        f"bench-{name}", root, options, env=clean_env(False), on_message=messages.append
    )
    session: dict[str, Any] = {"settings": {k: v for k, v in options.items() if k != "cacheDir"}}
    try:
        status = await wait_loaded(client)
        session["load_s"] = round(time.perf_counter() - started, 2)
        session["budget"] = dict(status.get("budget", {}))
        yield ScratchServer(client, root, session)
    finally:
        with contextlib.suppress(Exception):
            await stop_server(client)
        try:
            if after_stop is not None:
                after_stop(scratch / "cache")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    session["messages"] = messages
    session["wall_s"] = round(time.perf_counter() - started, 1)


def add_outcome(answer: Answer, last: dict[str, Any], last_id: str, client_ms: float) -> str:
    """Give ``answer`` the server's outcome ``last`` (its latency and :data:`OUTCOME_KEYS`),
    or the client's round trip and ``skipped: no outcome`` when it has no request id or
    the one of the answer before (``last_id``); return the request id to compare with next."""
    request_id = str(last.get("request_id", ""))
    if not request_id or request_id == last_id:
        answer.update(latency_ms=round(client_ms, 2), skipped="no outcome")
        return last_id
    answer["request_id"] = request_id
    # a request the trigger rules skipped has no server latency: the client's round trip
    answer["latency_ms"] = last.get("latency_ms") or round(client_ms, 2)
    answer.update({k: last[k] for k in OUTCOME_KEYS if k in last})
    return request_id


async def inline_item(
    client: Any, uri: str, line: int, character: int, *, trigger: str = "automatic"
) -> tuple[str, list[int] | None, float, dict[str, Any]]:
    """Send one inline request (``trigger``: ``automatic``, or ``invoked`` as when the user
    asks); return the first item's text and range (start line, character, end line,
    character; None: no item or no range), the round trip (ms) and the server's last
    outcome (as :func:`~lsp_assist.evaluation.client.inline_request`)."""
    from lsprotocol import types

    kind = types.InlineCompletionTriggerKind
    trigger_kind = {"automatic": kind.Automatic, "invoked": kind.Invoked}[check_trigger(trigger)]
    started = time.perf_counter()
    result = await client.text_document_inline_completion_async(
        types.InlineCompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=types.Position(line=line, character=character),
            context=types.InlineCompletionContext(trigger_kind=trigger_kind),
        )
    )
    elapsed = (time.perf_counter() - started) * 1000
    items = result.items if isinstance(result, types.InlineCompletionList) else (result or [])
    first = items[0] if items else None
    text = str(first.insert_text) if first is not None else ""
    where = first.range if first is not None else None
    edit_range = None
    if where is not None:
        edit_range = [where.start.line, where.start.character, where.end.line, where.end.character]
    accept = first.command if first is not None else None
    answer_id = str(accept.arguments[0]) if accept is not None and accept.arguments else ""
    last: dict[str, Any] = (await command(client, "lspAssist.status")).get("last", {})
    if answer_id and last.get("request_id") != answer_id:
        last = {"request_id": answer_id, "pending": True}
    return text, edit_range, elapsed, last


async def _serve(
    tasks: Sequence[Task],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[Task, Answer], None],
    trigger: str,
) -> dict[str, Any]:
    answers: list[Answer] = []
    files = {problem.file_name: problem.program for problem in problems}
    async with scratch_server(
        "humaneval", model, settings, files, lambda cache: _join_prompts(cache, answers)
    ) as server:
        client, root = server.client, server.root
        last_id = ""
        for task in tasks:
            path = root / task.problem.file_name
            uri = path.as_uri()
            blank = task.blanked()
            line, character = task.cursor()
            path.write_text(blank, encoding="utf-8")  # the disk says what the buffer says
            try:
                open_document(client, uri, blank, "python")
                suggestion, edit_range, client_ms, last = await inline_item(
                    client, uri, line, character, trigger=trigger
                )
            finally:
                path.write_text(task.problem.program, encoding="utf-8")  # before didClose
            close_document(client, uri)
            answer: Answer = {"suggestion": suggestion, "client_ms": round(client_ms, 2)}
            if isinstance(task, hs.SpanTask):
                answer["range"] = edit_range  # applied as an editor does when scored
            last_id = add_outcome(answer, last, last_id, client_ms)
            answers.append(answer)
            on_answer(task, answer)  # scored now; the prompt is added to it at the end
    return server.session


def _join_prompts(cache_dir: Path, answers: Sequence[Answer]) -> None:
    """Give each answer the prompt the server logged for its request (``logPrompts``)."""
    from lsp_assist.telemetry import METRICS_FILE, read_records

    dirs = sorted({p.parent for p in cache_dir.rglob(METRICS_FILE + "*")})
    by_id = {r.request_id: r for r in read_records(dirs)} if dirs else {}
    for answer in answers:
        logged = by_id.get(str(answer.get("request_id", "")))
        if logged is not None and logged.prompt is not None:
            answer["prompt"] = logged.prompt


def run_server(
    tasks: Sequence[Task],
    problems: Sequence[he.Problem],
    model: Path,
    settings: dict[str, Any],
    on_answer: Callable[[Task, Answer], None],
    trigger: str = "automatic",
) -> dict[str, Any]:
    """Answer every task through ``lsp-assist serve`` with one ``trigger`` inline request
    each; return the session (load, settings)."""
    return asyncio.run(_serve(tasks, problems, model, settings, on_answer, trigger))


# -- the whole run ------------------------------------------------------------------------


def model_label(model: Path) -> tuple[str, str]:
    """Return the model's ``general.name`` with its file name, and its quantization."""
    from lsp_assist.backends import Vocabulary

    vocab = Vocabulary(model)
    try:
        info = vocab.info()
        name = vocab.meta("general.name") or info.name
    finally:
        vocab.close()
    return (f"{name} ({model.name})" if name else model.name), info.quantization


def run_meta(command: str, model: Path, label: str, quantization: str) -> dict[str, Any]:
    """Return what a run's meta says first: the command, when, where, which commit, the model."""
    from lsp_assist.evaluation import report

    return {
        "command": command,
        "date": report.now(),
        "machine": report.machine(),
        "commit": report.commit(),
        "model": str(model),
        "model_label": label,
        "quantization": quantization,
    }


def check_trigger(trigger: str) -> str:
    """Return ``trigger`` when it is one of humaneval.TRIGGERS (ValueError otherwise)."""
    if trigger not in he.TRIGGERS:
        raise ValueError(f"no trigger {trigger!r} ({', '.join(he.TRIGGERS)})")
    return trigger


def shown_settings(settings: Mapping[str, Any], base: Mapping[str, Any] = SERVER_SETTINGS) -> str:
    """Return a server arm's settings (``base``, by default :data:`SERVER_SETTINGS`, then
    ``settings``) as the report shows them."""
    return ", ".join(
        f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in {**base, **settings}.items()
    )


def chain_meta(settings: Mapping[str, Any]) -> dict[str, Any]:
    """Return what a run's meta says of the chained arm: its settings as the report shows
    them and its asks a line (humaneval_chain.ask_cap)."""
    return {
        "chain_settings": shown_settings(settings, hc.CHAIN_SETTINGS),
        "chain_asks_per_line": hc.ASKS_PER_LINE,
    }


def server_label(arm: str, trigger: str) -> str:
    """Return an arm's name in the table: the server's arms say ``invoked`` when it was."""
    label = he.ARM_LABELS[arm]
    served = arm in ("server", he.CHAIN)
    return f"{label}, {trigger}" if served and trigger != "automatic" else label


def where(task: Task) -> dict[str, Any]:
    """Return where a task's record says its part is: line and indentation (single-line),
    the set, the name, the 1-based line and column of the start and the end, and the
    non-blank characters right of the cursor on its line (the server's automatic trigger
    skips beyond ``maxCharsRightOfCursor``)."""
    if isinstance(task, he.LineTask):
        return {"line": task.line + 1, "indent": task.indent}
    return {
        "set": task.kind,
        "name": task.name,
        "start": task.where(task.start),
        "end": task.where(task.end),
        "right_of_cursor": len(task.suffix().split("\n", 1)[0].strip()),
    }


def run_humaneval(config: HumanEvalConfig, command: str) -> dict[str, Any]:
    """Run the arms asked for over the sampled tasks of the set asked for, score every
    answer, return the result."""
    started = time.perf_counter()
    load_start = os.getloadavg()[0]
    if config.task_set not in he.SET_NAMES:
        raise ValueError(f"no HumanEval set {config.task_set!r} ({', '.join(he.SET_NAMES)})")
    check_trigger(config.trigger)
    if he.CHAIN in config.arms and config.task_set == "single":
        raise ValueError("the chained arm is for the multi-line and random-span sets")
    problems = he.load_problems(config.data)
    if config.problems:
        problems = problems[: config.problems]
    tasks: list[Task]
    if config.task_set == "single":
        tasks = list(he.sample_tasks(problems, config.tasks, config.seed))
        candidates = len(he.all_tasks(problems))
    else:
        tasks = list(hs.sample_tasks(problems, config.task_set, config.tasks, config.seed))
        candidates = len(hs.all_tasks(problems, config.task_set))
    set_name = he.SET_NAMES[config.task_set]
    label, quantization = model_label(config.model)
    settings, _ = parse_settings(config.settings)
    progress = Progress(len(tasks) * (len(config.arms) + 1), sys.stderr)
    progress.note(
        f"HumanEval {set_name}: {len(tasks)} of {candidates} tasks of {len(problems)} "
        f"problems; arms {', '.join(config.arms)}; {label}"
    )
    records: dict[str, dict[str, Any]] = {}
    canonical = blank = 0
    for task in tasks:
        ref = he.reference(task, config.timeout_s)
        canonical += ref["canonical_passes"]
        blank += ref["blank_passes"]
        records[task.id] = {"task": task.id, "problem": task.problem.task_id, **where(task)}
        records[task.id].update(expected=task.expected, **ref, arms={})
        progress.step("reference")

    def keep(arm: str) -> Callable[[Task, Answer], None]:
        def on_answer(task: Task, answer: Answer) -> None:
            suggestion = str(answer.get("suggestion", ""))
            if isinstance(task, he.LineTask):
                answer.update(he.score(task, suggestion, config.timeout_s))
            else:
                edit_range = answer.get("range")
                answer.update(hs.score(task, suggestion, edit_range, config.timeout_s))
                if arm == "plain":  # the same answer, truncated as published
                    cut = hs.truncate_plain(task, suggestion)
                    records[task.id]["arms"]["plain_trunc"] = {
                        "suggestion": cut,
                        "latency_ms": answer.get("latency_ms"),
                        **hs.score(task, cut, None, config.timeout_s),
                    }
            records[task.id]["arms"][arm] = answer
            progress.step(arm)

        return on_answer

    meta = {
        **run_meta(command, config.model, label, quantization),
        "set": config.task_set,
        "set_name": set_name,
        "problems": len(problems),
        "candidates": candidates,
        "official_tasks": hs.OFFICIAL_TASKS[config.task_set],
        "tasks": len(tasks),
        "all_lines": len(tasks) == candidates,
        "seed": config.seed,
        "timeout_s": config.timeout_s,
        "plain_max_tokens": PLAIN_MAX_TOKENS if config.task_set == "single" else SPAN_MAX_TOKENS,
        "server_settings": shown_settings(config.settings),
        **(chain_meta(config.settings) if he.CHAIN in config.arms else {}),
        "trigger": config.trigger,
        "reference": {"canonical_passes": canonical, "blank_passes": blank},
        "load_start": round(load_start, 2),
    }
    sessions: dict[str, dict[str, Any]] = {}

    def result() -> dict[str, Any]:
        rows = list(records.values())
        meta["load_end"] = round(os.getloadavg()[0], 2)
        meta["wall_min"] = round((time.perf_counter() - started) / 60, 2)
        names = [arm for arm in config.arms if arm in sessions]
        if "plain" in names and config.task_set != "single":
            names.insert(names.index("plain") + 1, "plain_trunc")
        arms = [
            {
                "name": arm,
                "label": server_label(arm, config.trigger),
                "session": sessions["plain" if arm == "plain_trunc" else arm],
                "summary": he.summarize(rows, arm),
                **({"chain": hc.figures(rows)} if arm == he.CHAIN else {}),
            }
            for arm in names
        ]
        return {"meta": meta, "arms": arms, "records": rows}

    for arm in config.arms:
        if arm == "plain":
            threads = settings.model.threads or machine_cpus()
            n_ctx = settings.model.context_length
            sessions[arm] = run_plain(
                tasks,
                config.model,
                threads=threads,
                n_ctx=n_ctx,
                answer=complete_any,
                on_answer=keep(arm),
            )
        elif arm == he.CHAIN:
            spans = [task for task in tasks if isinstance(task, hs.SpanTask)]
            sessions[arm] = hc.run_chain(
                spans, problems, config.model, dict(config.settings), keep(arm), config.trigger
            )
        else:
            sessions[arm] = run_server(
                tasks, problems, config.model, dict(config.settings), keep(arm), config.trigger
            )
        progress.note(f"arm {arm}: {sessions[arm]['wall_s']:.0f} s")
        if config.out is not None:  # what is done is kept, should a later arm fail
            he.write_outputs(config.out, result())
    progress.close()
    return result()
