"""The serving object (``Service``) without pygls: its model-load lifecycle, documents,
suggestions and commands, driven as the LSP handlers drive it.

A recording client stands in for the editor (messages, work-done progress); a fake
backend whose load waits on a gate shows the "not ready" state while the model loads.
The same object serves the real server over stdio in tests/e2e.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from lsp_assist.backends import Backend
from lsp_assist.config import Settings, parse_settings
from lsp_assist.errors import UsageError
from lsp_assist.serving import Service
from tests.serving.fakes import MarkerBackend


class RecordingClient:
    """The editor's side: what the serving object showed and reported, in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, bool]] = []
        self.progress: list[tuple[str, str, str]] = []

    def warn(self, message: str, *, error: bool = False) -> None:
        """Record a message."""
        self.messages.append((message, error))

    async def begin_progress(self, token: str, title: str) -> bool:
        """Record a progress begun (the client supports progress)."""
        self.progress.append(("begin", token, title))
        return True

    def report_progress(self, token: str, message: str, percentage: int) -> None:
        """Record a phase."""
        self.progress.append(("report", token, message))

    def end_progress(self, token: str, message: str) -> None:
        """Record a progress ended."""
        self.progress.append(("end", token, message))


def settings(**raw: object) -> Settings:
    values: dict[str, object] = {
        "metrics": False,
        "persist": False,
        "watch": False,
        "debounceMs": 0,
        "answerAfterMs": 0,
        "contextBudget": 512,
    }
    values.update(raw)
    parsed, warnings = parse_settings(values)
    assert isinstance(parsed, Settings) and not warnings, warnings
    return parsed


async def until(condition: Callable[[], bool], timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


@pytest.fixture
def gate() -> threading.Event:
    """Opened when the model's load may finish."""
    return threading.Event()


def gated_factory(gate: threading.Event, backend: Backend) -> Callable[[Settings], Backend]:
    def load(_settings: Settings) -> Backend:
        assert gate.wait(5), "the test never opened the gate"
        return backend

    return load


async def test_not_ready_while_the_model_loads(tmp_path: Path, gate: threading.Event) -> None:
    client = RecordingClient()
    (tmp_path / "m.py").write_text("value = \n")
    service = Service(
        settings(),
        client=client,
        workspace=tmp_path,
        warnings=["contextBudget: a warning of initialize"],
        backend_factory=gated_factory(gate, MarkerBackend()),
    )
    try:
        service.start()
        await until(
            lambda: ("begin", "lsp-assist/model", "lsp-assist: loading model") in client.progress
        )
        uri = (tmp_path / "m.py").as_uri()
        service.open(uri, "value = \n", version=1, language_id="python")  # while it loads
        status = service.status()
        assert status["initialized"] and not status["ready"] and not status["model"]["loaded"]
        assert client.messages == [("contextBudget: a warning of initialize", False)]
        gate.set()
        await until(lambda: service.ready)
        model = [
            (kind, what) for kind, token, what in client.progress if token == "lsp-assist/model"
        ]
        assert model[0] == ("begin", "lsp-assist: loading model")
        assert ("report", "evaluating open files") in model  # the file opened meanwhile
        assert model[-1] == ("end", "ready")
        assert service.status()["model"]["loaded"]
    finally:
        gate.set()
        service.close()


async def test_documents_suggestions_and_misuse(tmp_path: Path, gate: threading.Event) -> None:
    gate.set()
    service = Service(
        settings(),
        client=RecordingClient(),
        workspace=tmp_path,
        backend_factory=gated_factory(gate, MarkerBackend()),
    )
    try:
        service.start()
        await until(lambda: service.ready)
        uri = (tmp_path / "m.py").as_uri()
        service.open(uri, "s = '\U0001d11e'\nvalue = \n", version=1, language_id="python")
        # UTF-16: the clef is two units, so character 7 is after it (code point 6)
        service.change(uri, 2, [((0, 7, 0, 7), "!")], "utf-16")
        service.change(uri, 3, [(None, "s = '\U0001d11e!'\n# edit 4\nvalue = \n")], "utf-16")
        state = service.document_state(uri)
        assert state == {
            "uri": uri,
            "version": 3,
            "text": "s = '\U0001d11e!'\n# edit 4\nvalue = \n",
        }
        found = await service.suggest(uri, 2, 8, "utf-16", automatic=False, inline=True)
        assert found is not None and found.texts[0] == "x4", found
        assert found.lsp_pos == (2, 8) and found.items[0] == service.status()["last"]["request_id"]
        assert service.accept(found.items[0])["request_id"] == found.items[0]
        with pytest.raises(UsageError):
            service.document_state((tmp_path / "closed.py").as_uri())
        with pytest.raises(UsageError):
            await service.explain((tmp_path / "missing.py").as_uri(), 0, 0, "utf-16")
        explained = await service.explain(uri, 2, 8, "utf-16")
        assert explained["text"] and "error" not in explained
    finally:
        service.close()
