"""The adaptive budget as a user meets it, with the real small model (SmolLM2).

``lsp-assist context``, ``lsp-assist doctor`` and the server's explainContext/status
say which budget is in force and why: measured at load when ``contextBudget`` is not
given, exactly the user's number when it is. The speed itself depends on the machine
(and on who else uses it), so the tests check that the budget follows from the speed
reported, not a number of tokens.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import small_model_path
from lsp_assist.config import parse_settings
from lsp_assist.serving.adaptive_budget import budget_cap
from tests.e2e.conftest import (
    SERVER,
    copy_demo,
    open_file,
    run_cli,
    server_env,
    start_session,
    wait_ready,
)

pytestmark = pytest.mark.slow

CHECKOUT = "shop/checkout.py"
FLOOR = 512
CAP = budget_cap(parse_settings(None)[0])[0]
ADAPTIVE = re.compile(
    r"^adaptive: (?P<tokens>[\d,]+) tokens.*?(?P<target>[\d,]+) ms x (?P<rate>[\d,]+) tok/s"
    r".* measured at load.*floor 512, cap [\d,]+"
)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _check_adaptive(reason: str, budget: int) -> None:
    """The reason names the budget, the target and the speed it follows from."""
    match = ADAPTIVE.match(reason)
    assert match, reason
    assert _number(match["tokens"]) == budget
    assert FLOOR <= budget <= CAP
    implied = max(FLOOR, min(_number(match["target"]) * _number(match["rate"]) // 1000, CAP))
    if "kept" in reason:  # within the hysteresis of the budget chosen before
        assert abs(budget - implied) <= 0.15 * budget + 1, reason
    else:  # tok/s is printed rounded to a whole number: half a token off at most
        assert abs(budget - implied) <= 1, reason


def test_context_and_doctor_report_the_budget_and_its_reason(tmp_path: Path) -> None:
    workspace = copy_demo(tmp_path)
    target = workspace / CHECKOUT
    lines = target.read_text().split("\n")
    model = str(small_model_path())
    where = f"{target}:{len(lines) - 1}:1"
    common = ["--workspace", str(workspace), "--model", model]

    out = run_cli("context", where, "--json", *common)
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    _check_adaptive(report["budget_reason"], report["budget"])
    assert report["total_tokens"] <= report["budget"]
    text = run_cli("context", where, *common)
    assert text.returncode == 0, text.stderr
    first = text.stdout.split("\n")[0]
    assert first.startswith("budget: adaptive: ") and f"/{report['budget']} tokens" in text.stdout

    given = run_cli("context", where, "--json", "--budget", "300", *common)
    assert given.returncode == 0, given.stderr
    explicit = json.loads(given.stdout)
    assert explicit["budget"] == 300 and explicit["total_tokens"] <= 300
    assert explicit["budget_reason"] == "explicit: 300 tokens (contextBudget set)"

    doctor = run_cli("doctor", "--json", "--model", model, "--workspace", str(tmp_path))
    assert doctor.returncode == 0, doctor.stderr
    budget = json.loads(doctor.stdout)["budget"]
    assert budget["mode"] == "adaptive" and budget["calibrated"] is True
    assert budget["rate_tok_s"] > 0 and budget["target_ms"] == 500
    _check_adaptive(budget["reason"], budget["tokens"])
    shown = run_cli("doctor", "--model", model, "--budget", "2048", "--workspace", str(tmp_path))
    assert "budget        explicit: 2,048 tokens (contextBudget set)" in shown.stdout


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def adaptive_client(lsp_client: LanguageClient, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A server with the small model and no contextBudget: the budget adapts."""
    options = {
        "modelPath": str(small_model_path()),
        "debounceMs": 0,
        "maxTokens": 16,
        "promptTimeoutMs": 120000,
        "generationTimeoutMs": 120000,
    }
    await start_session(lsp_client, request, options)
    yield
    await lsp_client.shutdown_session()


async def _explain(client: LanguageClient, uri: str, line: int) -> dict[str, Any]:
    result: dict[str, Any] = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.explainContext", arguments=[uri, line, 0])
    )
    assert "error" not in result, result
    return result


async def test_the_server_explains_its_budget(adaptive_client: LanguageClient) -> None:
    client = adaptive_client
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    status = await wait_ready(client)
    assert status["model"]["loaded"], status
    assert status["budget"]["mode"] == "adaptive" and status["budget"]["calibrated"]
    uri = open_file(client, workspace / CHECKOUT)
    result = await _explain(client, uri, 5)
    _check_adaptive(result["budget_reason"], result["budget"])
    assert result["text"].startswith(f"budget: {result['budget_reason']}\n")
    assert result["total_tokens"] <= result["budget"]

    client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"lspAssist": {"contextBudget": 700}})
    )
    for _ in range(100):
        state = await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="lspAssist.status")
        )
        if state["budget"]["mode"] == "explicit":
            break
    assert state["budget"]["tokens"] == 700
    given = await _explain(client, uri, 5)
    assert given["budget"] == 700
    assert given["budget_reason"] == "explicit: 700 tokens (contextBudget set)"
