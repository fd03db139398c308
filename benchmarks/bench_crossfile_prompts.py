"""What the cross-file bench's lines get in their prompts, per settings variant, without a model.

The lines of ``lsp-assist bench --crossfile`` (evaluation/replay/crossfile.py, same packages,
count and seed) are built through the real index and context engine with the model's
own vocabulary (a vocabulary-only load: no weights, no generation), at two places of
each line: its start (the indentation, nothing typed: where the bench asks) and just
after its first cross-file name and the character after it (the line being written
now uses the name). For each settings variant it counts the lines whose prompt holds
the needed definition (its signature or first line) at each place, the prompt's tokens
at the start, and the tokens evaluated again at the typed place when the start's build
is kept in the prompt memory (what the KV cache cannot reuse: tokens after the common
prefix of the two prompts). Then, for ``--receivers`` lines of each package that call a
member of an attribute (``self._session.save(``), the prompt at the dot: whether the
receiver's class is found and whether the related layer holds the called member's
signature, with and without ``relatedReceivers``. The figures do not depend on the
machine; only the run time does (a few minutes for 60 lines on the 2-core machine). Run:

    nice -n 19 .venv/bin/python benchmarks/bench_crossfile_prompts.py \\
        --package /tmp/ws/strands --package tanstack-db=/tmp/tanstack-db/package/src \\
        [--tasks 30] [--seed 14] [--model coder-0.5b] [--budget 1024] [--json FILE]

Not part of ``make test`` (a script, not a test_ file), like the other benchmarks.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from lsp_assist.backends import Vocabulary, resolve_model_path
from lsp_assist.backends.kv_states import common_prefix_len
from lsp_assist.config import IndexSettings, ModelSettings, parse_settings
from lsp_assist.context import ContextEngine, Cursor, PromptMemory
from lsp_assist.documents import language_for_path
from lsp_assist.evaluation.replay.crossfile import CrossTask, carries, choose_tasks, row_settings
from lsp_assist.evaluation.replay.crossfile_run import parse_package
from lsp_assist.evaluation.replay.tasks import eligible_lines
from lsp_assist.index import WorkspaceIndex

PIECES = {"relatedLineNames": True, "relatedReceivers": True}
VARIANTS: dict[str, Any] = {
    "plain": "plain",
    "default": {},
    "oracle": "oracle",
    "line names": {"relatedLineNames": True},
    "receivers": {"relatedReceivers": True},
    "line names + receivers": PIECES,
    "on demand (all three)": {**PIECES, "relatedOnDemand": True},
}


def typed_part(task: CrossTask) -> str:
    """Return the line typed up to its first cross-file name and one character more."""
    expected = task.task.expected
    at = expected.find(task.names[0])
    return expected[: min(len(expected), at + len(task.names[0]) + 1)] if at >= 0 else ""


def measure(
    index: WorkspaceIndex, vocab: Vocabulary, task: CrossTask, values: dict[str, Any], budget: int
) -> dict[str, Any]:
    """Return one line's figures under one variant's settings."""
    settings, warnings = parse_settings({"contextBudget": budget, **values})
    if warnings:
        raise SystemExit("; ".join(warnings))
    engine = ContextEngine(index, vocab, vocab.info(), settings.context, relative=index.relative)
    path = index.roots[0] / task.task.path
    text = task.buffer(index.text_of(path) or "")
    line, indent = task.task.line, task.task.indent
    memory = PromptMemory()
    index.open_buffer(path, text)
    try:
        start = engine.build(Cursor(path, task.task.language, text, line, indent), memory=memory)
        memory.remember(start.note)
        part = typed_part(task)
        later = text + part
        index.open_buffer(path, later)
        cursor = Cursor(path, task.task.language, later, line, indent + len(part))
        typed = engine.build(cursor, memory=memory)
    finally:
        index.close_buffer(path)
    return {
        "start": carries(task, start.prompt),
        "typed": carries(task, typed.prompt),
        "tokens": len(start.tokens),
        "new": len(typed.tokens) - common_prefix_len(start.tokens, typed.tokens),
    }


RECEIVER = re.compile(r"(?<![\w.])(?:self|this)\.\w+\.(\w+)\s*\(")
"""A call of a member of an attribute's value: ``self._session.save(``."""


def receiver_lines(
    index: WorkspaceIndex, count: int, seed: int
) -> list[tuple[Path, int, int, str]]:
    """Return up to ``count`` (file, line, column after the receiver's dot, member) of lines
    inside function bodies that call a member of an attribute, seeded."""
    found: list[tuple[Path, int, int, str]] = []
    for path in sorted(index.files()):
        language = language_for_path(path)
        text = index.text_of(path) or ""
        if language is None or "\r" in text:
            continue
        ok = eligible_lines(text, language)
        for i, raw in enumerate(text.split("\n")):
            match = RECEIVER.search(raw) if ok[i] else None
            if match is not None:
                found.append((path, i, match.start(1), match.group(1)))
    random.Random(seed).shuffle(found)
    return found[:count]


def probe_receiver(
    index: WorkspaceIndex,
    vocab: Vocabulary,
    where: tuple[Path, int, int, str],
    values: dict[str, Any],
) -> dict[str, Any]:
    """Return whether the prompt at the receiver's dot names a class for it, and holds the
    called member's signature in its related layer."""
    path, line, column, member = where
    settings, _ = parse_settings({"contextBudget": 1024, **values})
    engine = ContextEngine(index, vocab, vocab.info(), settings.context, relative=index.relative)
    lines = (index.text_of(path) or "").split("\n")
    text = "\n".join([*lines[:line], lines[line][:column]])
    language = language_for_path(path) or ""
    index.open_buffer(path, text)
    try:
        prompt = engine.build(Cursor(path, language, text, line, column))
    finally:
        index.close_buffer(path)
    items = next(x for x in prompt.layers if x.name == "related").items
    found = [i for i in items if i.reason.startswith("class of the receiver")]
    signature = re.compile(rf"(?<![\w.]){re.escape(member)}\s*[(<]")
    return {
        "class": found[0].symbol if found else "",
        "member": any(signature.search(i.text) for i in items),
        "right": any(signature.search(i.text) for i in found),
    }


def main() -> int:
    """Print one line per variant: definitions held at the start and typed, tokens."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--package", action="append", required=True, metavar="[NAME=]DIR")
    parser.add_argument("--tasks", type=int, default=30)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--model", default="coder-0.5b")
    parser.add_argument("--budget", type=int, default=1024)
    parser.add_argument("--receivers", type=int, default=40, help="receiver lines per package")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    vocab = Vocabulary(resolve_model_path(ModelSettings(model=args.model)))
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in VARIANTS}
    receivers: dict[str, list[dict[str, Any]]] = {"default": [], "receivers": []}
    for name, folder in map(parse_package, args.package):
        index = WorkspaceIndex([folder.resolve()], IndexSettings(watch=False, persist=False))
        index.scan()
        tasks = choose_tasks(index, name, args.tasks, args.seed)
        print(f"{name}: {len(tasks)} lines", file=sys.stderr)
        for variant, values in VARIANTS.items():
            for task in tasks:
                chosen = row_settings(values, tasks) if isinstance(values, str) else values
                rows[variant].append(
                    {"task": task.id, **measure(index, vocab, task, chosen, args.budget)}
                )
        for where in receiver_lines(index, args.receivers, args.seed):
            receivers["default"].append(probe_receiver(index, vocab, where, {}))
            on = {"relatedReceivers": True}
            receivers["receivers"].append(probe_receiver(index, vocab, where, on))
        index.stop()
    print(
        "| variant | lines | definition at the start | after its name | prompt tokens "
        "| new tokens after the name (mean) |"
    )
    print("|---|---|---|---|---|---|")
    for variant, found in rows.items():
        n = len(found)
        print(
            f"| {variant} | {n} | {sum(r['start'] for r in found)} | "
            f"{sum(r['typed'] for r in found)} | {sum(r['tokens'] for r in found) / n:.0f} | "
            f"{sum(r['new'] for r in found) / n:.0f} |"
        )
    print(
        "\n| at `self.attr.` | lines | a class for the receiver | the called member's "
        "signature in the related layer | in the receiver's class |"
    )
    print("|---|---|---|---|---|")
    for variant, found in receivers.items():
        print(
            f"| {variant} | {len(found)} | {sum(bool(r['class']) for r in found)} | "
            f"{sum(r['member'] for r in found)} | {sum(r['right'] for r in found)} |"
        )
    if args.json is not None:
        args.json.write_text(json.dumps({"lines": rows, "receivers": receivers}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
