"""The default code model (``coder-0.5b``, Qwen2.5-Coder-0.5B) through stdio, end to end.

Two answers a user needs from a code model that the fast SmolLM2 tests cannot show: a
fill-in-the-middle line that only the text after the cursor makes right, and a call
whose arguments only the related layer (a definition in another file) makes right.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import ClientServerConfig, LanguageClient

from lsp_assist.backends.models import preset_installed
from tests.support.workspace import copy_demo

from .conftest import SERVER, init_params, inline_params, open_file, server_env, wait_ready

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not preset_installed("coder-0.5b"), reason="coder-0.5b not installed"),
]

OPTIONS: dict[str, Any] = {
    "model": "coder-0.5b",
    "debounceMs": 0,
    "contextBudget": 1024,
    "promptTimeoutMs": 120000,
    "generationTimeoutMs": 120000,
    "answerAfterMs": 0,
}

TOTALS = '''"""Order totals."""


def order_total(lines):
    """Return the sum of quantity times unit price over the order lines."""

    for quantity, unit_price in lines:
        running_sum += quantity * unit_price
    return running_sum
'''


RECEIPTS = '''"""Receipts: the text printed for a paid order."""

from shop.models import Order


def format_receipt(order: Order, *, locale: str, show_tax: bool) -> str:
    """Return the receipt of ``order`` in ``locale``, with the tax line when ``show_tax``."""
    lines = [f"Order {order.order_id}"]
    if show_tax:
        lines.append("VAT included")
    return "\\n".join(lines)
'''

CALLER = '''"""Sending receipts."""

from shop.models import Order
from shop.receipts import format_receipt


def send_receipt(order: Order, mailer) -> None:
    """Mail the receipt of a paid order."""
    text = format_receipt(order, '''


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER, server_env=server_env()))
async def coder(lsp_client: LanguageClient, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A server with the default code model on a copy of the demo workspace plus two files."""
    workspace = copy_demo(tmp_path)
    (workspace / "shop" / "totals.py").write_text(TOTALS)
    (workspace / "shop" / "receipts.py").write_text(RECEIPTS)
    (workspace / "shop" / "mail.py").write_text(CALLER)
    options = {"cacheDir": str(tmp_path / "cache"), **OPTIONS}
    await lsp_client.initialize_session(init_params(workspace, options))
    lsp_client.workspace_path = workspace  # type: ignore[attr-defined]
    status = await wait_ready(lsp_client, timeout=300)
    assert status["model"]["loaded"], status
    assert "qwen2.5-coder-0.5b" in status["model"]["path"]
    yield
    await lsp_client.shutdown_session()


async def _ask(client: LanguageClient, uri: str, line: int, col: int) -> str:
    result = await client.text_document_inline_completion_async(
        inline_params(uri, line, col, automatic=True)
    )
    assert result is not None and result.items, "no suggestion"
    return str(result.items[0].insert_text)


async def _blank_line_typed(client: LanguageClient, typed: str) -> tuple[str, int]:
    """Open totals.py with ``typed`` on its blank body line; return the URI and the line."""
    workspace: Path = client.workspace_path  # type: ignore[attr-defined]
    uri = open_file(client, workspace / "shop" / "totals.py")
    line = 5  # the blank line in the body
    text = TOTALS.split("\n")
    assert text[line] == ""
    text[line] = typed
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text="\n".join(text))],
        )
    )
    return uri, line


async def test_the_name_the_suffix_asks_for(coder: LanguageClient) -> None:
    """``run`` typed on the blank line: only the suffix says it is ``running_sum`` = 0."""
    uri, line = await _blank_line_typed(coder, "    run")
    suggestion = await _ask(coder, uri, line, len("    run"))
    assert suggestion.replace(" ", "").startswith("ning_sum=0"), suggestion


async def test_the_line_the_suffix_asks_for(coder: LanguageClient) -> None:
    """Only the indentation typed: only the suffix says ``running_sum`` starts at 0."""
    uri, line = await _blank_line_typed(coder, "    ")
    suggestion = await _ask(coder, uri, line, 4)
    assert suggestion.replace(" ", "").startswith("running_sum=0"), suggestion


async def test_the_call_the_related_layer_completes(coder: LanguageClient) -> None:
    """``format_receipt``'s keyword-only parameters are written in shop/receipts.py only:
    the related layer puts that definition in the prompt, and the model writes them."""
    workspace: Path = coder.workspace_path  # type: ignore[attr-defined]
    path = workspace / "shop" / "mail.py"
    uri = open_file(coder, path)
    lines = CALLER.split("\n")
    line, col = len(lines) - 1, len(lines[-1])
    suggestion = await _ask(coder, uri, line, col)
    explained = await coder.workspace_execute_command_async(
        types.ExecuteCommandParams(command="lspAssist.explainContext", arguments=[uri, line, col])
    )
    related = {layer["name"]: layer for layer in explained["layers"]}["related"]
    assert any(item["symbol"] == "format_receipt" for item in related["items"]), related
    assert "locale=" in suggestion and "show_tax=" in suggestion, suggestion
