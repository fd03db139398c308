"""What the server wrote while an editor test ran: its metrics log and its own log.

The editor tests check what a user's session left behind, read from the files under
the server's cache folder: every line of the metrics logs (``metrics_lines``), the
``shown`` lines of the suggestions shown (``shown_lines``, ``in_order``) and their
``retained`` lines (``retained_of``), the model requests (``model_requests``,
``first_model_request_after``), and the server log's line for a cursor prefill
(``wait_prefilled``). The waits are generous: two busy cores write late.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any


def metrics_lines(cache: Path) -> list[dict[str, Any]]:
    """Every line of the metrics logs under the cache folder."""
    lines: list[dict[str, Any]] = []
    for log in sorted(cache.rglob("metrics.jsonl")):
        lines += [json.loads(x) for x in log.read_text().splitlines()]
    return lines


def shown_lines(cache: Path) -> list[dict[str, Any]]:
    """The ``shown`` lines of the metrics logs under the cache folder."""
    return [x for x in metrics_lines(cache) if x.get("event") == "shown"]


def retained_of(cache: Path, *records: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``retained`` line of each shown record (by its item), waiting for the server's
    last lines (an accept's retention is measured early when the editor quits)."""
    by_item: dict[str, dict[str, Any]] = {}
    for _ in range(100):
        lines = [x for x in metrics_lines(cache) if x.get("event") == "retained"]
        by_item = {x["item"]: x for x in lines}
        if all(r["item"] in by_item for r in records):
            break
        time.sleep(0.1)
    missing = [r["item"] for r in records if r["item"] not in by_item]
    assert not missing, f"no retained line for {missing}: {list(by_item.values())}"
    return [by_item[r["item"]] for r in records]


def in_order(shown: list[dict[str, Any]], *wanted: tuple[str, str]) -> list[dict[str, Any]]:
    """The first record of each (outcome, trigger) in ``wanted``, each after the one before
    (other suggestions may show between them: while typing, or on an empty line)."""
    found, rest = [], iter(shown)
    summary = [(x["outcome"], x["trigger"], x["accepted_chars"]) for x in shown]
    for outcome, trigger in wanted:
        match = next((x for x in rest if (x["outcome"], x["trigger"]) == (outcome, trigger)), None)
        assert match is not None, f"no {outcome} {trigger} suggestion in order: {summary}"
        found.append(match)
    return found


def model_requests(cache: Path) -> list[dict[str, Any]]:
    """The model requests of the metrics log (no shown lines, no type-through hits)."""
    return [x for x in metrics_lines(cache) if "event" not in x and not x["cache_hit"]]


def first_model_request_after(cache: Path, count: int, timeout: float = 120) -> dict[str, Any]:
    """The first model request recorded after the first ``count``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        requests = model_requests(cache)
        if len(requests) > count:
            return requests[count]
        time.sleep(0.1)
    raise AssertionError(f"no model request after {count}: {model_requests(cache)}")


def wait_prefilled(log: Path, line: int, timeout: float = 180) -> str:
    """The server log's line for a cursor prefill on ``line`` (0-based), once written
    (``--log-level DEBUG``): a fixed rest was too short on two busy cores."""
    pattern = re.compile(rf"prefilled \(cursor\) \S+:{line}:\d+: .*")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = pattern.search(log.read_text(errors="replace")) if log.exists() else None
        if found:
            return found.group(0)
        time.sleep(0.1)
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"
    raise AssertionError(f"no prefill at line {line} within {timeout} s:\n{tail}")
