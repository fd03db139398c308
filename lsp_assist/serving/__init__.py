"""Serving: from a completion request to the suggestion the editor shows.

``CompletionEngine`` is the whole pipeline as one blocking, pygls-free API; the
``Scheduler`` runs it on the model's own thread with debounce and newest-wins.
"""

from lsp_assist.serving.engine import CompletionEngine, CompletionOutcome, CompletionQuery
from lsp_assist.serving.scheduler import Scheduler

__all__ = ["CompletionEngine", "CompletionOutcome", "CompletionQuery", "Scheduler"]
