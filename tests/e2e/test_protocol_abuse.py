"""Raw bytes at a real ``lsp-assist serve``: bad frames, lifecycle abuse, TCP sessions.

Each test starts the server as a subprocess and writes bytes to it the way a broken or
hostile client would, then checks that a well-formed request still gets its answer (or
that the process ends with the documented code). Only the TCP session test loads a
model; the others name a model file that does not exist, so the server starts in a
second and answers with empty completions. The server process and the raw channel to it
are tests/support/raw_server.py.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from lsp_assist.backends.models import small_model_path
from tests.support.ports import free_port
from tests.support.raw_server import (
    INITIALIZE,
    Channel,
    ServerProcess,
    body,
    proc_status,
    resources,
    status_request,
    wait_model,
)


@pytest.fixture
def server(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A stdio channel to a server without a model, not yet initialized."""
    process = ServerProcess(tmp_path)
    yield process.stdio()
    process.close()


def assert_serves(client: Channel, msg_id: int) -> None:
    """A well-formed status request gets its result."""
    client.send(status_request(msg_id))
    answer = client.response(msg_id)
    assert answer.get("result", {}).get("initialized") is True, answer


# -- framing ------------------------------------------------------------------------

STATUS_2 = body(status_request(2))

BAD_FRAMES: dict[str, bytes] = {
    # Declared larger than the body: the next frame's header arrives inside the "body".
    "length-too-large": b"Content-Length: %d\r\n\r\n%s" % (len(STATUS_2) + 100, STATUS_2),
    # Declared smaller: the rest of the body sits in front of the next header.
    "length-too-small": b"Content-Length: %d\r\n\r\n%s" % (len(STATUS_2) - 30, STATUS_2),
    "lower-case-name": b"content-length: %d\r\n\r\n%s" % (len(STATUS_2), STATUS_2),
    "lf-only-lines": b"Content-Length: %d\n\n%s" % (len(STATUS_2), STATUS_2),
    "no-blank-line": b"Content-Length: %d\r\n%s" % (len(STATUS_2), STATUS_2),
    "garbage-line": b"hello, server\r\n",
    "content-type-first": (
        b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(STATUS_2), STATUS_2)
    ),
}
# What request 2 inside the bad frame gets: a result where the frame could still be
# read whole, a ParseError where it was cut, nothing where there was no request.
EXPECT_2: dict[str, str | int | None] = {
    "length-too-large": "result",
    "length-too-small": -32700,
    "lower-case-name": "result",
    "lf-only-lines": "result",
    "no-blank-line": "result",
    "garbage-line": None,
    "content-type-first": "result",
}


@pytest.mark.parametrize("case", sorted(BAD_FRAMES))
def test_bad_frame_then_a_good_request_is_answered(server: Channel, case: str) -> None:
    server.initialize()
    server.send_raw(BAD_FRAMES[case])
    assert_serves(server, 3)
    expected = EXPECT_2[case]
    if expected == "result":
        assert "result" in server.response(2, timeout=1)
    elif expected is not None:
        assert server.response(2, timeout=1)["error"]["code"] == expected
    # Framing held: the stream is still in step for the next request.
    assert_serves(server, 4)


def test_absurd_content_length_is_rejected_and_the_server_keeps_serving(server: Channel) -> None:
    server.initialize()
    server.send_raw(b"Content-Length: 99999999999999\r\n\r\n" + STATUS_2)
    assert_serves(server, 3)
    rejected = server.response(2, timeout=1)
    assert rejected["error"]["code"] == -32600, rejected
    assert "exceeds the 67108864-byte cap" in server.server.log()
    assert server.server.process.poll() is None


def test_a_body_over_the_cap_is_skipped_without_holding_it(server: Channel) -> None:
    """65 MiB really sent: skipped as it streams, then the next request is answered."""
    server.initialize()
    assert wait_model(server).get("error")  # the start-up work is done
    peak_before = proc_status(server.server.pid)["VmHWM"]
    head = b'{"jsonrpc":"2.0","id":2,"method":"x","params":{"pad":"'
    server.send_raw(b"Content-Length: %d\r\n\r\n%s" % (65 * 1024 * 1024, head))
    chunk = b"a" * (1024 * 1024)
    for _ in range(65):
        server.send_raw(chunk)
    server.send_raw(b'"}}')
    assert_serves(server, 3)
    assert server.response(2, timeout=1)["error"]["code"] == -32600
    grew_kb = proc_status(server.server.pid)["VmHWM"] - peak_before
    assert grew_kb < 16 * 1024, f"peak RSS grew {grew_kb} kB: the rejected body was held"


# -- JSON and the lifecycle -----------------------------------------------------------


def test_malformed_json_gets_a_parse_error_where_the_id_can_be_read(server: Channel) -> None:
    server.initialize()
    broken = b'{"jsonrpc": "2.0", "id": 7, "method": "workspace/executeCommand", "params": {'
    server.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(broken), broken))
    assert server.response(7)["error"]["code"] == -32700
    no_id = b'{"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": [}'
    server.send_raw(b"Content-Length: %d\r\n\r\n%s" % (len(no_id), no_id))
    server.send_raw(b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc")  # not UTF-8 either
    assert_serves(server, 8)
    assert server.server.log().count("malformed JSON") >= 3


def test_a_request_that_is_not_jsonrpc_2_gets_invalid_request(server: Channel) -> None:
    server.initialize()
    server.send({"jsonrpc": "1.0", "id": 5, "method": "shutdown"})
    server.send({"id": 6, "method": "shutdown"})
    assert server.response(5)["error"]["code"] == -32600
    assert server.response(6)["error"]["code"] == -32600
    assert_serves(server, 7)


def test_requests_before_initialize_get_server_not_initialized(server: Channel) -> None:
    server.send(status_request(5))
    assert server.response(5)["error"]["code"] == -32002
    # A notification before initialize is dropped (LSP 3.17), not an error.
    server.send({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration", "params": {}})
    server.initialize()
    assert_serves(server, 6)


def test_a_second_initialize_is_refused_and_the_first_session_stays(server: Channel) -> None:
    server.initialize()
    assert wait_model(server).get("error")  # the start-up work is done
    threads = proc_status(server.server.pid)["Threads"]
    server.send(dict(INITIALIZE, id=2))
    answer = server.response(2)
    assert answer.get("error", {}).get("code") == -32600, answer
    assert_serves(server, 3)
    assert proc_status(server.server.pid)["Threads"] <= threads


def test_exit_without_shutdown_exits_with_code_1(server: Channel) -> None:
    server.initialize()
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.server.wait() == 1


def test_shutdown_then_exit_exits_with_code_0(server: Channel) -> None:
    server.initialize()
    server.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    assert server.response(2)["result"] is None
    server.send(status_request(3))
    assert server.response(3)["error"]["code"] == -32600  # after shutdown
    server.send({"jsonrpc": "2.0", "method": "exit"})
    assert server.server.wait() == 0


# -- TCP ------------------------------------------------------------------------------


def ipv6_loopback() -> bool:
    """Whether ::1 can be bound here."""
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_tcp_on_ipv6_loopback(tmp_path: Path) -> None:
    port = free_port(socket.AF_INET6, "::1")
    process = ServerProcess(tmp_path, "--tcp", f"[::1]:{port}")
    try:
        client = process.connect(socket.AF_INET6, "::1", port)
        client.initialize()
        assert "non-loopback" not in process.log()
        # The same framing recovery as on stdio.
        client.send_raw(BAD_FRAMES["length-too-small"])
        assert_serves(client, 3)
        client.close()
    finally:
        process.close()


def test_tcp_refuses_sessions_beyond_max_sessions(tmp_path: Path) -> None:
    port = free_port(socket.AF_INET, "127.0.0.1")
    process = ServerProcess(tmp_path, "--tcp", f"127.0.0.1:{port}", "--max-sessions", "1")
    try:
        first = process.connect(socket.AF_INET, "127.0.0.1", port)
        first.initialize()
        second = process.connect(socket.AF_INET, "127.0.0.1", port)
        second.send(INITIALIZE)
        refused = second.response(1)
        assert refused["error"]["code"] == -32600, refused
        assert "already serves 1 sessions" in refused["error"]["message"]
        assert_serves(first, 3)
        first.send({"jsonrpc": "2.0", "method": "exit"})
        first.wait_closed()
        second.close()
        third = process.connect(socket.AF_INET, "127.0.0.1", port)  # a slot is free again
        third.initialize()
        assert_serves(third, 3)
        third.close()
    finally:
        process.close()


@pytest.mark.slow
def test_tcp_sessions_free_their_engine_and_model(tmp_path: Path) -> None:
    """Three sessions one after another, each loading the model: no growth by a model each."""
    port = free_port(socket.AF_INET, "127.0.0.1")
    process = ServerProcess(tmp_path, "--tcp", f"127.0.0.1:{port}", model=small_model_path())
    try:
        before: dict[str, int] = {}
        loaded: list[dict[str, int]] = []
        after: list[dict[str, int]] = []
        for session in range(3):
            client = process.connect(socket.AF_INET, "127.0.0.1", port)
            if session == 0:
                before = resources(process.pid)
            client.initialize()
            model = wait_model(client)
            assert model.get("loaded"), model
            loaded.append(resources(process.pid))
            client.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
            client.response(2, timeout=60)
            client.send({"jsonrpc": "2.0", "method": "exit"})
            client.wait_closed()
            client.close()
            # The session's clean-up runs after the connection closes, on threads that end
            # when their work does (on a loaded machine that can take seconds): wait for it.
            # Every session's thread ends with it: the server falls back to the threads it
            # had before the first one (the event loop's default executor, whose idle
            # workers outlived every session in a number that depended on timing, is not
            # used: lsp/blocking.py).
            time.sleep(1.0)
            settled = resources(process.pid)
            deadline = time.monotonic() + 20
            while settled["threads"] > before["threads"]:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.25)
                settled = resources(process.pid)
            assert process.process.poll() is None, f"the server ended with session {session}"
            after.append(settled)
        model_cost = loaded[0]["rss_kb"] - before["rss_kb"]
        print("before", before, "loaded", loaded, "after", after, "model cost kB", model_cost)
        assert model_cost > 20 * 1024, (before, loaded)
        # A leak of one engine per session would add a model's worth each time.
        assert after[2]["rss_kb"] - after[0]["rss_kb"] < model_cost // 2, (after, model_cost)
        assert loaded[2]["rss_kb"] - loaded[0]["rss_kb"] < model_cost // 2, (loaded, model_cost)
        assert after[2]["threads"] <= after[0]["threads"], after
        assert all(a["threads"] <= before["threads"] for a in after), (before, after)
        assert after[2]["fds"] <= after[0]["fds"], after
    finally:
        process.close()
