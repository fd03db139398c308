"""Serving: from a completion request to the suggestion the editor shows.

A ``Session`` builds and owns what a connection needs (index, vectors, metrics log,
backend slot, context engine, the open ``Buffers``) and closes it all at once;
``CompletionEngine(session)`` is the pipeline over a snapshot as one blocking,
pygls-free API; the ``Scheduler`` runs it on the model's own thread with debounce and
newest-wins (who cancels whom: its table ``SUPERSEDES``); the ``Service`` is the one
serving object a language server holds (the session, engine, scheduler and next edits
made at ``initialize``, the model's lifecycle, one method per request); ``status_json``
answers the status command. The request and its outcome are in ``model``, the trigger
rules in ``triggers``, the metrics record in ``records``, the prompt budget in
``adaptive_budget``; ``memory_json`` (``bounds``) lists what grows with use against its
bounds (the memory command).
"""

from lsp_assist.serving.adaptive_budget import (
    AdaptiveBudget,
    BudgetDecision,
    budget_cap,
    explain_with_budget,
    measure,
)
from lsp_assist.serving.blocking import run_blocking
from lsp_assist.serving.bounds import TRACEMALLOC_ENV, memory_json
from lsp_assist.serving.buffers import Buffers
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import Change, CompletionOutcome, CompletionQuery
from lsp_assist.serving.next_edit import NextEditAnswer, NextEdits, ProposedEdit
from lsp_assist.serving.next_edit_model import RewriteJob, RewriteOutcome
from lsp_assist.serving.scheduler import CURSOR_MOVED, Scheduler
from lsp_assist.serving.service import (
    Client,
    LspChange,
    Service,
    Suggestion,
    settings_from_options,
)
from lsp_assist.serving.session import BackendFactory, Session
from lsp_assist.serving.status import status_json

__all__ = [
    "CURSOR_MOVED",
    "TRACEMALLOC_ENV",
    "AdaptiveBudget",
    "BackendFactory",
    "BudgetDecision",
    "Buffers",
    "Change",
    "Client",
    "CompletionEngine",
    "CompletionOutcome",
    "CompletionQuery",
    "LspChange",
    "NextEditAnswer",
    "NextEdits",
    "ProposedEdit",
    "RewriteJob",
    "RewriteOutcome",
    "Scheduler",
    "Service",
    "Session",
    "Suggestion",
    "budget_cap",
    "explain_with_budget",
    "measure",
    "memory_json",
    "run_blocking",
    "settings_from_options",
    "status_json",
]
