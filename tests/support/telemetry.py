"""The telemetry tests' clock and the items they show (tests/telemetry)."""

from __future__ import annotations

from lsp_assist.telemetry import OfferedItem, ShownSuggestions, request_of

URI = "file:///w/a.py"


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def offer(
    shown: ShownSuggestions,
    name: str,
    text: str,
    *,
    before: str = "    x = ",
    line: int = 3,
    uri: str = URI,
    trigger: str = "automatic",
    model: str = "m.gguf",
    after: str = "",
) -> str:
    """Show the item ``name`` (``text`` at the end of ``before`` on ``line``); return its id."""
    shown.offer(
        OfferedItem(
            item=name,
            request_id=request_of(name),
            uri=uri,
            line=line,
            column=len(before),
            before=before,
            text=text,
            after=after,
            trigger=trigger,
            model=model,
            language="python",
        )
    )
    return name
