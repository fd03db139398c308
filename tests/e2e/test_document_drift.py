"""The server's text never drifts from the editor's: random edits over real JSON-RPC.

Each example opens a document through a real ``lsp-assist serve`` (stdio) and sends
random ``didChange`` events, with past-the-end characters and lines, ``\\n``, ``\\r\\n``
and lone ``\\r`` line breaks, astral characters (2 UTF-16 units) and batched changes;
after every event the server's text and version (``lspAssist.documentState``) must equal
a reference model of LSP 3.17's rules, written here independently of lsp_assist.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.e2e.conftest import server_env
from tests.support.jsonrpc import SERVE, StdioClient, replace_range

ALPHABET = st.sampled_from(["a", "b", "x", " ", "\t", "(", "é", "😀", "\n", "\r\n", "\r"])
TEXTS = st.lists(ALPHABET, max_size=40).map("".join)
_BREAK = re.compile(r"(\r\n|\r|\n)")


def units(text: str) -> int:
    """UTF-16 length."""
    return len(text.encode("utf-16-le")) // 2


def ref_lines(text: str) -> list[tuple[int, str]]:
    """(start offset, content) of each line, breaking at \\r\\n, \\r and \\n."""
    parts = _BREAK.split(text)
    out, offset = [], 0
    for index in range(0, len(parts), 2):
        out.append((offset, parts[index]))
        offset += len(parts[index]) + (len(parts[index + 1]) if index + 1 < len(parts) else 0)
    return out


def ref_offset(text: str, line: int, character: int) -> int:
    """Code point offset of an LSP position (UTF-16), with the spec's past-the-end rules."""
    lines = ref_lines(text)
    if line >= len(lines):
        return len(text)
    start, content = lines[line]
    used = 0
    for index, char in enumerate(content):
        if used >= character:
            return start + index
        used += units(char)
    return start + len(content)


def ref_apply(text: str, change: dict[str, Any]) -> str:
    """Apply one TextDocumentContentChangeEvent to ``text``."""
    if "range" not in change:
        return str(change["text"])
    rng = change["range"]
    a = ref_offset(text, rng["start"]["line"], rng["start"]["character"])
    b = ref_offset(text, rng["end"]["line"], rng["end"]["character"])
    return text[:a] + change["text"] + text[b:]


@st.composite
def position(draw: st.DrawFn, text: str) -> tuple[int, int]:
    """An LSP position in ``text``: inside a line, past its end, or past the last line."""
    lines = ref_lines(text)
    line = draw(st.integers(0, len(lines) + 1))
    if line >= len(lines):
        return line, draw(st.integers(0, 5))
    content = lines[line][1]
    if draw(st.booleans()):
        column = draw(st.integers(0, len(content)))
        return line, units(content[:column])
    return line, units(content) + draw(st.integers(0, 12))


@st.composite
def change_event(draw: st.DrawFn, text: str) -> dict[str, Any]:
    """A full replacement (rarely) or a range replacement in ``text``."""
    if draw(st.integers(0, 30)) == 0:
        return {"text": draw(TEXTS)}
    first, second = draw(position(text)), draw(position(text))
    if ref_offset(text, *second) < ref_offset(text, *first):
        first, second = second, first
    return {
        "range": {
            "start": {"line": first[0], "character": first[1]},
            "end": {"line": second[0], "character": second[1]},
        },
        "text": draw(st.lists(ALPHABET, max_size=6).map("".join)),
    }


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StdioClient]:
    """A real server without a model (document sync does not need one)."""
    workspace = tmp_path_factory.mktemp("drift")
    client = StdioClient([*SERVE, "--model", str(workspace / "absent.gguf")], env=server_env())
    client.initialize(workspace, {"metrics": False})
    yield client
    client.close()


_counter = [0]


def open_doc(client: StdioClient, text: str, suffix: str = ".py") -> str:
    """Open a fresh document and return its URI."""
    _counter[0] += 1
    uri = (Path("/tmp") / f"drift-{_counter[0]}{suffix}").as_uri()
    client.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 0, "text": text}},
    )
    return uri


def server_text(client: StdioClient, uri: str) -> tuple[str, int]:
    """The server's text and version of ``uri``."""
    state = client.command("lspAssist.documentState", uri)
    return state["text"], state["version"]


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(initial=TEXTS, data=st.data())
def test_random_edits_never_drift(server: StdioClient, initial: str, data: st.DataObject) -> None:
    uri = open_doc(server, initial)
    text = initial
    for version in range(1, 41):
        changes = []
        for _ in range(data.draw(st.integers(1, 3))):
            change = data.draw(change_event(text))
            changes.append(change)
            text = ref_apply(text, change)
        server.notify(
            "textDocument/didChange",
            {"textDocument": {"uri": uri, "version": version}, "contentChanges": changes},
        )
        got, got_version = server_text(server, uri)
        assert (got, got_version) == (text, version), f"after {changes!r}"


def test_past_the_end_character_means_the_end_of_the_line(server: StdioClient) -> None:
    uri = open_doc(server, "abc")
    replace_range(server, uri, 1, (0, 9), (0, 9), "X")
    assert server_text(server, uri) == ("abcX", 1)


def test_cr_only_line_breaks_are_lines(server: StdioClient) -> None:
    uri = open_doc(server, "one\rtwo\rthree")
    replace_range(server, uri, 1, (1, 0), (1, 3), "2")
    assert server_text(server, uri) == ("one\r2\rthree", 1)


def test_lone_surrogates_are_replaced_and_the_document_keeps_serving(
    server: StdioClient,
) -> None:
    uri = open_doc(server, "x = '\ud800'\n")
    text, _ = server_text(server, uri)
    assert text == "x = '\ufffd'\n"
    # Raises JsonRpcError (-32603 before the fix) if the request fails on the text.
    server.request(
        "textDocument/completion",
        {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 6}},
    )


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_huge_document_keeps_the_server_answering(server: StdioClient) -> None:
    # 30 MB: 10 minutes without an answer before (a whole-file parse and pygls's second
    # copy per keystroke). Now: no parsing, an empty answer, memory back after close.
    before = rss_mb(server.process.pid)
    line = "value = compute(alpha, beta, gamma)  # " + "x" * 60 + "\n"
    text = line * (30_000_000 // len(line))
    uri = open_doc(server, text)
    for column in range(20):
        replace_range(server, uri, column + 1, (5, column), (5, column), "y")
    result = server.request(
        "textDocument/inlineCompletion",
        {
            "textDocument": {"uri": uri},
            "position": {"line": 5, "character": 20},
            "context": {"triggerKind": 1},
        },
        timeout=60,
    )
    assert not result or not result.get("items")
    assert any("no completions and no parsing" in line for line in server.stderr_lines)
    got, version = server_text(server, uri)
    assert version == 20 and got == text[: 5 * len(line)] + "y" * 20 + text[5 * len(line) :]
    server.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    del got, text
    server.command("lspAssist.status")
    assert rss_mb(server.process.pid) < before + 150
