"""What the infill benchmarks share: the model alone, the server on a scratch workspace,
the run's meta and the report's common words.

HumanEval (humaneval*.py) and SAFIM (safim*.py) answer their tasks with the same two
arms. ``plain``: :class:`PlainModel` builds the plain FIM prompt as token ids itself
(llama-cpp-python's ``suffix=`` is not used) and :func:`greedy` decodes with
:class:`~lsp_assist.backends.llama_engine.LlamaEngine` in this process
(:func:`run_plain` answers a list of tasks). ``server``: :func:`scratch_server` starts the
real ``lsp-assist serve`` over stdio on a scratch workspace, :func:`inline_item` sends
one inline request (automatic, or invoked as when the user asks: :data:`TRIGGERS`) and
:func:`add_outcome` gives the answer the server's outcome. :func:`run_meta`,
:func:`model_label`, :func:`report_head`, :func:`trigger_words` and :func:`share` are
what both reports say alike. The programs they run are sandbox.py's. docs/evaluation.md.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lsp_assist.evaluation.client import command, start_server, stop_server, wait_loaded
from lsp_assist.evaluation.rows import CAPS
from lsp_assist.evaluation.server_row import clean_env

if TYPE_CHECKING:
    from lsp_assist.backends import LlamaEngine

PLAIN_MAX_TOKENS = 64
"""Tokens the plain arm may write for one line (it stops at the first newline)."""
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
TRIGGERS = {
    "automatic": "the trigger rules apply as while the user types: no answer mid-word, "
    "with more than maxCharsRightOfCursor non-blank characters right of the cursor or in "
    "a comment",
    "invoked": "the user asked, as with Alt+\\ in VS Code or <M-\\> in Neovim: the trigger "
    "rules skip nothing, and the server decodes its alternatives too (the first item is "
    "scored)",
}
"""The server arm's ``--trigger`` choices (the inline request's triggerKind), and what
each means as the report says it."""

T = TypeVar("T")
Answer = dict[str, Any]
"""One arm's answer to one task: ``suggestion``, ``latency_ms`` and what the arm adds."""


class FimTask(Protocol):
    """What the plain prompt needs of a task: the program around the cursor."""

    def prefix(self) -> str:
        """Return the program before the cursor."""

    def suffix(self) -> str:
        """Return the program after the blanked part."""


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


# -- the run's meta and the report's words ------------------------------------------------


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
    """Return ``trigger`` when it is one of :data:`TRIGGERS` (ValueError otherwise)."""
    if trigger not in TRIGGERS:
        raise ValueError(f"no trigger {trigger!r} ({', '.join(TRIGGERS)})")
    return trigger


def shown_settings(settings: Mapping[str, Any], base: Mapping[str, Any] = SERVER_SETTINGS) -> str:
    """Return a server arm's settings (``base``, by default :data:`SERVER_SETTINGS`, then
    ``settings``) as the report shows them."""
    return ", ".join(
        f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in {**base, **settings}.items()
    )


def trigger_words(meta: dict[str, Any]) -> str:
    """Return how a report names the server arm's request: ``one invoked inline request
    (the user asked, ...)``; a run from before ``--trigger`` was automatic."""
    trigger = str(meta.get("trigger", "automatic"))
    return f"one {trigger} inline request ({TRIGGERS.get(trigger, trigger)})"


def share(flags: Sequence[bool]) -> float | None:
    """Return the share of true flags (None: no flags)."""
    return sum(1 for f in flags if f) / len(flags) if flags else None


def report_head(meta: dict[str, Any]) -> list[str]:
    """Return a report's first lines: the command, then when, where, the load and commit."""
    return [
        f"`{meta['command']}`",
        "",
        f"{meta['date']}; {meta['machine']}; load average {meta['load_start']:.1f} at the "
        f"start, {meta['load_end']:.1f} at the end; {meta['wall_min']:.1f} min in all; "
        f"lsp_assist {meta['commit']}.",
    ]
