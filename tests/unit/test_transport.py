"""FrameReader and peek_request_id (lsp/transport.py) without a process: framing properties."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from lsp_assist.lsp.transport import Body, FrameReader, Rejected, peek_request_id

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
messages = st.builds(
    lambda i, params: {"jsonrpc": "2.0", "id": i, "method": "m", "params": params},
    st.integers(0, 10**6),
    json_values,
)


def encode(message: dict[str, object], *, ascii_only: bool = True) -> bytes:
    """Serialize as editors do: compact JSON, UTF-8."""
    return json.dumps(message, ensure_ascii=ascii_only).encode("utf-8")


def framed(data: bytes, length: int | None = None) -> bytes:
    """A frame with a Content-Length (the true one unless given)."""
    return b"Content-Length: %d\r\n\r\n%s" % (len(data) if length is None else length, data)


def feed_in_pieces(reader: FrameReader, data: bytes, cuts: list[int]) -> list[Body | Rejected]:
    """Feed ``data`` split at ``cuts``."""
    out: list[Body | Rejected] = []
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, end in itertools.pairwise(points):
        out += reader.feed(data[start:end])
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(messages, min_size=1, max_size=5), st.lists(st.integers(0, 10**6), max_size=12))
def test_well_formed_frames_come_out_whole_however_the_stream_is_split(
    batch: list[dict[str, object]], cuts: list[int]
) -> None:
    bodies = [encode(m, ascii_only=False) for m in batch]
    out = feed_in_pieces(FrameReader(), b"".join(framed(b) for b in bodies), cuts)
    assert out == [Body(b) for b in bodies]


BAD = st.sampled_from(["too-large", "too-small", "garbage", "huge", "zero"])


@settings(max_examples=200, deadline=None)
@given(messages, BAD, messages, st.lists(st.integers(0, 10**6), max_size=12))
def test_a_good_frame_after_any_bad_one_is_recovered(
    bad_message: dict[str, object], kind: str, good_message: dict[str, object], cuts: list[int]
) -> None:
    bad_body, good = encode(bad_message), encode(good_message)
    bad = {
        "too-large": framed(bad_body, len(bad_body) + 50),
        "too-small": framed(bad_body, max(1, len(bad_body) // 2)),
        "garbage": b"not a header at all " + bad_body,
        "huge": framed(bad_body, 10**15),
        "zero": framed(b"", 0) + bad_body,
    }[kind]
    reader = FrameReader(max_message_bytes=1 << 20)
    out = feed_in_pieces(reader, bad + framed(good), cuts)
    assert out[-1] == Body(good), out
    if kind == "huge":
        assert isinstance(out[0], Rejected) and out[0].head == bad_body
    if kind == "too-large":
        assert out[0] == Body(bad_body, out[0].problem) and "new header" in out[0].problem  # type: ignore[union-attr]


def test_lenient_headers() -> None:
    data = b'{"a":1}'
    for frame in (
        b"content-length: 7\r\n\r\n" + data,
        b"CONTENT-LENGTH:7\n\n" + data,
        b"Content-Length: 7\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"
        + data,
        b"Content-Type: application/vscode-jsonrpc\r\nContent-Length: 7\r\n\r\n" + data,
        b"Content-Length: 7\r\n" + data,  # no blank line
        b"\r\n\r\nContent-Length: 7\r\n\r\n" + data,  # stray blank lines
    ):
        reader = FrameReader()
        assert reader.feed(frame) == [Body(data)], frame
        assert reader.garbage_bytes == 0


def test_an_oversized_body_is_never_held() -> None:
    reader = FrameReader(max_message_bytes=1000)
    assert reader.feed(b"Content-Length: 5000000\r\n\r\n") == []
    for _ in range(50):
        assert reader.feed(b"x" * 100_000) == []
        assert len(reader._buf) <= 200
    out = reader.feed(framed(b"{}"))
    assert isinstance(out[0], Rejected) and len(out[0].head) <= 4096
    assert out[1:] == [Body(b"{}")]


def test_pending_describes_a_cut_stream() -> None:
    reader = FrameReader()
    reader.feed(b"Content-Length: 10\r\n\r\n{}")
    assert "2 bytes into a 10-byte body" in reader.pending()


def test_peek_request_id() -> None:
    assert peek_request_id(b'{"jsonrpc":"2.0","id":5,"method":"x","params":{') == 5
    assert peek_request_id(b'{"id" : "a\\"b", "method') == 'a"b'
    assert peek_request_id(b'{"method":"a","params":{"x":[{"id":3}]},"id":7,') == 7
    # A nested id is not the message's; a response is not answered.
    assert peek_request_id(b'{"method":"$/cancelRequest","params":{"id":5}}') is None
    assert peek_request_id(b'{"id":1,"result":null}') is None
    assert peek_request_id(b'{"id":1.5,"method":"x"}') is None
    assert peek_request_id(b'{"a":"id","b":2') is None
    assert peek_request_id(b"[1, 2]") is None
    assert peek_request_id(b"\xff\xfe") is None
    assert peek_request_id(b'{"id') is None
