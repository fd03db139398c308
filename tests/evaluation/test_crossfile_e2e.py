"""``bench --crossfile`` through the real server with a tiny GGUF: two packages (Python and
TypeScript), the three rows, every record, the oracle's prompts, the copy restored.

Slow: one ``lsp-assist serve`` per package and row. The model's answers mean nothing
(one token per character, random weights); what is checked is what each row's server
was given and that every line was served.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.cli.main import main
from tests.support.crossfile_packages import CART_TS, CHECKOUT, MODELS, UTIL_TS
from tests.support.tiny_gguf import char_words, write_tiny_gguf
from tests.support.workspace import write_files

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("crossfile")
    model = write_tiny_gguf(root / "tiny.gguf", words=char_words(), context_length=4096)
    shop = write_files(
        root / "shop",
        {"shop/__init__.py": "", "shop/models.py": MODELS, "shop/checkout.py": CHECKOUT},
    )
    kit = write_files(root / "kit" / "src", {"util.ts": UTIL_TS, "cart.ts": CART_TS})
    out, work = root / "out", root / "work"
    code = main(
        [
            "bench",
            "--crossfile",
            str(shop),
            "--package",
            str(kit),
            "--tasks",
            "3",
            "--model",
            str(model),
            "--out",
            str(out),
            "--work",
            str(work),
            "--keep",
            "--setting",
            "maxTokens=8",
            "--setting",
            "threads=1",
        ]
    )
    result = json.loads((out / "results.json").read_text())
    return {"code": code, "out": out, "work": work, "result": result}


def test_every_row_serves_every_line_of_both_packages(run: dict[str, Any]) -> None:
    assert run["code"] == 0
    result = run["result"]
    assert (run["out"] / "table.md").read_text().count("| default |") == 3  # two packages, all
    assert set(result["meta"]["packages"]) == {"shop", "kit"}
    assert result["meta"]["packages"]["kit"]["language"] == "typescript"
    tasks = [t["task"]["id"] for t in result["tasks"]]
    assert tasks == ["shop-001", "kit-001"]  # one line a file: shop's are closer than 10 lines
    served = {(r["row"], r["task"]) for r in result["records"]}
    assert served == {(row, task) for row in ("plain", "default", "oracle") for task in tasks}
    assert all(r.get("request_id") and "prompt" in r for r in result["records"])
    assert not any(r["leaked"] for r in result["records"])


def test_the_oracle_carries_the_definition_and_plain_no_other_file(run: dict[str, Any]) -> None:
    records = run["result"]["records"]
    assert all(r["carries_definition"] for r in records if r["row"] == "oracle")
    plain = [r for r in records if r["row"] == "plain"]
    assert not any(r["carries_definition"] or "<|file_sep|>" in r["prompt"] for r in plain)
    assert run["result"]["summary"]["all"]["oracle"]["definition_share"] == 1.0


def test_each_file_is_restored_in_the_copy(run: dict[str, Any]) -> None:
    files = [*Path(run["work"]).rglob("*.py"), *Path(run["work"]).rglob("*.ts")]
    copies = {p.name: p.read_text() for p in files}
    assert copies["checkout.py"] == CHECKOUT and copies["cart.ts"] == CART_TS
