"""``lsp-assist context FILE:LINE:COL``: show the prompt serve would send, layer by layer.

The prompt comes from :meth:`CompletionEngine.explain` over a
:class:`~lsp_assist.serving.Session`, the path ``lsp-assist serve``
and its explain command take (the same index, context engine and budget rule), so
the CLI shows exactly what serve sends. The workspace index is scanned once. With the
adaptive budget (no ``--budget``, no ``contextBudget``, the layered strategy, the
local backend) the model's weights are loaded and its prompt speed timed, the way a
server starts (serving/adaptive_budget.py), so the budget shown is the one a fresh
server would use; otherwise only the vocabulary of ``--model`` (default the embedded
model) is loaded, through :class:`lsp_assist.backends.VocabularyBackend` (a
:class:`~lsp_assist.backends.Vocabulary`, the reader ``serve`` uses too).

With ``layerVector`` on, the workspace's vectors are opened from its cache database
(what a server embedded, or an earlier run of this command), the definitions without a
vector are embedded with progress on stderr (``--no-embed``: only counted, and said), and
the build waits for the query's embedding (``vectorWaitMs`` raised from 0 to 10 s: serve
goes on without it when it is not ready), so the explain output shows each vector
match with its cosine and reason.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from lsp_assist.backends import (
    Backend,
    VocabularyBackend,
    create_backend,
    resolve_model_path,
)
from lsp_assist.cli.common import location_setup, parse_location
from lsp_assist.config import MAX_DEBOUNCE_MS, Settings
from lsp_assist.documents import language_for_path
from lsp_assist.errors import LspAssistError
from lsp_assist.index import IndexLookup, VectorIndex
from lsp_assist.serving import CompletionEngine, Session
from lsp_assist.serving.adaptive_budget import explain_with_budget, is_explicit
from lsp_assist.serving.vectors_wiring import open_workspace_vectors


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
    parser.add_argument(
        "--model", metavar="PRESET|GGUF", help="model whose vocabulary counts tokens"
    )
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
    parser.add_argument(
        "--no-embed",
        action="store_true",
        help="with layerVector: use only the cached vectors, say how many are missing",
    )
    parser.set_defaults(func=run)


def _needs_weights(settings: Settings, strategy: str | None) -> bool:
    """True when the budget adapts: the model's prompt speed must be timed."""
    layered = (strategy or settings.context.strategy) == "layered"
    return layered and not is_explicit(settings) and settings.model.backend == "local"


def _language(path: Path, index: IndexLookup | None) -> str:
    entry = index.file(path) if index is not None else None
    if entry is not None and entry.language:
        return str(entry.language)
    return language_for_path(path) or "text"


def _open(session: Session, path: Path) -> str:
    """Open ``path`` as an editor buffer (what serve sees after didOpen); return its URI."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise LspAssistError(f"cannot read {path}: {exc}") from exc
    language = _language(path, session.index)
    return session.buffers.open(path.as_uri(), text, language_id=language).uri


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _open_vectors(
    session: Session, settings: Settings, workspace: Path | None, embed: bool
) -> VectorIndex | None:
    """Open the workspace's vectors for ``layerVector`` (embedding what is missing)."""
    if session.index is None:
        print("warning: layerVector: no workspace index, no vectors", file=sys.stderr)
        return None
    try:
        vectors = open_workspace_vectors(session.index, settings, workspace)
    except LspAssistError as exc:
        print(f"warning: vector retrieval off: {exc}", file=sys.stderr)
        return None
    tty = sys.stderr.isatty()
    shown = [0.0]

    def progress(done: int, total: int, chunks: int) -> None:
        now = time.monotonic()
        if done < total and now - shown[0] < (0.2 if tty else 5.0):
            return
        shown[0] = now
        line = f"vectors: embedding {done}/{total} files ({chunks} chunks)"
        print(
            f"\r{line}" if tty else line,
            end="" if tty and done < total else "\n",
            file=sys.stderr,
            flush=True,
        )

    try:
        stats = vectors.sync(embed=embed, progress=progress)
    except LspAssistError as exc:
        vectors.stop()
        print(f"warning: vector retrieval off: {exc}", file=sys.stderr)
        return None
    wait = settings.context.vector_wait_ms
    print(
        f"vectors: {_count(stats.chunks, 'chunk')} of {_count(stats.files, 'file')} "
        f"({stats.reused} from the cache, {stats.embedded} embedded now); "
        f"the build waits up to {wait} ms for the query's vector",
        file=sys.stderr,
    )
    if stats.missing:
        print(
            f"vectors: {_count(stats.missing, 'chunk')} of {_count(stats.pending, 'file')} "
            "without a vector (--no-embed): vector matches come from the others only",
            file=sys.stderr,
        )
    session.use_vectors(vectors)  # the session stops it when it closes
    return vectors


def run(args: argparse.Namespace) -> int:
    """Build the prompt once and print it (or its JSON form)."""
    found = location_setup(args)
    if found is None:
        return 2
    settings, path, line, column, workspace = found
    settings.model.model_path = str(resolve_model_path(settings.model))
    weights = _needs_weights(settings, args.strategy)
    vector = settings.context.layer_vector and (args.strategy or settings.context.strategy) == (
        "layered"
    )
    if vector and settings.context.vector_wait_ms == 0:
        # the explain output shows what the vectors find; serve does not wait (the default)
        settings.context.vector_wait_ms = MAX_DEBOUNCE_MS

    def backend_factory(chosen: Settings) -> Backend:
        if weights:
            return create_backend(chosen.model)
        return VocabularyBackend(chosen.model.model_path)

    session = Session(settings, workspace=workspace, backend_factory=backend_factory)
    try:
        if session.index is not None:
            session.index.scan()
        if vector:
            _open_vectors(session, settings, workspace, embed=not args.no_embed)
        # opened last first: the first --open is the most recently used buffer
        for other in reversed([Path(p).resolve() for p in args.open]):
            if other.is_file():
                _open(session, other)
            else:
                print(f"warning: --open {other}: no such file", file=sys.stderr)
        snapshot = session.buffers.snapshot(_open(session, path))
        if snapshot is None:
            raise LspAssistError(f"cannot read {path}")
        prompt = CompletionEngine(session).explain(snapshot, line, column, strategy=args.strategy)
    except LspAssistError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        session.close()
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
