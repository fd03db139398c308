"""A request cancelled while its prompt is built is a cancel, not an error.

A remote backend's tokenizer call (made while the context engine builds the prompt)
raises GenerationCancelled when a newer request supersedes it; the outcome must say
cancelled, with no error logged or recorded.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from lsp_assist.errors import GenerationCancelled
from lsp_assist.serving.model import CompletionQuery
from tests.serving.fakes import CURSOR_COLUMN, CURSOR_LINE, MarkerBackend, make_engine, snapshot


class CancelledTokenizer(MarkerBackend):
    """Its tokenizer raises GenerationCancelled once armed, as the remote one does."""

    armed = False

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Tokenize, or raise as a superseded remote /tokenize call does."""
        if self.armed:
            raise GenerationCancelled("/extras/tokenize: superseded")
        return super().tokenize(text, special=special)


def test_cancel_during_the_prompt_build_is_not_an_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    backend = CancelledTokenizer()
    engine, uri = make_engine(tmp_path, backend)
    backend.armed = True
    with caplog.at_level(logging.ERROR):
        outcome = engine.complete(
            CompletionQuery(snapshot=snapshot(engine, uri), line=CURSOR_LINE, column=CURSOR_COLUMN)
        )
    assert outcome.cancelled and outcome.error == "" and outcome.text == ""
    assert backend.calls == 0
    assert not [r for r in caplog.records if "completion failed" in r.getMessage()]
