"""The replay's empty line starts, asked again at leisure: did the model know the next line?

For each line start of one row of a ``bench --replay`` results.json where nothing was on
screen at Enter nor at the line's first key, the engine is asked once more at the end of
the line before, with that line as the user typed it and the region's later lines still
removed, with all the time it needs (an automatic request with early answers, so kept
lines and ``nextLineAtEnd`` apply as in the replay). One JSON line a line start: what it
shows there, what the type-through entry holds (the shown text and its kept lines), the
user's next line, and how the model treated the line (``ends``: it ended the line and
showed the next one; ``nothing``: it ended the line and showed nothing; ``comment``: a
trailing comment on it; ``continues``: more code on it). A last line sums them, and how
many entries hold the user's next line anywhere. docs/performance.md, "Every
generation pays".

    .venv/bin/python benchmarks/replay_line_ends.py RESULTS.json WORKSPACE [--row default]
        [--model coder-0.5b]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

from lsp_assist.config import parse_settings
from lsp_assist.evaluation.replay.report import line_starts
from lsp_assist.evaluation.replay.tasks import Region, region_buffers
from lsp_assist.serving import CompletionEngine, CompletionQuery, Session


def empty_starts(
    result: dict[str, Any], row: str
) -> tuple[list[dict[str, Any]], dict[str, Region]]:
    """The line starts of ``row`` with nothing on screen at Enter nor at the first key."""
    regions = {
        g["id"]: Region(**{k: tuple(v) if isinstance(v, list) else v for k, v in g.items()})
        for g in result["regions"]
    }
    keys = next(r for r in result["rows"] if r["name"] == row)["keys"]
    by_index = {(k["region"], k["i"]): k for k in keys}
    starts = []
    for start in line_starts(keys, list(regions.values())):
        enter = by_index.get((start["region"], start["i"] - 1))
        if not start["ready"] and not start["shown"] and not (enter and enter["shown"]):
            starts.append(start)
    return starts, regions


def kind_of(shown: str) -> str:
    """How the model treated the finished line, from what it shows at its end."""
    if shown.startswith("\n"):
        return "ends"
    if not shown.strip():
        return "nothing"
    if shown.lstrip().startswith(("#", "//")):
        return "comment"
    return "continues"


def main() -> None:
    """Ask at each empty line start's line end; print one JSON line each and the sums."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("workspace", type=Path)
    parser.add_argument("--row", default="default")
    parser.add_argument("--model", default="coder-0.5b")
    args = parser.parse_args()
    starts, regions = empty_starts(json.loads(args.results.read_text()), args.row)
    kinds: Counter[str] = Counter()
    holding = 0
    with tempfile.TemporaryDirectory() as cache:
        settings, _ = parse_settings(
            {"model": args.model, "cacheDir": cache, "metrics": False,
             "promptTimeoutMs": 120000, "generationTimeoutMs": 120000}
        )  # fmt: skip
        session = Session(settings, workspace=args.workspace)
        try:
            if session.index is not None:
                session.index.scan()
            assert session.load_backend() is not None, session.model_error
            engine = CompletionEngine(session)
            for version, start in enumerate(starts, 1):
                region = regions[start["region"]]
                path = args.workspace / region.path
                before, after = region_buffers(path.read_text(), region)
                end = region.target.rfind("\n", 0, start["pos"])  # the line before's end
                text = before + region.target[:end] + after
                uri = path.as_uri()
                session.buffers.open(uri, text, version=version)
                snap = session.buffers.snapshot(uri)
                assert snap is not None
                offset = len(before) + end
                line = text.count("\n", 0, offset)
                column = offset - (text.rfind("\n", 0, offset) + 1)
                query = CompletionQuery(
                    snapshot=snap, line=line, column=column, trigger="automatic", answer_early=True
                )
                outcome = engine.complete(query, on_answer=lambda _: None)
                entry = engine.typethrough.cache.peek(
                    engine.typethrough.key(snap, snap.clamp(line, column))
                )
                user_next = region.target[end + 1 :].split("\n", 1)[0].strip()
                held = bool(user_next) and user_next in entry
                kinds[kind_of(outcome.text)] += 1
                holding += held
                print(
                    json.dumps(
                        {
                            "region": region.id,
                            "line_before": region.target[:end].rsplit("\n", 1)[-1].strip(),
                            "user_next": user_next,
                            "shown": outcome.text,
                            "entry": entry,
                            "kind": kind_of(outcome.text),
                            "holds_next": held,
                        }
                    ),
                    flush=True,
                )
        finally:
            session.close()
    print(json.dumps({"line_starts": len(starts), "kinds": dict(kinds), "hold_next": holding}))


if __name__ == "__main__":
    main()
