"""``lsp-assist context FILE:LINE:COL``: show the prompt the context engine builds, layer by layer.

The tokenizer and the model info come from the GGUF (``--model``, default the embedded
model) through :class:`lsp_assist.backends.vocab.Vocabulary`, the reader ``lsp-assist
serve`` uses, so both detect the same prompt format; the workspace index is scanned
once. With the adaptive budget (no ``--budget``, no ``contextBudget``, the layered
strategy) the model's weights are loaded too and its prompt speed timed, the way a
server starts (serving/adaptive_budget.py), so the budget shown is the one a fresh
server would use; otherwise only the vocabulary is loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from lsp_assist.cli.common import location_setup, parse_location


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the context subcommand."""
    parser = sub.add_parser(
        "context", help="print the prompt built for FILE:LINE:COL (1-based), layer by layer"
    )
    parser.add_argument("location", type=parse_location, metavar="FILE:LINE:COL")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--strategy", choices=["layered", "baseline"], help="context strategy")
    parser.add_argument("--budget", type=int, help="prompt token budget")
    parser.add_argument("--workspace", help="workspace folder (default: enclosing git repo)")
    parser.add_argument("--model", metavar="GGUF", help="GGUF whose vocabulary counts tokens")
    parser.add_argument(
        "--open",
        action="append",
        default=[],
        metavar="FILE",
        help="another open buffer (repeatable; feeds similar code and the baseline)",
    )
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any setting by its camelCase key (repeatable), e.g. --setting layerSimilar=false",
    )
    parser.set_defaults(func=run)


def _open_index(workspace: Path, settings: Any) -> Any:
    from lsp_assist.index.workspace import WorkspaceIndex

    index = WorkspaceIndex([workspace], settings.index, cache_dir=None)
    index.scan()
    return index


def _language(path: Path, index: Any) -> str:
    entry = index.file(path)
    if entry is not None and entry.language:
        return str(entry.language)
    from lsp_assist.documents.document import language_for_path

    return language_for_path(path) or "text"


def run(args: argparse.Namespace) -> int:
    """Build the prompt once and print it (or its JSON form)."""
    from lsp_assist.backends.models import embedded_model_path
    from lsp_assist.backends.vocab import Vocabulary
    from lsp_assist.context.engine import ContextEngine
    from lsp_assist.context.model import Cursor
    from lsp_assist.errors import LspAssistError
    from lsp_assist.serving.adaptive_budget import BudgetDecision, explain_with_budget, measure

    found = location_setup(args)
    if found is None:
        return 2
    settings, path, line, column, workspace = found
    backend: Any = None
    try:
        model_path = args.model or settings.model.model_path or str(embedded_model_path())
        settings.model.model_path = model_path
        decision: BudgetDecision | None = None
        if (args.strategy or settings.context.strategy) == "layered":
            decision, backend = measure(settings)
        if backend is not None:
            counter, info = backend, backend.info
        else:
            vocab = Vocabulary(model_path)
            counter, info = vocab, vocab.info()
        index = _open_index(workspace, settings)
        text = path.read_text(encoding="utf-8", errors="replace")
        engine = ContextEngine(index, counter, info, settings.context, relative=index.relative)
        open_files = tuple(Path(p).resolve() for p in args.open)
        for other in reversed(open_files):
            engine.note_opened(other)
        cursor = Cursor(
            path=path,
            language=_language(path, index),
            text=text,
            line=line,
            column=column,
            open_files=open_files,
        )
        budget = decision.tokens if decision is not None else args.budget
        prompt = engine.build(cursor, strategy=args.strategy, budget=budget)
        prompt.budget_reason = decision.reason if decision is not None else ""
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if backend is not None:
            backend.close()
    if args.json:
        data = {
            "strategy": prompt.strategy,
            "budget": prompt.budget,
            "budget_reason": prompt.budget_reason,
            "total_tokens": prompt.total_tokens,
            "layers": [layer.to_json() for layer in prompt.layers],
            "prompt": prompt.to_json(),
            "tokens": prompt.tokens,
        }
        print(json.dumps(data, indent=2))
    else:
        print(explain_with_budget(prompt), end="")
    return 0
