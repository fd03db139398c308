"""``lsp-assist serve`` and ``lsp-assist context`` see every model family the same way.

For each family the README says is detected (and the two packaged models' layouts) a
tiny GGUF with that family's special tokens goes through the serving path and through
the ``context`` command: both must detect the same format and build byte-identical
prompts, and the prompt that reaches the backend's ``generate`` must put the prefix,
the suffix and the FIM tokens in the family's order (suffix first for Codestral).
"""

from __future__ import annotations

import asyncio
import io
import json
import os
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.base import Backend, GenerationRequest, GenerationResult
from lsp_assist.cli.main import main as cli_main
from lsp_assist.config import parse_settings
from lsp_assist.context.layout import heal_split
from lsp_assist.serving.engine import CompletionEngine
from lsp_assist.serving.model import CompletionQuery
from lsp_assist.serving.session import Session
from tests.e2e.conftest import SERVER, init_params, open_file, server_env, wait_ready
from tests.support.tiny_gguf import FAMILIES

pytest.importorskip("llama_cpp")

from lsp_assist.backends.llama import LocalBackend

FORMAT = {"repo": "repo", "comment": "comment"}
"""Expected format name per family ('fim' for the others)."""

BILLING = '''"""Billing: totals and taxes."""
TAX_RATE = 0.2


def compute_total(items, discount=0.0):
    """Sum item prices minus a discount."""
    subtotal = sum(item.price for item in items)
    return subtotal * (1 - discount) * (1 + TAX_RATE)
'''

CART = '''"""Shopping cart."""
from pkg.billing import compute_total


def checkout(items):
    """Total the cart."""
    total = compute_total(items)
    return round(total, 2)


def empty():
    return []
'''
CURSOR_LINE = 6
TYPED = "    total = comp"
"""The cursor sits after this text of line 6 (0-based): 'ute_total(items)' follows."""

SETTINGS: dict[str, object] = {
    "watch": False,
    "persist": False,
    "metrics": False,
    "maxTokens": 4,
    # Fixed: an adaptive budget is measured by each process on its own (a loaded machine
    # gives serve and the CLI different speeds); this test is about formats, not budgets.
    "contextBudget": 512,
    "promptTimeoutMs": 120000,
    "generationTimeoutMs": 120000,
}


def _workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "pkg").mkdir(parents=True)
    (ws / "pkg" / "__init__.py").write_text("")
    (ws / "pkg" / "billing.py").write_text(BILLING)
    (ws / "pkg" / "cart.py").write_text(CART)
    return ws


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families")
    return {name: family.write(root / f"{name}.gguf") for name, family in FAMILIES.items()}


@pytest.fixture()
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for key in [k for k in os.environ if k.startswith("LSP_ASSIST_")]:
        monkeypatch.delenv(key)
    return _workspace(tmp_path)


def _family(prompt_json: dict[str, Any]) -> str:
    """Return the family the instructions layer names (``<family>``, ``<format> format``)."""
    layer = next(lay for lay in prompt_json["layers"] if lay["name"] == "instructions")
    item = layer["items"][0]
    assert item["reason"] == f"{prompt_json['format']} format"
    return str(item["symbol"])


def _context_cli(model: Path, workspace: Path, cache: Path) -> dict[str, Any]:
    """Run ``lsp-assist context --json`` in this process; return its JSON."""
    target = workspace / "pkg" / "cart.py"
    args = ["context", f"{target}:{CURSOR_LINE + 1}:{len(TYPED) + 1}", "--json"]
    args += ["--model", str(model), "--workspace", str(workspace)]
    for key, value in {**SETTINGS, "cacheDir": str(cache)}.items():
        args += ["--setting", f"{key}={str(value).lower() if isinstance(value, bool) else value}"]
    out = io.StringIO()
    with redirect_stdout(out):
        code = cli_main(args)
    assert code == 0
    data: dict[str, Any] = json.loads(out.getvalue())
    return data


@pytest.fixture()
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[list[int]]]:
    """Record the prompt token ids every LocalBackend.generate call receives."""
    calls: list[list[int]] = []
    real = LocalBackend.generate

    def generate(self: LocalBackend, request: GenerationRequest) -> GenerationResult:
        calls.append(list(request.prompt_tokens))
        return real(self, request)

    monkeypatch.setattr(LocalBackend, "generate", generate)
    yield calls


def _check_order(family: str, seq: list[int], backend: Backend, cli: dict[str, Any]) -> None:
    """Assert the FIM pieces of ``seq`` are where ``family`` wants them."""

    def special_id(text: str | None) -> int:
        assert text is not None
        ids = backend.tokenize(text, special=True)
        assert len(ids) == 1, (text, ids)
        return ids[0]

    # the cursor's own line always ends the prompt, but for its last pre-token, which
    # the model writes itself (token healing); a FIM prompt's middle starts at the code
    # (the indentation ends the prefix)
    fim = FAMILIES[family].fim
    kept, healed = heal_split(TYPED.lstrip(" \t") if fim is not None else TYPED)
    assert healed == " comp" and cli["prompt"]["healed"] == healed
    typed = backend.tokenize(kept)
    after = backend.tokenize("ute_total(items)")
    assert seq[-len(typed) :] == typed
    assert "def compute_total(items, discount=0.0):" in cli["prompt"]["prompt"]
    if fim is None:
        assert "ute_total(items)" not in backend.detokenize(seq)  # prefix only
        return
    pre, suf = special_id(fim[0]), special_id(fim[1])
    assert seq.count(pre) == 1 and seq.count(suf) == 1
    i_pre, i_suf = seq.index(pre), seq.index(suf)
    assert seq[i_suf + 1 : i_suf + 1 + len(after)] == after  # the suffix follows its marker
    if family == "codestral":
        # BOS [SUFFIX] suffix [PREFIX] prefix: suffix first, no middle token
        assert seq[0] == backend.info.bos_id and i_suf == 1 and i_pre > i_suf + len(after)
        assert special_id("[MIDDLE]") not in seq
    else:
        mid = special_id(fim[2])
        assert seq.count(mid) == 1
        i_mid = seq.index(mid)
        assert i_pre < i_suf < i_mid and seq[i_mid + 1 :] == typed


@pytest.mark.parametrize("family", list(FAMILIES))
def test_serve_and_context_cli_build_the_same_prompt(
    family: str, models: dict[str, Path], workspace: Path, tmp_path: Path, seen: list[list[int]]
) -> None:
    model = models[family]
    settings, warnings = parse_settings({**SETTINGS, "modelPath": str(model)})
    assert not warnings
    engine = CompletionEngine(Session(settings, workspace=workspace))
    try:
        thread = engine.session.start_indexing()
        if thread is not None:
            thread.join(60)
        target = workspace / "pkg" / "cart.py"
        uri = target.as_uri()
        engine.session.buffers.open(uri, CART, version=1, language_id="python")
        doc = engine.session.buffers.snapshot(uri)
        assert doc is not None
        served = engine.explain(doc, CURSOR_LINE, len(TYPED))
        outcome = engine.complete(
            CompletionQuery(snapshot=doc, line=CURSOR_LINE, column=len(TYPED))
        )
        assert not outcome.error and not outcome.skipped, outcome
        cli = _context_cli(model, workspace, tmp_path / "cli-cache")
        served_json = served.to_json()
        # the same format and family, and the same prompt, to the byte and to the token id
        assert cli["prompt"]["format"] == served.format == FORMAT.get(family, "fim")
        assert _family(cli["prompt"]) == _family(served_json) == family
        assert cli["prompt"]["prompt"] == served.prompt
        assert cli["prompt"]["layers"] == served_json["layers"]
        assert cli["tokens"] == served.tokens
        # ... and that prompt is what reached the model, in the family's order
        assert seen == [served.tokens]
        assert engine.session.backend is not None
        _check_order(family, seen[0], engine.session.backend, cli)
    finally:
        engine.session.close()


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def bare_client(lsp_client: LanguageClient) -> Any:
    """A server that is initialised by the test itself (each test picks its model)."""
    yield
    await lsp_client.shutdown_session()


# the families whose format the serve path used to get wrong; the test above runs all
@pytest.mark.parametrize("family", ["codestral", "codegemma", "deepseek", "codellama"])
async def test_explain_over_stdio_matches_context_cli(
    family: str,
    bare_client: LanguageClient,
    models: dict[str, Path],
    workspace: Path,
    tmp_path: Path,
) -> None:
    model = models[family]
    options = {**SETTINGS, "modelPath": str(model), "cacheDir": str(tmp_path / "cache")}
    await bare_client.initialize_session(init_params(workspace, options))
    status = await wait_ready(bare_client)
    assert status["model"]["loaded"], status
    for _ in range(300):  # the index scan runs in the background: wait for all 3 files
        if status["index"]["files_done"] >= 3 and status["ready"]:
            break
        await asyncio.sleep(0.1)
        status = await bare_client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="lspAssist.status")
        )
    assert status["index"]["files_done"] >= 3, status
    target = workspace / "pkg" / "cart.py"
    open_file(bare_client, target, CART)
    served = await bare_client.workspace_execute_command_async(
        types.ExecuteCommandParams(
            command="lspAssist.explainContext",
            arguments=[target.as_uri(), CURSOR_LINE, len(TYPED)],
        )
    )
    assert "error" not in served, served
    cli = _context_cli(model, workspace, tmp_path / "cli-cache")
    assert cli["prompt"]["format"] == served["format"] == "fim"
    assert _family(cli["prompt"]) == _family(served) == family
    assert cli["prompt"]["prompt"] == served["prompt"]
    assert cli["prompt"]["layers"] == served["layers"]
