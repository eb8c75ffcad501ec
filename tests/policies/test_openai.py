"""The OpenAI-compatible client against real localhost servers that misbehave."""

from __future__ import annotations

import http.server
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from arena.policies.base import Request, SamplingParams
from arena.policies.openai import OpenAIPolicy, ServerError


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


class ContextLimited(http.server.BaseHTTPRequestHandler):
    """A chat server with a 50-character "context": longer prompts get vLLM's 400; it records each body."""

    bodies: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        ContextLimited.bodies.append(body)
        content = body["messages"][-1]["content"]
        if content == "bad request":
            self._reply(400, {"error": {"message": "model 'x' does not exist", "code": 400}})
        elif len(content) > 50:
            message = (
                "This model's maximum context length is 1024 tokens. However, your prompt contains 2000 input "
                "tokens, which exceeds this limit even without any output tokens."
            )
            self._reply(400, {"error": {"message": message, "type": "BadRequestError", "code": 400}})
        else:
            self._reply(200, {"choices": [{"message": {"content": content.upper()}, "finish_reason": "length"}]})

    def _reply(self, code: int, payload: dict) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args: object) -> None:
        """Keep the test output free of access logs."""


@pytest.fixture
def limited_server() -> Iterator[str]:
    ContextLimited.bodies = []
    yield from _serve(ContextLimited)


def test_a_context_error_ends_only_its_own_request(limited_server: str) -> None:
    policy = OpenAIPolicy(limited_server, "m", api="chat", timeout_s=5, retries=2)
    reqs = [Request(messages=[{"role": "user", "content": text}]) for text in ("short", "x" * 80, "also short")]
    a, b, c = policy.generate(reqs)
    assert (a.text, a.finish_reason) == ("SHORT", "length")
    assert (b.text, b.completion_ids, b.finish_reason) == ("", [], "overflow")
    assert (c.text, c.finish_reason) == ("ALSO SHORT", "length")
    assert len(ContextLimited.bodies) == 3, "a context error is not retried"


def test_other_client_errors_still_raise(limited_server: str) -> None:
    policy = OpenAIPolicy(limited_server, "m", api="chat", timeout_s=5)
    with pytest.raises(ServerError, match=r"rejected the request \(HTTP 400\): .*does not exist"):
        policy.generate([Request(messages=[{"role": "user", "content": "bad request"}])])


def test_each_request_sends_its_own_sampling(limited_server: str) -> None:
    policy = OpenAIPolicy(limited_server, "m", api="chat", timeout_s=5)
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4, stop=("\n", "."))
    sampled = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12)
    policy.generate([Request(messages=[{"role": "user", "content": "a"}], params=greedy),
                     Request(messages=[{"role": "user", "content": "b"}], params=sampled)])
    sent = {b["messages"][0]["content"]: b for b in ContextLimited.bodies}
    assert (sent["a"]["temperature"], sent["a"]["max_tokens"], sent["a"]["stop"]) == (0.0, 4, ["\n", "."])
    assert (sent["b"]["temperature"], sent["b"]["top_p"], sent["b"]["max_tokens"]) == (0.8, 0.9, 12)
    assert "stop" not in sent["b"]
