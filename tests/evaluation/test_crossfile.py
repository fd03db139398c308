"""The cross-file line benchmark without a model: which lines it takes, how it scores them,
its figures and table, the oracle's pins in a real prompt, the command's checks.

Packages are written to a temporary folder and scanned by the real WorkspaceIndex; the
oracle's prompt is built by the real context engine with an approximate tokenizer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lsp_assist.cli.main import main
from lsp_assist.config import parse_settings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.model import Cursor
from lsp_assist.context.tokens import ApproxTokenizer
from lsp_assist.evaluation.replay import crossfile as cf
from lsp_assist.evaluation.replay.crossfile_run import from_json, package_name, parse_package
from tests.context.fakes import QWEN_LIKE
from tests.support.crossfile_packages import CART_TS, CHECKOUT, MODELS, UTIL_TS
from tests.support.workspace import scanned_index


def package(tmp_path: Path) -> Any:
    files = {"shop/__init__.py": "", "shop/models.py": MODELS, "shop/checkout.py": CHECKOUT}
    return scanned_index(tmp_path / "shop", files)


def test_the_lines_taken_use_another_files_name_written_above(tmp_path: Path) -> None:
    index = package(tmp_path)
    tasks = cf.choose_tasks(index, "shop", 20, seed=3, per_file=20, gap=1)
    index.stop()
    by_line = {t.task.expected: t for t in tasks}
    assert set(by_line) == {
        "order = Order(draft)",
        "total = order_total(order, tax=0.1)",
        "again = models.order_total(order)",
    }, "twice()'s line repeats; local_helper is the file's own; make_receipt is imported below"
    total = by_line["total = order_total(order, tax=0.1)"]
    assert total.names == ("order_total",) and total.definitions == ("shop/models.py:order_total",)
    assert total.task.key == "order_total" and total.task.indent == 4
    assert "def order_total(order, *, tax=0.2):" in total.task.needles
    assert all(t.task.path == "shop/checkout.py" for t in tasks)
    assert [t.id for t in tasks] == ["shop-001", "shop-002", "shop-003"]


def test_lines_of_a_file_are_spaced_and_capped_and_the_seed_decides(tmp_path: Path) -> None:
    index = package(tmp_path)
    few = cf.choose_tasks(index, "shop", 20, seed=3)
    again = cf.choose_tasks(index, "shop", 20, seed=3)
    one = cf.choose_tasks(index, "shop", 1, seed=3)
    index.stop()
    assert len(few) == 1  # its three lines are closer than LINE_GAP: one of them
    assert [t.to_json() for t in few] == [t.to_json() for t in again]
    assert len(one) == 1
    assert cf.CrossTask.from_json(json.loads(json.dumps(few[0].to_json()))) == few[0]


def test_typescript_lines_count_names_an_import_binds(tmp_path: Path) -> None:
    index = scanned_index(tmp_path / "kit", {"util.ts": UTIL_TS, "cart.ts": CART_TS})
    tasks = cf.choose_tasks(index, "kit", 5, seed=1, per_file=5, gap=1)
    index.stop()
    assert [t.task.expected for t in tasks] == ["const shown = formatPrice(sum)"]
    assert tasks[0].task.language == "typescript"


def test_the_user_at_the_line_has_the_file_up_to_it_and_the_oracle_its_pins(
    tmp_path: Path,
) -> None:
    index = package(tmp_path)
    task = next(
        t
        for t in cf.choose_tasks(index, "shop", 20, seed=3, per_file=20, gap=1)
        if t.names == ("order_total",)
    )
    buffer = task.buffer(CHECKOUT)
    assert buffer.endswith("    order.lines.append(number)\n    ")
    assert "total = order_total" not in buffer and "def twice" not in buffer
    assert task.pins() == [f"shop/checkout.py:{task.task.line + 1}=shop/models.py:order_total"]
    assert cf.row_settings("oracle", [task]) == {"relatedPins": task.pins()}
    assert cf.row_settings("plain", [task])["layerRelated"] is False
    assert cf.row_settings("default", [task]) == {}

    def prompt(row: str) -> str:
        settings, warnings = parse_settings({"contextBudget": 1024, **cf.row_settings(row, [task])})
        assert warnings == []
        engine = ContextEngine(
            index,
            ApproxTokenizer(QWEN_LIKE.special_tokens),
            QWEN_LIKE,
            settings.context,
            relative=index.relative,
        )
        path = index.roots[0] / task.task.path
        cursor = Cursor(path, "python", buffer, task.task.line, task.task.indent)
        return engine.build(cursor).prompt

    oracle, plain = prompt("oracle"), prompt("plain")
    index.stop()
    assert cf.carries(task, oracle) and not cf.carries(task, plain)
    assert "<|file_sep|>" not in plain


@pytest.mark.parametrize(
    ("suggestion", "pressed"),
    [
        ("total = order_total(order, tax=0.1)", 1),  # Tab
        ("total = order_total(order, tax=0.1)\n    return total", 1),  # its first line
        ("total = order_total(order)", 15),  # 5 words up to `(order`, then 10 keys typed
        ("result = compute()", 35),  # wrong from the first key: typed over
        ("", 35),
        ("t", 35),  # right, but one key types it anyway
    ],
)
def test_keys_a_typist_presses_with_one_suggestion_at_the_start(
    suggestion: str, pressed: int
) -> None:
    target = "total = order_total(order, tax=0.1)"
    assert cf.line_keys(target, suggestion) == (len(target), pressed)


def test_a_record_is_scored_as_the_bench_scores_lines(tmp_path: Path) -> None:
    index = package(tmp_path)
    task = cf.choose_tasks(index, "shop", 20, seed=3, per_file=20, gap=1)[1]
    index.stop()
    got = cf.score_answer(task, "total = order_total(order)")
    assert not got["exact_match"] and got["identifier_match"]
    assert 0.7 < got["edit_similarity"] < 1.0
    assert cf.score_answer(task, task.task.expected)["exact_match"]
    assert not cf.score_answer(task, "total = compute(order)")["identifier_match"]


def _record(row: str, package: str, **values: Any) -> dict[str, Any]:
    return {"row": row, "package": package, "task": "t", **values}


def test_figures_per_package_and_over_all() -> None:
    records = [
        _record("plain", "a", exact_match=True, identifier_match=True, edit_similarity=1.0,
                keys_needed=10, keys_pressed=1, suggestion="x = 1", prompt_tokens=100,
                client_ms=50.0, carries_definition=False),
        _record("plain", "b", exact_match=False, identifier_match=False, edit_similarity=0.5,
                keys_needed=10, keys_pressed=10, suggestion="", prompt_tokens=300,
                client_ms=70.0, carries_definition=False, skipped="no outcome"),
        _record("oracle", "a", exact_match=True, identifier_match=True, edit_similarity=1.0,
                keys_needed=10, keys_pressed=1, suggestion="x = 1", carries_definition=True,
                leaked=True),
    ]  # fmt: skip
    summary = cf.summarize(records, ["plain", "oracle"])
    assert list(summary) == ["a", "b", "all"]
    plain = summary["all"]["plain"]
    assert (plain["tasks"], plain["exact"], plain["identifier"], plain["empty"]) == (2, 1, 1, 1)
    assert plain["keys_saved"] == pytest.approx(1 - 11 / 20)
    assert plain["edit_similarity"] == pytest.approx(0.75)
    assert plain["prompt_tokens_mean"] == 200 and plain["skipped"] == 1
    assert plain["definition_share"] == 0.0 and summary["a"]["oracle"]["definition_share"] == 1.0
    assert summary["all"]["oracle"]["leaks"] == 1 and summary["b"]["oracle"]["tasks"] == 0
    meta = {
        "model_label": "m",
        "command": "lsp-assist bench --crossfile",
        "date": "today",
        "commit": "abc",
        "load_start": 1.0,
        "settings": "contextBudget 1024",
        "packages": {"a": {"language": "python"}, "b": {"language": "typescript"}},
    }
    text = cf.table({"meta": meta, "summary": summary})
    assert "## a (python)" in text and "## b (typescript)" in text and "## all packages" in text
    assert "| plain FIM of the file | 2 | 1 | 1 | 0.750 | 45.0% | 0% | 200 | 1 | 70 ms |" in text


def test_package_names_and_the_command_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert package_name(tmp_path / "tanstack-db" / "package" / "src") == "tanstack-db"
    assert parse_package("kit=/x/src") == ("kit", Path("/x/src"))
    assert parse_package("/tmp/ws/strands")[0] == "strands"
    assert main(["bench", "--crossfile"]) == 2
    assert "--package" in capsys.readouterr().err
    assert main(["bench", "--crossfile", "--package", str(tmp_path), "--rows", "x"]) == 2
    assert main(["bench", "--crossfile", "--package", str(tmp_path / "none")]) == 2
    assert "not a folder" in capsys.readouterr().err


def test_the_figures_are_recomputed_from_the_records(tmp_path: Path) -> None:
    meta = {
        "model_label": "m",
        "command": "c",
        "date": "d",
        "commit": "x",
        "load_start": 0.5,
        "settings": "",
        "rows": ["default"],
        "packages": {"a": {"language": "python"}},
    }
    record = _record("default", "a", exact_match=True, keys_needed=4, keys_pressed=1)
    data = tmp_path / "results.json"
    data.write_text(json.dumps({"meta": meta, "records": [record], "summary": {}}))
    result = from_json(data, tmp_path / "out")
    assert result["summary"]["a"]["default"]["keys_saved"] == 0.75
    assert "| default | 1 | 1 |" in (tmp_path / "out" / "table.md").read_text()
