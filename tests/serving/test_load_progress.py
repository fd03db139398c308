"""The model load reports its phases as they start (issue 24, item 9: a status line at
"loading model 0%" for the whole load, then 90 %)."""

from __future__ import annotations

from pathlib import Path

from lsp_assist.backends.base import Backend
from lsp_assist.config import Settings, parse_settings
from lsp_assist.serving.session import Session
from tests.serving.fakes import SlowBackend


def _phases(tmp_path: Path, given: dict[str, object]) -> list[tuple[str, int]]:
    settings, _ = parse_settings({"metrics": False, "persist": False, "watch": False, **given})
    assert isinstance(settings, Settings)
    heard: list[tuple[str, int]] = []

    def factory(_settings: Settings) -> Backend:
        heard.append(("factory", -1))
        return SlowBackend(step_s=0, tokens=1)

    session = Session(settings, workspace=tmp_path, backend_factory=factory)
    try:
        assert session.load_backend(lambda m, p: heard.append((m, p)))
        # loaded once: a second call reports nothing
        session.load_backend(lambda m, p: heard.append((m, p)))
    finally:
        session.close()
    return heard


def test_each_phase_is_heard_before_it_runs(tmp_path: Path) -> None:
    heard = _phases(tmp_path, {})
    assert heard == [
        ("loading weights", 5),
        ("factory", -1),
        ("measuring prompt speed", 50),
        ("indexing the vocabulary", 70),
        ("loaded", 85),
    ]


def test_a_given_budget_skips_the_speed_phase(tmp_path: Path) -> None:
    heard = _phases(tmp_path, {"contextBudget": 512})
    assert [m for m, _ in heard] == [
        "loading weights",
        "factory",
        "indexing the vocabulary",
        "loaded",
    ]
