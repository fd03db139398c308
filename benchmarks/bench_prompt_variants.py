"""Which part of the server's prompt helps a FIM model on cross-file lines (issue 20, part 2).

The bench's cross-file hole tasks (tasks.py: a line that calls a function or class
defined in another file of the workspace, blanked to its indentation) are built the
way ``lsp-assist bench`` builds them, from the installed standard library or from
``--workspace`` (code written after the model's training: this repository's own
``lsp_assist`` package, which no model can have memorised). For each task the server's own
prompts are made through the plain API (``Session`` + ``CompletionEngine.explain``,
what ``lsp-assist serve`` sends): the baseline strategy (plain FIM of the current file)
and the layered one, both at ``--budget`` tokens. Each variant is then run through the
model alone (one llama.cpp context, greedy, one line, token healing as the server does
it) and scored like the bench (exact match, identifier match of the called name, edit
similarity), so the variants differ only in the prompt:

- ``plain``: the baseline's prompt (plain FIM of the file around the cursor);
- ``layered``: the layered prompt as the server sends it;
- ``plain+context``: the layered prompt's repository header and other files' blocks,
  then plain FIM of the file, its prefix cut from the top to fit the budget;
- ``comments``: the layered prompt with the other files' blocks as ``# path:`` comment
  lines at the start of the FIM prefix;
- ``no-repo-name``: the layered prompt without its ``<|repo_name|>`` line;
- any layered settings variant given as ``--variant NAME:KEY=VALUE,KEY=VALUE``
  (e.g. ``norel:layerRelated=false,layerSimilar=false``).

The figures do not depend on the machine's load (greedy decoding); only the run time
does. Run:

    nice -n 5 .venv/bin/python benchmarks/bench_prompt_variants.py \\
        --model coder-0.5b --tasks 40 --seed 7 [--workspace DIR] [--budget 1024] \\
        [--threads 1] [--only plain,layered] [--variant NAME:KEY=VALUE,...] [--out FILE.jsonl]

Not part of ``make test`` (a script, not a test_ file), like the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsp_assist.backends import LlamaEngine, VocabularyBackend, resolve_model_path
from lsp_assist.backends.healing import ForcedPrefix
from lsp_assist.config import ModelSettings, parse_settings
from lsp_assist.context import AssembledPrompt
from lsp_assist.evaluation.metrics import score
from lsp_assist.evaluation.tasks import Task, blank_line, prompt_leaks
from lsp_assist.evaluation.workspace import (
    STDLIB_EXCLUDE,
    Workspace,
    blanked_bytes,
    prepare_workspace,
)
from lsp_assist.serving import CompletionEngine, Session

FILE_SEP, FIM_PRE, FIM_SUF = "<|file_sep|>", "<|fim_prefix|>", "<|fim_suffix|>"
SURGERY = ("plain", "layered", "plain+context", "comments", "no-repo-name")
MAX_TOKENS = 48


class Model:
    """The model alone: greedy to the line's end, the healed tail forced first."""

    def __init__(self, path: Path, threads: int) -> None:
        self.engine = LlamaEngine(path, n_ctx=4096, threads=threads)
        self.pieces = self.engine.piece_index()
        self.vocab = VocabularyBackend(str(path))

    def ids(self, text: str) -> list[int]:
        """Return the ids of a prompt text (format tokens parsed)."""
        return self.vocab.tokenize(text, special=True)

    def line(self, prompt: list[int], forced: str) -> str:
        """Return the model's one-line continuation of ``prompt`` after ``forced``."""
        engine = self.engine
        common = 0
        for have, want in zip(engine.tokens, prompt, strict=False):
            if have != want:
                break
            common += 1
        common = min(common, len(prompt) - 1)
        engine.truncate(common)
        engine.eval(prompt[common:], n_logits=1)
        force = ForcedPrefix(forced, self.pieces)
        out = bytearray()
        for _ in range(MAX_TOKENS):
            if force.active:
                chosen = force.choose(engine.logits(0))
                if chosen is None:
                    break
                token = chosen
                out += force.consume(engine.piece(token, special=False))
            else:
                token = engine.argmax(0)
                if engine.is_eog(token) or engine.is_special(token):
                    break
                out += engine.piece(token, special=False)
            if b"\n" in out:
                del out[out.index(b"\n") :]
                break
            engine.eval([token], n_logits=1)
        return out.decode("utf-8", "replace")


def surgery(
    layered: AssembledPrompt, plain: AssembledPrompt, model: Model, budget: int
) -> Iterator[tuple[str, str, str]]:
    """Yield (variant, prompt text, healed tail) for the prompt rewrites."""
    lt, pt = layered.prompt, plain.prompt
    yield "plain", pt, plain.healed
    yield "layered", lt, layered.healed
    start = lt.find(FIM_PRE)
    header_at = lt.rfind(FILE_SEP, 0, start)
    if header_at < 0:  # no other file in the layered prompt: the rewrites are the same
        return
    context, header = lt[:header_at], lt[header_at:start]
    prefix, rest = pt.split(FIM_SUF, 1)
    lines = prefix[prefix.find(FIM_PRE) + len(FIM_PRE) :].split("\n")
    text = ""
    while lines:
        text = context + header + FIM_PRE + "\n".join(lines) + FIM_SUF + rest
        if len(model.ids(text)) <= budget:
            break
        lines = lines[1:]
    yield "plain+context", text, plain.healed
    comments: list[str] = []
    for block in context.split(FILE_SEP)[1:]:
        source, _, code = block.partition("\n")
        comments.append(f"# {source.strip()}:")
        comments += [f"#   {line}" for line in code.rstrip("\n").split("\n") if line.strip()]
    body = lt[start + len(FIM_PRE) :]
    yield "comments", FIM_PRE + "\n".join(comments) + "\n" + body, layered.healed
    yield "no-repo-name", context[context.find(FILE_SEP) :] + lt[header_at:], layered.healed


class Prompts:
    """The server's prompts for one workspace: one session per settings variant."""

    def __init__(self, workspace: Workspace, model_path: Path, budget: int) -> None:
        self.workspace = workspace
        self.model_path = model_path
        self.budget = budget
        self.sessions: dict[str, Session] = {}

    def session(self, name: str, values: dict[str, Any]) -> Session:
        """Return the session of a settings variant, its index scanned once."""
        if name not in self.sessions:
            options = {
                **self.workspace.options(),
                "contextBudget": self.budget,
                "draft": "off",
                **values,
            }
            settings, warnings = parse_settings({**options, "modelPath": str(self.model_path)})
            if warnings:
                raise SystemExit(f"error: {name}: {'; '.join(warnings)}")
            path = str(self.model_path)
            session = Session(
                settings,
                workspace=self.workspace.root,
                backend_factory=lambda _s: VocabularyBackend(path),
            )
            if session.index is not None:
                session.index.scan()
            self.sessions[name] = session
        return self.sessions[name]

    def build(self, task: Task, name: str, values: dict[str, Any]) -> AssembledPrompt:
        """Return the prompt the session of ``name`` builds at the task's blanked line."""
        session = self.session(name, values)
        path = self.workspace.root / task.path
        text = blank_line(self.workspace.text(task.path), task.line, task.indent)
        uri = session.buffers.open(path.as_uri(), text, language_id=task.language).uri
        try:
            snapshot = session.buffers.snapshot(uri)
            assert snapshot is not None
            strategy = values.get("strategy")
            return CompletionEngine(session).explain(
                snapshot, task.line, task.indent, strategy=strategy
            )
        finally:
            session.buffers.close(uri)

    def close(self) -> None:
        """Close every session."""
        for session in self.sessions.values():
            session.close()


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    """Return ``NAME:KEY=VALUE,...`` as (name, camelCase settings), values JSON-parsed."""
    name, _, rest = text.partition(":")
    values: dict[str, Any] = {}
    for pair in filter(None, rest.split(",")):
        key, _, raw = pair.partition("=")
        try:
            values[key] = json.loads(raw)
        except json.JSONDecodeError:
            values[key] = raw
    return name, values


def summary(records: list[dict[str, Any]]) -> list[str]:
    """Return the table's lines: per variant exact, identifier match, edit similarity."""
    names = list(dict.fromkeys(r["variant"] for r in records))
    lines = [
        "| variant | tasks | definition in prompt | exact | identifier match | edit sim. "
        "| empty | prompt tokens |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        rows = [r for r in records if r["variant"] == name]
        n = len(rows)
        lines.append(
            f"| {name} | {n} | {sum(bool(r['carries']) for r in rows)} "
            f"| {sum(r['exact_match'] for r in rows)} | {sum(r['identifier_match'] for r in rows)} "
            f"| {sum(r['edit_similarity'] for r in rows) / n:.3f} "
            f"| {sum(not r['suggestion'].strip() for r in rows)} "
            f"| {sum(r['tokens'] for r in rows) // n} |"
        )
    return lines


def main() -> int:
    """Run the variants over the cross-file tasks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="coder-0.5b", help="preset or GGUF path")
    parser.add_argument(
        "--workspace", type=Path, help="folder of code (default: the installed standard library)"
    )
    parser.add_argument("--tasks", type=int, default=40, help="cross-file tasks")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--budget", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated variants to run")
    parser.add_argument("--variant", action="append", default=[], metavar="NAME:KEY=VALUE,...")
    parser.add_argument("--out", type=Path, help="write one JSON record per task and variant")
    args = parser.parse_args()
    model_path = resolve_model_path(ModelSettings(model=args.model))
    extra = [parse_variant(v) for v in args.variant]
    only = {v for v in args.only.split(",") if v}
    if args.workspace is not None:
        source, exclude = args.workspace.resolve(), []
    else:
        source, exclude = Path(sysconfig.get_paths()["stdlib"]).resolve(), STDLIB_EXCLUDE
    started = time.perf_counter()
    workspace, tasks = prepare_workspace(
        source, exclude, cross_file=args.tasks, in_file=0, typing=0, seed=args.seed
    )
    print(f"{len(tasks)} cross-file tasks from {source}, model {model_path.name}", file=sys.stderr)
    model = Model(model_path, args.threads)
    prompts = Prompts(workspace, model_path, args.budget)
    records: list[dict[str, Any]] = []
    out = args.out.open("w") if args.out else None
    try:
        for number, task in enumerate(tasks, 1):
            path = workspace.root / task.path
            original = workspace.originals[task.path]
            path.write_bytes(blanked_bytes(original, task))  # what the server's disk holds
            try:
                plain = prompts.build(task, "plain", {"strategy": "baseline"})
                layered = prompts.build(task, "layered", {})
                runs = list(surgery(layered, plain, model, args.budget))
                for name, values in extra:
                    built = prompts.build(task, name, values)
                    runs.append((name, built.prompt, built.healed))
            finally:
                path.write_bytes(original)
            for name, text, healed in runs:
                if only and name not in only:
                    continue
                suggestion = model.line(model.ids(text), healed)
                record = {
                    "task": task.id,
                    "variant": name,
                    "target": task.expected,
                    "called": task.called,
                    "suggestion": suggestion,
                    "tokens": len(model.ids(text)),
                    "leaked": prompt_leaks(text, task.target),
                    "carries": any(n in text for n in task.needles),
                    **score(task, suggestion),
                }
                records.append(record)
                if out is not None:
                    out.write(json.dumps({**record, "prompt": text}) + "\n")
                    out.flush()
            print(f"[{number}/{len(tasks)}] {task.id} {task.path}:{task.line + 1}", file=sys.stderr)
    finally:
        if out is not None:
            out.close()
        prompts.close()
        workspace.cleanup()
    print(
        f"model {model_path.name}, {len(tasks)} cross-file tasks (seed {args.seed}), "
        f"budget {args.budget}, {time.perf_counter() - started:.0f} s"
    )
    print("\n".join(summary(records)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
