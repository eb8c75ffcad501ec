"""The OpenAI-compatible client against real localhost servers that misbehave."""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from policies.base import Request
from policies.openai import OpenAIPolicy, ServerError


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(handler: type[http.server.BaseHTTPRequestHandler]) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class Garbage(http.server.BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # noqa: N802
        Garbage.calls += 1
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"<html>not an API</html>")

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


class Flaky(http.server.BaseHTTPRequestHandler):
    calls = 0

    def do_POST(self) -> None:  # noqa: N802
        Flaky.calls += 1
        if Flaky.calls == 1:
            self.send_response(503)
            self.end_headers()
            return
        body = b'{"choices": [{"message": {"content": "hello"}, "finish_reason": "stop"}]}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


@pytest.fixture
def garbage_server() -> Iterator[str]:
    yield from _serve(Garbage)


@pytest.fixture
def flaky_server() -> Iterator[str]:
    yield from _serve(Flaky)


def _req() -> Request:
    return Request(messages=[{"role": "user", "content": "hi"}])


def test_dead_server_gives_a_clear_error_quickly() -> None:
    policy = OpenAIPolicy(f"http://127.0.0.1:{_free_port()}", "m", api="chat", timeout_s=2, retries=1, backoff_s=0.1)
    start = time.time()
    with pytest.raises(ServerError, match=r"cannot reach .* after 2 attempts .*is the server running"):
        policy.generate([_req()])
    assert time.time() - start < 10


def test_garbage_reply_is_a_clear_error_not_a_retry_loop(garbage_server: str) -> None:
    policy = OpenAIPolicy(garbage_server, "m", api="chat", timeout_s=5, retries=3)
    with pytest.raises(ServerError, match="returned non-JSON"):
        policy.generate([_req()])
    assert Garbage.calls == 1


def test_5xx_is_retried_then_succeeds(flaky_server: str) -> None:
    policy = OpenAIPolicy(flaky_server, "m", api="chat", timeout_s=5, retries=2, backoff_s=0.05)
    (reply,) = policy.generate([_req()])
    assert reply.text == "hello" and Flaky.calls == 2
