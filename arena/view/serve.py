"""The viewer's HTTP server: uvicorn on h11, with limits a slow or hostile client cannot outlast.

uvicorn by itself caps neither the time a client takes to send its request head nor the time
its body takes (its keep-alive timeout is cancelled by the first byte that comes), and with
httptools (what ``http="auto"`` picks when installed) not the size of the head either: one
client sending a 64 MiB header, or a thousand sending a byte now and then, holds the server.
So the viewer runs uvicorn's h11 protocol through :class:`GuardedH11Protocol`:

* a request head of at most :attr:`Limits.max_head_bytes` (h11's ``max_incomplete_event_size``;
  past it 400) and at most ``MAX_HEADERS`` lines (431, :mod:`arena.view.app`);
* a head must arrive within :attr:`Limits.head_timeout_s` of the connection (or of the
  previous response), a body within :attr:`Limits.body_timeout_s` of its head; a client
  slower than that gets 408 (when no response has started) and is disconnected;
* a client that stops taking its answer (the transport's write buffer past its high-water
  mark, so uvicorn pauses writing) for :attr:`Limits.write_timeout_s` is cut off (the
  connection aborted, its buffered answer dropped): a close would wait for the buffer to
  drain, for ever;
* at most :attr:`Limits.max_connections` connections (by default below the process's
  descriptor limit, which :func:`raise_fd_limit` lifts to the hard limit first): one more
  closes (503) the connection that has waited longest on its client, whatever it waits for
  (its head, its body, or for it to take its answer), so a crowd of slow clients cannot keep
  a new one out, and the process never runs out of descriptors. (Evicting only connections
  still sending their heads let 920 slow bodies give every new client a 503 for 28 s.)
"""

from __future__ import annotations

import asyncio
import resource
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

FD_RESERVE = 128  # descriptors kept for files, the listening socket, threads' pipes


@dataclass(frozen=True)
class Limits:
    """What one client may take of the server."""

    head_timeout_s: float = 10.0  # to send a whole request head
    body_timeout_s: float = 30.0  # to send a whole request body, once its head is in
    write_timeout_s: float = 30.0  # to take some of the answer once the server's buffer for it is full
    keep_alive_s: float = 5.0  # an idle connection between requests
    max_head_bytes: int = 64 * 2**10  # request line and headers together
    max_connections: int | None = None  # None: the descriptor limit less FD_RESERVE, at most 16384


def raise_fd_limit() -> int:
    """Lift this process's soft descriptor limit to its hard limit (at most 65536); the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 65536 if hard == resource.RLIM_INFINITY else min(hard, 65536)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return want if soft == resource.RLIM_INFINITY else soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        return want
    except (ValueError, OSError):
        return soft


def connection_cap(limits: Limits) -> int:
    if limits.max_connections is not None:
        return limits.max_connections
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    soft = 65536 if soft == resource.RLIM_INFINITY else soft
    return max(16, min(16384, soft - FD_RESERVE))


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request's head and body and for a stalled
    answer, and a connection cap that drops the connection waiting longest on its client (see the
    module docstring)."""

    limits = Limits()
    cap = connection_cap(limits)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._phase: str | None = None
        self._deadline: asyncio.TimerHandle | None = None
        self._stalled: float | None = None  # when writing paused: the client stopped taking its answer
        self._stall_deadline: asyncio.TimerHandle | None = None
        self._since = self.loop.time()
        self._update_deadline()
        if len(self.connections) > self.cap:
            self._evict()

    def waiting_since(self) -> float | None:
        """Since when this connection has waited on its client (for its head, its body, or to take
        its answer); None while the app works on its request, or once it is closing."""
        if self.transport.is_closing():
            return None
        waits = [t for t in (self._since if self._phase else None, self._stalled) if t is not None]
        return min(waits) if waits else None

    def _evict(self) -> None:
        """Close the connection that has waited longest on its client (this one if none waits)."""
        waiting = [(since, c) for c in self.connections if c is not self
                   and (since := getattr(c, "waiting_since", lambda: None)()) is not None]
        victim = min(waiting, key=lambda x: x[0])[1] if waiting else self
        victim._cancel()
        victim._expire("too many connections: the one waiting longest on its client is closed", 503)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._update_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._update_deadline()

    def pause_writing(self) -> None:
        """The answer is not being taken: the client has ``write_timeout_s`` to take some."""
        super().pause_writing()
        if self._stall_deadline is None and not self.transport.is_closing():
            self._stalled = self.loop.time()
            self._stall_deadline = self.loop.call_later(self.limits.write_timeout_s, self._cut_off)

    def resume_writing(self) -> None:
        super().resume_writing()
        self._stalled = None
        if self._stall_deadline is not None:
            self._stall_deadline.cancel()
            self._stall_deadline = None

    def _cut_off(self) -> None:
        """The client took nothing of its answer for ``write_timeout_s``: abort (a close would wait
        for the buffer to drain), which drops the buffered answer and frees the connection."""
        self._stall_deadline = None
        self._cancel()
        self.transport.abort()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        if getattr(self, "_stall_deadline", None) is not None:
            self._stall_deadline.cancel()  # type: ignore[union-attr]
            self._stall_deadline = None
        super().connection_lost(exc)

    def _cancel(self) -> None:
        if getattr(self, "_deadline", None) is not None:
            self._deadline.cancel()  # type: ignore[union-attr]
            self._deadline = None

    def _update_deadline(self) -> None:
        """Waiting for a head (their state IDLE) or a body (SEND_BODY): a deadline from when the wait
        began; anything else (the app is answering): none."""
        state = self.conn.their_state
        phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
        if phase == self._phase or self.transport.is_closing():
            return
        self._cancel()
        self._phase = phase
        if phase is not None:
            self._since = self.loop.time()
            seconds = self.limits.head_timeout_s if phase == "head" else self.limits.body_timeout_s
            why = f"request {phase} not received in {seconds:g} s"
            self._deadline = self.loop.call_later(seconds, self._expire, why)

    def _expire(self, why: str, status: int = 408) -> None:
        """408 (or ``status``) when no response has started (the app's task, if any, sees a
        disconnect), then close; abort instead when the client is not taking what was written."""
        self._deadline = None
        self._phase = None
        if self.transport.is_closing():
            return
        if self._stalled is not None:
            self._cut_off()
            return
        if self.cycle is None or self.cycle.response_complete or not self.cycle.response_started:
            body = why.encode() + b"\n"
            reason = {408: b"Request Timeout", 503: b"Service Unavailable"}[status]
            self.transport.write(b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
                                 b"content-length: %d\r\n\r\n%s" % (status, reason, len(body), body))
        self.transport.close()


def guarded_protocol(limits: Limits) -> type[GuardedH11Protocol]:
    """A :class:`GuardedH11Protocol` subclass bound to ``limits`` (uvicorn builds protocols from a class)."""
    return type("ViewerH11Protocol", (GuardedH11Protocol,), {"limits": limits, "cap": connection_cap(limits)})


def server_config(app: Any, host: str, port: int, limits: Limits | None = None, **options: Any) -> Any:
    """A ``uvicorn.Config`` serving ``app`` with these limits (h11 always, never httptools)."""
    import uvicorn

    limits = limits or Limits()
    return uvicorn.Config(app, host=host, port=port, http=guarded_protocol(limits),
                          h11_max_incomplete_event_size=limits.max_head_bytes,
                          timeout_keep_alive=limits.keep_alive_s, **options)
