"""The team prefix-sharing benchmark's core (benchmarks/bench_prefix_sharing.py) on a
tiny workspace with a tiny Qwen-family model (repository tokens, FIM, one token a
character): two editors in the same repository share the repository header, an editor's
consecutive keystrokes on one line share more than another editor's prompt, and the
``/infill`` layout is llama-server's.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.bench_prefix_sharing import (
    SERVER_FILE,
    SERVER_REPO,
    Request,
    ServerLimits,
    infill_tokens,
    simulate,
)
from tests.support.tiny_gguf import FAMILIES

SHAPES = '''def rectangle_area(width, height):
    """Return the area of a rectangle."""
    return width * height


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def circle_area(self):
        return 3.14159 * self.radius * self.radius
'''

USER = """from shapes import Circle, rectangle_area


def {name}_total(rows):
    total = 0
    for width, height in rows:
        total += rectangle_area(width, height)
    return total


def {name}_circles(radii):
    found = []
    for radius in radii:
        found.append(Circle(radius).circle_area())
    return found
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return FAMILIES["qwen"].write(tmp_path_factory.mktemp("model") / "qwen.gguf")


@pytest.fixture(scope="module")
def requests(model: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Request]:
    root = tmp_path_factory.mktemp("team") / "proj"
    root.mkdir()
    (root / "shapes.py").write_text(SHAPES)
    (root / "first.py").write_text(USER.format(name="first"))
    (root / "second.py").write_text(USER.format(name="second"))
    return simulate(
        root,
        model,
        editors=2,
        lines=3,
        keystrokes=5,
        same_file=0.0,
        seed=1,
        budget=512,
        files=["first.py", "second.py"],
        cache_dir=tmp_path_factory.mktemp("cache"),
    )


def test_editors_share_the_repository_header(requests: list[Request]) -> None:
    assert {r.editor for r in requests} == {0, 1}
    later = [r for r in requests if r.has_other]
    assert later
    # /infill: the server's own header (<|repo_name|>myproject) is every prompt's start
    header = min(r.head["infill"] for r in requests)
    assert header > 0
    assert all(r.other["infill"] >= header for r in later)
    # completions: a prompt with another file's block starts with <|repo_name|>proj; the
    # other editor's (in another file) starts with it too, unless it is a plain FIM
    # prompt (no other file: no header), which shares nothing
    with_context = [r for r in later if r.head["completions"] > 0]
    assert with_context, "no prompt carried another file's block"
    shared = [r for r in with_context if r.other["completions"] >= r.head["completions"]]
    assert len(shared) >= len(with_context) // 2
    assert all(r.head_identical["completions"] for r in shared)
    assert all(r.other["completions"] == 0 for r in with_context if r not in shared)


def test_own_keystrokes_on_one_line_share_more_than_another_editor(
    requests: list[Request],
) -> None:
    last: dict[int, Request] = {}
    compared = 0
    for r in requests:
        before = last.get(r.editor)
        last[r.editor] = r
        if before is None or (before.rel, before.line) != (r.rel, r.line) or not r.has_other:
            continue
        compared += 1
        for mode in ("completions", "infill"):
            assert r.own[mode] > r.other[mode], (mode, r.rel, r.line, r.column)
        # completions puts the typed part last: all but its tail is the previous prompt
        assert r.own["completions"] >= len(r.tokens["completions"]) - 3
    assert compared >= 4


def test_infill_tokens_follow_llama_servers_layout() -> None:
    def tokenize(text: str) -> list[int]:
        return [ord(c) for c in text]

    ids: dict[str, int | None] = {
        "repo": 1000,
        "sep": 1001,
        "pre": 1002,
        "suf": 1003,
        "mid": 1004,
        "bos": None,
    }
    body = {
        "input_prefix": "a = 1\n",
        "input_suffix": "\nb = 2\n",
        "prompt": "c = ",
        "input_extra": [{"filename": "x.py", "text": "def f(): ...\n"}],
    }
    tokens, head = infill_tokens(body, tokenize, ids, ServerLimits(slot_ctx=2048, batch=512))
    expected = [1000, *tokenize(SERVER_REPO), 1001, *tokenize("x.py\n")]
    expected += [*tokenize("def f(): ...\n"), 1001, *tokenize(SERVER_FILE)]
    expected += [1002, *tokenize("a = 1\n"), *tokenize("c = "), 1003, *tokenize("\nb = 2\n"), 1004]
    assert tokens == expected
    assert head == 1 + len(SERVER_REPO)
    # a slot too small for the extra part: it is cut from its start, the header with it
    small, cut = infill_tokens(body, tokenize, ids, ServerLimits(slot_ctx=520, batch=512))
    assert cut == 0 and small[0] != 1000
    assert small[small.index(1002) :] == expected[expected.index(1002) :]
