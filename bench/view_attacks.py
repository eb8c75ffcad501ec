"""The viewer's denials of service of issue 54, at the sizes the issue measured, each timed alone.

    .venv/bin/python bench/view_attacks.py [--only NAME ...] [--timeout 120] [--memory-gb 3]

Each attack runs in a fresh subprocess (its own peak RSS, VmHWM, measured; an address-space
limit of ``--memory-gb`` and a wall-clock ``--timeout`` so the old code's blow-ups end), against
whatever ``arena`` imports: point ``PYTHONPATH`` at an older tree to time the code before a change.

* ``episode``: one episode line of 3,500 turns, each of its own seat and phase (106 KiB); its page.
* ``tournament``: a 161 KiB tournament JSON whose table rows each have their own key; the page.
* ``tournaments40``: 40 tournament files of 4 MiB (a third of a million floats each); the page.
* ``listing20k``: 20,000 step files of one episode; the list page once cached (best of 3).
* ``blank_gzip``: a 62 KiB gzip of newlines (62 MiB); the first listing.
* ``slow_bodies``: 920 connections stalled in a POST body, a cap of 896 connections (what a
  descriptor limit of 1,024 leaves); five new clients' answers.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _rss_mib() -> float:
    for row in Path("/proc/self/status").read_text().splitlines():
        if row.startswith("VmHWM:"):
            return int(row.split()[1]) / 1024
    return float("nan")


def _client(run: Path) -> Any:
    from fastapi.testclient import TestClient

    from arena.view.app import create_app

    return TestClient(create_app(run), base_url="http://127.0.0.1")


def _timed_get(c: Any, path: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    r = c.get(path)
    return {"status": r.status_code, "seconds": time.perf_counter() - t0, "mib": len(r.content) / 2**20}


def episode(tmp: Path) -> dict[str, Any]:
    run = tmp / "run"
    (run / "episodes").mkdir(parents=True)
    turns = [{"seat": f"s{i}", "phase": f"p{i}"} for i in range(3500)]
    text = json.dumps({"episode_id": "e", "game": "g_v0", "roles": {}, "turns": turns}, separators=(",", ":"))
    (run / "episodes" / "step_000001.jsonl.gz").write_bytes(gzip.compress(text.encode() + b"\n"))
    return {"input_kib": len(text) / 1024, **_timed_get(_client(run), "/episode/episodes/step_000001.jsonl.gz/0")}


def tournament(tmp: Path) -> dict[str, Any]:
    run = tmp / "run"
    run.mkdir()
    n = 8400
    text = json.dumps({"games": {f"g{i}": {f"k{i}": 1} for i in range(n)}}, separators=(",", ":"))
    (run / "t.json").write_text(text)
    return {"input_kib": len(text) / 1024, **_timed_get(_client(run), "/tournaments")}


def tournaments40(tmp: Path) -> dict[str, Any]:
    run = tmp / "run"
    run.mkdir()
    body = b'{"games": 3, "x": [' + b"0.123456789," * (4 * 2**20 // 12) + b"1]}"
    for i in range(40):
        (run / f"t{i:02d}.json").write_bytes(body)
    return {"input_kib": 40 * len(body) / 1024, **_timed_get(_client(run), "/tournaments")}


def listing20k(tmp: Path) -> dict[str, Any]:
    run = tmp / "run"
    (run / "episodes").mkdir(parents=True)
    data = gzip.compress(b'{"episode_id": "e", "game": "g_v0", "roles": {"p0": "r"}, "turns": []}\n')
    for i in range(20_000):
        (run / "episodes" / f"step_{i:06d}.jsonl.gz").write_bytes(data)
    c = _client(run)
    t0, listings = time.perf_counter(), 0
    while "20000 of 20000 episodes" not in c.get("/").text:  # a listing reads within its budgets; the next reads on
        listings += 1
        assert listings < 10, "the listing never completes"
    first = time.perf_counter() - t0
    warm = [_timed_get(c, "/") for _ in range(3)]
    return {"first_seconds": first, "first_listings": listings + 1, **min(warm, key=lambda w: w["seconds"])}


def blank_gzip(tmp: Path) -> dict[str, Any]:
    run = tmp / "run"
    (run / "episodes").mkdir(parents=True)
    data = gzip.compress(b"\n" * (62 * 2**20), 9)
    (run / "episodes" / "step_000001.jsonl.gz").write_bytes(data)
    return {"input_kib": len(data) / 1024, **_timed_get(_client(run), "/")}


def slow_bodies(tmp: Path) -> dict[str, Any]:
    from arena.view.__main__ import make_server
    from arena.view.serve import Limits

    run = tmp / "run"
    (run / "episodes").mkdir(parents=True)
    server = make_server(run, "127.0.0.1", 0, limits=Limits(max_connections=896))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    crowd = []
    for _ in range(920):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"POST /play HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
                  b"Content-Type: application/x-www-form-urlencoded\r\n\r\nconfig=")
        crowd.append(s)
    time.sleep(0.5)
    answers = []
    for _ in range(5):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        t0 = time.perf_counter()
        s.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        head = s.recv(64)
        answers.append((int(head.split()[1]) if head else 0, time.perf_counter() - t0))
        s.close()
    for s in crowd:
        s.close()
    server.should_exit = True
    return {"statuses": [a for a, _ in answers], "seconds": max(t for _, t in answers)}


ATTACKS = {f.__name__: f for f in (episode, tournament, tournaments40, listing20k, blank_gzip, slow_bodies)}


def one(name: str, memory_gb: float) -> None:
    """Run one attack in this process and print its result as one JSON line."""
    resource.setrlimit(resource.RLIMIT_AS, (int(memory_gb * 2**30), resource.RLIM_INFINITY))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(4096, hard), hard))
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        try:
            result = ATTACKS[name](Path(tmp))
        except MemoryError:
            result = {"error": f"MemoryError at {memory_gb:g} GB"}
        result["total_seconds"] = time.perf_counter() - t0
    print(json.dumps({"attack": name, "peak_rss_mib": _rss_mib(), **result}), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", nargs="*", choices=sorted(ATTACKS), help="these attacks (default: all)")
    ap.add_argument("--timeout", type=float, default=120, help="seconds one attack may take (default 120)")
    ap.add_argument("--memory-gb", type=float, default=3.0, help="address space of one attack (default 3)")
    ap.add_argument("--one", choices=sorted(ATTACKS), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        one(args.one, args.memory_gb)
        return
    import arena

    print(f"arena from {Path(arena.__file__).parent}")
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), str(ROOT)) if p)}
    for name in args.only or list(ATTACKS):
        try:
            out = subprocess.run([sys.executable, __file__, "--one", name, "--memory-gb", str(args.memory_gb)],
                                 capture_output=True, text=True, timeout=args.timeout, env=env, cwd=ROOT)
            lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
            print(lines[-1] if lines else json.dumps({"attack": name, "error": out.stderr.strip()[-300:]}), flush=True)
        except subprocess.TimeoutExpired:
            print(json.dumps({"attack": name, "error": f"timed out at {args.timeout:g} s"}), flush=True)


if __name__ == "__main__":
    main()
