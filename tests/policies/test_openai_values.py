"""The OpenAI-compatible client's retry loop and headers, counted by a REAL localhost server.

The server records every request (method, path, headers) and answers with a status
the test chooses, so the attempts are counted where they arrive, not inside the client.
"""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator

import pytest

from arena.policies.base import Request
from arena.policies.openai import OpenAIPolicy, ServerError


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with ``status``; records (method, path, Authorization header)."""

    status = 200
    seen: list[tuple[str, str, str | None]] = []

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._answer()

    def do_GET(self) -> None:  # noqa: N802
        self._answer({"data": [{"id": "m", "max_model_len": 321}]})

    def _answer(self, payload: dict | None = None) -> None:
        Recorder.seen.append((self.command, self.path, self.headers.get("Authorization")))
        code = Recorder.status if self.command == "POST" else 200
        ok = {"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}
        raw = json.dumps(payload or (ok if code == 200 else {"error": {"message": f"status {code}"}})).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


@pytest.fixture
def server() -> Iterator[str]:
    Recorder.seen = []
    Recorder.status = 200
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _req() -> Request:
    return Request(messages=[{"role": "user", "content": "hi"}])


@pytest.mark.parametrize("retries", [0, 1, 3])
def test_a_persistent_5xx_is_tried_exactly_retries_plus_one_times(server: str, retries: int) -> None:
    Recorder.status = 503
    policy = OpenAIPolicy(server, "m", api="chat", timeout_s=5, retries=retries, backoff_s=0.02)
    start = time.monotonic()
    with pytest.raises(ServerError, match=rf"after {retries + 1} attempts \(HTTP 503: .*status 503"):
        policy.generate([_req()])
    assert [(m, p) for m, p, _ in Recorder.seen] == [("POST", "/v1/chat/completions")] * (retries + 1)
    # backoff doubles: 0.02, 0.04, 0.08 ... between attempts
    assert time.monotonic() - start >= 0.02 * (2**retries - 1) * 0.9


@pytest.mark.parametrize("status", [400, 401, 404, 422, 429])
def test_a_4xx_is_not_retried(server: str, status: int) -> None:
    Recorder.status = status
    policy = OpenAIPolicy(server, "m", api="chat", timeout_s=5, retries=3, backoff_s=0.01)
    with pytest.raises(ServerError, match=rf"rejected the request \(HTTP {status}\): .*status {status}"):
        policy.generate([_req()])
    assert len(Recorder.seen) == 1


def test_the_api_key_is_sent_as_a_bearer_header(server: str) -> None:
    policy = OpenAIPolicy(server, "m", api="chat", timeout_s=5, api_key="sk-test-123")
    (reply,) = policy.generate([_req()])
    assert reply.text == "fine"
    assert policy.context_length() == 321
    assert Recorder.seen == [
        ("POST", "/v1/chat/completions", "Bearer sk-test-123"),
        ("GET", "/v1/models", "Bearer sk-test-123"),
    ]


def test_no_key_no_authorization_header(server: str) -> None:
    policy = OpenAIPolicy(server + "/", "m", api="chat", timeout_s=5)
    policy.generate([_req(), _req()])
    assert policy.context_length() == 321 and policy.context_length() == 321
    assert sorted(Recorder.seen) == [
        ("GET", "/v1/models", None), ("POST", "/v1/chat/completions", None), ("POST", "/v1/chat/completions", None),
    ], "a trailing slash in base_url is dropped; the listing is asked once"


class Slow(http.server.BaseHTTPRequestHandler):
    """Reads the request, then never answers (until the test ends): a hung server."""

    calls = 0
    release = threading.Event()

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        Slow.calls += 1
        Slow.release.wait(30)

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


class KeepAlive(http.server.BaseHTTPRequestHandler):
    """HTTP/1.1 with keep-alive; records the client's port of every request. Its first reply is cut short
    when ``cut_first`` is set (headers promise 1000 bytes, 10 come, the connection closes)."""

    protocol_version = "HTTP/1.1"
    ports: list[int] = []
    cut_first = False

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        KeepAlive.ports.append(self.client_address[1])
        raw = json.dumps({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if KeepAlive.cut_first and len(KeepAlive.ports) == 1:
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.write(raw[:10])
            self.wfile.flush()
            self.close_connection = True
            return
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


def _start(handler: type[http.server.BaseHTTPRequestHandler]) -> tuple[http.server.ThreadingHTTPServer, str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def test_a_server_that_never_answers_times_out_on_every_attempt() -> None:
    Slow.calls, Slow.release = 0, threading.Event()
    httpd, url = _start(Slow)
    try:
        policy = OpenAIPolicy(url, "m", api="chat", timeout_s=0.3, retries=1, backoff_s=0.05)
        start = time.monotonic()
        with pytest.raises(ServerError, match=r"cannot reach .* after 2 attempts \(.*timed out.*\); is the server"):
            policy.generate([_req()])
        assert 0.6 <= time.monotonic() - start < 5 and Slow.calls == 2
    finally:
        Slow.release.set()
        httpd.shutdown()
        httpd.server_close()


def test_requests_reuse_pooled_connections() -> None:
    KeepAlive.ports, KeepAlive.cut_first = [], False
    httpd, url = _start(KeepAlive)
    try:
        policy = OpenAIPolicy(url, "m", api="chat", timeout_s=5)
        for _ in range(5):
            policy.generate([_req()])
        assert len(KeepAlive.ports) == 5 and len(set(KeepAlive.ports)) == 1, "one keep-alive connection"
        policy.close()
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_reply_cut_short_is_retried() -> None:
    KeepAlive.ports, KeepAlive.cut_first = [], True
    httpd, url = _start(KeepAlive)
    try:
        policy = OpenAIPolicy(url, "m", api="chat", timeout_s=5, retries=1, backoff_s=0.01)
        (reply,) = policy.generate([_req()])
        assert reply.text == "ok" and len(KeepAlive.ports) == 2
    finally:
        httpd.shutdown()
        httpd.server_close()
