"""Serving: from a completion request to the suggestion the editor shows.

``CompletionEngine`` is the whole pipeline as one blocking, pygls-free API; the
``Scheduler`` runs it on the model's own thread with debounce and newest-wins. The
request and its outcome are in ``model``, the trigger rules in ``triggers``, the
metrics record in ``records``, the prompt budget in ``adaptive_budget``.
"""

from lsp_assist.serving.adaptive_budget import (
    AdaptiveBudget,
    BudgetDecision,
    budget_cap,
    explain_with_budget,
    measure,
)
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import Change, CompletionOutcome, CompletionQuery
from lsp_assist.serving.scheduler import Scheduler

__all__ = [
    "AdaptiveBudget",
    "BudgetDecision",
    "Change",
    "CompletionEngine",
    "CompletionOutcome",
    "CompletionQuery",
    "Scheduler",
    "budget_cap",
    "explain_with_budget",
    "measure",
]
