"""Enter at line ends, replayed through the engine: how often a new line gets no suggestion.

For each chosen line of FILE the replay does what an editor session does: an automatic
request with the cursor at the end of the line (where it rested), then Enter as an edit
(a line break and Emacs python-mode's indentation: one level deeper after ``:``, one
less after ``return``/``raise``/``pass``/``break``/``continue``), an automatic request
on the new line, and the edit undone. One session, so the KV cache carries from request
to request as it does in an editor. Each new-line answer is printed as a JSON line with
why it is empty when it is: ``copy of the line below`` (the model's line equals the next
non-blank line, which post-processing drops), ``nothing written`` (the model wrote
only white space or ended), or ``dropped`` (another post-processing rule).

    .venv/bin/python benchmarks/bench_newline.py FILE [--places 40] [--model coder-0.5b]
        [--top-level]   # lines where Emacs's indentation after Enter is column 0
        [--enders]      # lines that start with return/raise/pass/break/continue
        [--lines 61,80]  # these lines (1-based) instead
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from lsp_assist.config import parse_settings
from lsp_assist.documents import Position
from lsp_assist.serving import CompletionEngine, CompletionQuery, Session

ENDERS = ("return", "raise", "pass", "break", "continue")


def new_line_indent(line: str) -> int:
    """Emacs python-mode's indentation of the line Enter opens after ``line``."""
    indent = len(line) - len(line.lstrip())
    code = line.strip()
    if code.endswith(":"):
        return indent + 4
    if code.split(" ")[0] in ENDERS:
        return max(0, indent - 4)
    return indent


def places(lines: list[str], n: int, *, top_level: bool, enders: bool) -> list[int]:
    """The 0-based lines to press Enter at the end of, ``n`` spread over the file."""
    found = [
        i
        for i, line in enumerate(lines)
        if line.strip()
        and not line.strip().startswith(("#", '"', "'", "@"))
        and not line.rstrip().endswith((",", "(", "[", "\\", '"""'))
    ]
    if top_level:
        found = [i for i in found if new_line_indent(lines[i]) == 0]
    if enders:
        found = [i for i in found if lines[i].strip().split(" ")[0] in ENDERS]
    step = max(1, len(found) // max(1, n))
    return found[::step][:n]


def why_empty(lines: list[str], i: int, raw: str) -> str:
    """Why the new line after ``lines[i]`` got nothing, from the model's own text."""
    below = next((line.strip() for line in lines[i + 1 :] if line.strip()), "")
    if not raw.strip():
        return "nothing written"
    if raw.strip().split("\n")[0] == below:
        return "copy of the line below"
    return "dropped"


def main() -> None:
    """Replay Enter at the chosen lines and print one JSON line each, then the summary."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("file", type=Path)
    parser.add_argument("--places", type=int, default=40)
    parser.add_argument("--model", default="coder-0.5b")
    parser.add_argument("--top-level", action="store_true")
    parser.add_argument("--enders", action="store_true")
    parser.add_argument("--lines", default="", help="1-based lines, comma-separated")
    args = parser.parse_args()
    path = args.file.resolve()
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    with tempfile.TemporaryDirectory() as cache:
        settings, _ = parse_settings(
            {
                "model": args.model,
                "cacheDir": cache,
                "promptTimeoutMs": 120000,
                "generationTimeoutMs": 120000,
                "metrics": False,
            }
        )
        session = Session(settings, workspace=path.parent)
        try:
            if session.index is not None:
                session.index.scan()
            backend = session.load_backend()
            assert backend is not None, session.model_error
            raw: dict[str, str] = {}
            generate = backend.generate

            def recording(request: Any) -> Any:
                result = generate(request)
                if request.alternatives == 1:  # the greedy line, not the next-best ask
                    raw["text"] = result.text
                return result

            backend.generate = recording  # type: ignore[method-assign]
            engine = CompletionEngine(session)
            uri = path.as_uri()
            session.buffers.open(uri, text, version=1)
            version, empty, causes = 1, 0, {}
            chosen = (
                [int(n) - 1 for n in args.lines.split(",")]
                if args.lines
                else places(lines, args.places, top_level=args.top_level, enders=args.enders)
            )
            for i in chosen:
                line = lines[i]
                indent = new_line_indent(line)
                snap = session.buffers.snapshot(uri)
                assert snap is not None
                engine.complete(
                    CompletionQuery(snapshot=snap, line=i, column=len(line), trigger="automatic")
                )
                end = Position(i, len(line))
                version += 1
                session.buffers.change(uri, version, [(end, end, "\n" + " " * indent)])
                snap = session.buffers.snapshot(uri)
                assert snap is not None
                raw.clear()
                outcome = engine.complete(
                    CompletionQuery(snapshot=snap, line=i + 1, column=indent, trigger="automatic")
                )
                cause = "" if outcome.text else why_empty(lines, i, raw.get("text", ""))
                if cause:
                    empty += 1
                    causes[cause] = causes.get(cause, 0) + 1
                print(
                    json.dumps(
                        {
                            "line": i + 1,
                            "after": line.strip()[:50],
                            "indent": indent,
                            "text": outcome.text,
                            "model_line": raw.get("text", ""),
                            "empty": cause,
                            "output_tokens": outcome.output_tokens,
                        }
                    ),
                    flush=True,
                )
                version += 1
                session.buffers.change(uri, version, [(end, Position(i + 1, indent), "")])
            print(json.dumps({"places": len(chosen), "empty": empty, "why": causes}))
        finally:
            session.close()


if __name__ == "__main__":
    main()
