"""Nothing before the editing zone changes while the user types within a line (issue 10, part 2).

A real ``WorkspaceIndex`` over a temporary workspace; the buffer is re-indexed at
every keystroke as the server does, and each keystroke's prompt is built with
``ContextEngine.build`` as a completion builds it (reading the prompt memory, then
remembered in it: ``completions.Completions``).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lsp_assist.config import ContextSettings
from lsp_assist.context.engine import ContextEngine
from lsp_assist.context.layout import heal_split
from lsp_assist.context.model import AssembledPrompt, Cursor
from lsp_assist.context.tokens import ApproxTokenizer
from tests.support.workspace import scanned_index, write_files

from .completions import Completions
from .fakes import GEMMA_LIKE, QWEN_LIKE

HELPERS = '''"""Header parsing helpers."""


def parse_header(data, *, strict=False):
    """Return the header fields of ``data``."""
    fields = {}
    for raw in data.split(b"\\n"):
        key, _, value = raw.partition(b":")
        if strict and not value:
            raise ValueError(raw)
        fields[key.strip()] = value.strip()
    return fields


class Checksum:
    """A running checksum."""

    def __init__(self, seed=0):
        self.value = seed

    def update(self, chunk):
        self.value = (self.value * 31 + sum(chunk)) % 65521
        return self.value
'''

FRAMES = '''"""Framing of records on the wire."""
import struct


def encode_frame(payload, checksum):
    """Return ``payload`` framed with its length and checksum."""
    return struct.pack(">II", len(payload), checksum) + payload


def decode_frame(data):
    """Return the payload and checksum of a frame."""
    size, checksum = struct.unpack(">II", data[:8])
    return data[8 : 8 + size], checksum
'''

CODES = '''"""Status codes."""

OK = 0
SHORT = 1
BAD_HEADER = 2


def describe(code):
    """Return the name of a status code."""
    return {OK: "ok", SHORT: "short", BAD_HEADER: "bad header"}.get(code, "unknown")
'''


def reader_source() -> str:
    """Return a module long enough for the summaries to matter, importing both helpers."""
    out = [
        '"""Reading framed records from a stream."""',
        "import io",
        "",
        "from pkg import frames",
        "from pkg.codes import BAD_HEADER, OK, SHORT, describe",
        "from pkg.helpers import Checksum, parse_header",
        "",
        "",
        "class Reader:",
        '    """Reads records."""',
        "",
        "    def __init__(self, stream):",
        "        self.stream = stream",
        "        self.data = b''",
        "        self.sum = Checksum()",
        "",
        "    def read_record(self):",
        "        self.data = self.stream.read(512)",
        "        if len(self.data) < 8:",
        "            return SHORT, None",
        "        header = parse_header(self.data, strict=True)",
        "        self.sum.update(self.data)",
        "        frame = frames.encode_frame(self.data, self.sum.value)",
        "        return OK, header, frame",
        "",
    ]
    for i in range(12):
        out += [
            f"    def field_{i}(self, record):",
            f'        """Return field {i} of ``record``."""',
            f"        value = record.get(b'f{i}', b'')",
            "        return value.decode('ascii', errors='replace') or describe(BAD_HEADER)",
            "",
        ]
    out += [
        "",
        "def open_reader(path):",
        '    """Open ``path`` and return a Reader."""',
        "    return Reader(io.open(path, 'rb'))",
        "",
    ]
    return "\n".join(out)


@pytest.fixture()
def workspace(tmp_path: Path) -> Path:
    files = {
        "pkg/__init__.py": "",
        "pkg/helpers.py": HELPERS,
        "pkg/codes.py": CODES,
        "pkg/frames.py": FRAMES,
        "pkg/reader.py": reader_source(),
    }
    return write_files(tmp_path, files)


def zone_head(prompt: AssembledPrompt, fim: bool) -> str:
    """Return the prompt text before the editing zone (FIM: up to the suffix marker)."""
    zone = {layer.name: layer for layer in prompt.layers}["editing_zone"]
    if not fim:
        assert prompt.prompt.endswith(zone.text)
        return prompt.prompt[: len(prompt.prompt) - len(zone.text)]
    # the layout is head, zone lines before the cursor line, <|fim_suffix|>, after, typed
    return prompt.prompt[: prompt.prompt.index("<|fim_suffix|>")]


@pytest.mark.parametrize("model", [GEMMA_LIKE, QWEN_LIKE], ids=lambda m: m.path)
def test_head_is_identical_for_every_keystroke_within_a_line(workspace: Path, model) -> None:
    index = scanned_index(workspace)
    engine = ContextEngine(
        index,
        ApproxTokenizer(model.special_tokens),
        model,
        ContextSettings(),
        relative=index.relative,
    )
    path = workspace / "pkg" / "reader.py"
    text = path.read_text()
    lines = text.split("\n")
    engine.note_opened(path)
    typing = Completions(engine)
    fim = model.path != GEMMA_LIKE.path
    for target in (
        "        header = parse_header(self.data, strict=True)",
        "        frame = frames.encode_frame(self.data, self.sum.value)",
        "        return value.decode('ascii', errors='replace') or describe(BAD_HEADER)",
    ):
        line = lines.index(target)
        indent = len(target) - len(target.lstrip())
        heads = []
        for k in range(indent, len(target) + 1):
            typed = list(lines)
            typed[line] = target[:k]
            buffer = "\n".join(typed)
            index.open_buffer(path, buffer)
            prompt = typing.build(
                Cursor(path=path, language="python", text=buffer, line=line, column=k)
            )
            assert prompt.total_tokens <= prompt.budget
            # a FIM prompt's middle starts at the code: the indentation ends the prefix
            kept, healed = heal_split(target[indent:k] if fim else target[:k])
            assert prompt.prompt.endswith(kept) and prompt.healed == healed
            heads.append((zone_head(prompt, fim), prompt))
        first, first_prompt = heads[0]
        assert "pkg/helpers.py" in first
        for k, (head, prompt) in enumerate(heads):
            assert head == first, f"head changed after typing {target[indent : indent + k]!r}"
            if not fim:
                zone = {layer.name: layer for layer in prompt.layers}["editing_zone"]
                n = prompt.total_tokens - zone.tokens
                assert prompt.tokens[:n] == first_prompt.tokens[:n]


def test_project_summary_is_the_same_at_every_position_of_a_file(workspace: Path) -> None:
    index = scanned_index(workspace)
    engine = ContextEngine(
        index, ApproxTokenizer(), GEMMA_LIKE, ContextSettings(), relative=index.relative
    )
    path = workspace / "pkg" / "reader.py"
    text = path.read_text()
    index.open_buffer(path, text)
    lines = text.split("\n")
    summaries = set()
    for line in range(0, len(lines), 3):
        prompt = engine.build(
            Cursor(path=path, language="python", text=text, line=line, column=len(lines[line]))
        )
        layers = {layer.name: layer for layer in prompt.layers}
        summaries.add(layers["project_summary"].text)
        assert prompt.prompt.startswith(
            layers["instructions"].text + layers["project_summary"].text
        )
    assert len(summaries) == 1
    assert "pkg/codes.py" in summaries.pop()


def test_new_lines_typed_in_a_fim_prompt_only_append_to_it(workspace: Path) -> None:
    """Typing two new lines keystroke by keystroke, each from its indentation (where an
    editor's auto-indent puts the cursor): after the first line's first build, prefix,
    suffix and middle token stay as they were, and every prompt extends the previous one
    but for its last few tokens (the typed tail: token healing)."""
    index = scanned_index(workspace)
    engine = ContextEngine(
        index,
        ApproxTokenizer(QWEN_LIKE.special_tokens),
        QWEN_LIKE,
        ContextSettings(),
        relative=index.relative,
    )
    path = workspace / "pkg" / "reader.py"
    lines = path.read_text().split("\n")
    engine.note_opened(path)
    typing = Completions(engine)
    at = lines.index("        self.sum.update(self.data)")
    new_lines = ["        extra = self.data[:4]", "        self.sum.update(extra)"]
    prompts: list[AssembledPrompt] = []
    for n, new in enumerate(new_lines):
        for k in range(len(new) - len(new.lstrip()), len(new) + 1):
            typed = lines[:at] + new_lines[:n] + [new[:k]] + lines[at:]
            buffer = "\n".join(typed)
            index.open_buffer(path, buffer)
            cursor = Cursor(path=path, language="python", text=buffer, line=at + n, column=k)
            prompts.append(typing.build(cursor))
    mid = QWEN_LIKE.fim_middle_id
    first = prompts[0].tokens[: prompts[0].tokens.index(mid) + 1]
    for prompt in prompts:
        assert prompt.tokens[: len(first)] == first  # prefix, suffix, middle token kept
    second_line = prompts[len(new_lines[0]) + 1 :]
    assert second_line, "the second line was typed"
    for prompt in second_line:
        middle = prompt.prompt[prompt.prompt.index("<|fim_middle|>") :]
        assert new_lines[0].lstrip() + "\n" in middle  # the first typed line is in the middle
    for before, after in itertools.pairwise(prompts):
        common = 0
        for a, b in zip(before.tokens, after.tokens, strict=False):
            if a != b:
                break
            common += 1
        assert len(before.tokens) - common <= 3, "a keystroke re-laid out the prompt"
