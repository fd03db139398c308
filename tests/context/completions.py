"""Builds as completions make them: each reads a prompt memory and is remembered in it.

Serving's ``Session`` pairs one ``PromptMemory`` with its context engine, and only a
completion or a prefill writes it; the context tests that type key by key build
through :class:`Completions` to get the same reuse.
"""

from __future__ import annotations

from lsp_assist.context import AssembledPrompt, ContextEngine, Cursor, PromptMemory


class Completions:
    """A context engine and the prompt memory its completions keep."""

    def __init__(self, engine: ContextEngine) -> None:
        self.engine = engine
        self.memory = PromptMemory()

    def build(self, cursor: Cursor, **options: object) -> AssembledPrompt:
        """Build at ``cursor`` reading the memory, then remember the build (a completion)."""
        prompt = self.engine.build(cursor, memory=self.memory, **options)  # type: ignore[arg-type]
        self.memory.remember(prompt.note)
        return prompt
