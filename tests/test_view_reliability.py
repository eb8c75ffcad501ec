"""The viewer under the denials of service of issue 54, each tried for real and scaled down to a
few seconds: slow bodies and a client that never reads against a real server on 127.0.0.1, pages
whose size was quadratic in their file, tournament files read all at once (the server's peak RSS
measured), a listing of thousands of cached files, a gzip of blank lines, a run folder that vanishes.

Servers: :class:`ThreadServer` (``make_server``, the CLI's uvicorn config, in a thread, with small
:class:`~arena.view.serve.Limits`), ``python -m arena.view`` in a subprocess where its memory is
measured, and the app itself where only the page's bytes matter.
"""

from __future__ import annotations

import gzip
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from arena.view.files import Skips, json_lines
from arena.view.serve import Limits
from arena.view.store import RunStore
from test_view import Server, make_scripted_run
from test_view_hardening import client, ep, line, write_gz
from test_view_limits import LINUX, ThreadServer, _vm, cli_server, closed_by_server, get, slow_client, still_open, stop


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("reliability") / "run"
    make_scripted_run(run, steps=1, games=2)
    return run


def big_episode(run: Path, completion: str, name: str = "step_000002.jsonl.gz") -> str:
    """An episode whose one turn completes with ``completion``; its key."""
    write_gz(run / "episodes" / name, line(ep("big", turns=[{"seat": "p0", "phase": "x", "completion": completion}])))
    return f"/episode/episodes/{name}/0"


# ---------------------------------------------------------------- connections
def test_slow_bodies_cannot_lock_out_a_new_client(run: Path) -> None:
    """60 clients send a POST head and stall in its body, with room for 40 connections: a new client
    is still served within 1 s (the cap closes the connection waiting longest on its client, body or
    head), and the oldest stalled bodies get 503. The old cap evicted heads only: every new client got
    503 until the bodies timed out (920 slow bodies: 28 s)."""
    server = ThreadServer(run, Limits(body_timeout_s=60, max_connections=40))
    crowd = []
    try:
        for _ in range(60):
            crowd.append(slow_client(server.port, b"POST /play HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n"
                                                  b"Content-Type: application/x-www-form-urlencoded\r\n\r\nconfig="))
            time.sleep(0.005)  # accepted in order
        for _ in range(3):
            status, body, seconds = get(server.port)
            assert status == 200 and "2 of 2 episodes" in body and seconds < 1.0, (status, seconds)
        time.sleep(0.3)
        open_now = [still_open(s) for s in crowd]
        assert not any(open_now[:20]) and all(open_now[-30:]), open_now  # the oldest went first
        closed, got = closed_by_server(crowd[0], 1)
        assert closed and got.startswith(b"HTTP/1.1 503") and b"waiting longest on its client" in got
    finally:
        for s in crowd:
            s.close()
        server.stop()


def test_a_client_that_never_reads_its_answer_is_cut_off(run: Path) -> None:
    """A client asks for an 8 MiB page with a 4 KiB receive window and never reads: once the server's
    buffer for it stays full for ``write_timeout_s`` (1 s here, 30 s by default) the connection is
    aborted and its buffered answer dropped. The old server held it (and the answer) for good: its
    close waited for the buffer to drain."""
    page = big_episode(run, "<" * (3 * 2**20), "step_000009.jsonl.gz")  # 12 MiB escaped: cut at 8 MiB
    server = ThreadServer(run, Limits(head_timeout_s=60, write_timeout_s=1.0))
    try:
        connections = server.server.server_state.connections
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", server.port))
        s.sendall(f"GET {page} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        deadline = time.time() + 10
        while time.time() < deadline and not connections:
            time.sleep(0.05)
        assert connections, "the server never saw the connection"
        t0 = time.time()
        while time.time() - t0 < 8 and connections:
            time.sleep(0.1)
        assert not connections, "the server still holds a client that reads nothing"
        assert 0.8 < time.time() - t0 < 6
        got = b""
        s.settimeout(5)
        try:
            while chunk := s.recv(2**20):
                got += chunk
        except ConnectionResetError:
            pass
        s.close()
        assert got.startswith(b"HTTP/1.1 200") and len(got) < 8 * 2**20  # cut off before the end
        assert get(server.port)[0] == 200
    finally:
        server.stop()


# ---------------------------------------------------------------- pages linear in their input, and capped
def test_an_episode_page_grows_linearly_with_its_line_and_stops_at_the_cap(tmp_path: Path) -> None:
    """600 turns of distinct seats and phases (an 18 KiB line) made a 600 x 600 grid of empty cells:
    7 MiB of HTML (3,500 turns, 106 KiB: 208 MiB in 180 s). Now they are a list of the cells that hold
    turns, and the page stays within a small multiple of its line. A completion of 3 MiB of '<'
    (12 MiB escaped) stops at the page cap, saying so, never inside a tag."""
    run = tmp_path / "run"
    turns = [{"seat": f"s{i}", "phase": f"p{i}", "action": f"a{i}"} for i in range(600)]
    text = line(ep("wide", turns=turns))
    write_gz(run / "episodes" / "step_000001.jsonl.gz", text)
    c = client(run)
    r = c.get("/episode/episodes/step_000001.jsonl.gz/0")
    assert r.status_code == 200 and "a599" in r.text
    assert len(r.content) < 30 * len(text), f"{len(r.content)} bytes of HTML for a line of {len(text)}"
    key = big_episode(run, "<" * (3 * 2**20))
    r = c.get(key)
    assert r.status_code == 200 and len(r.content) <= 8 * 2**20 + 4096
    assert "This page stops here: it reached 8 MiB of HTML" in r.text and r.text.rstrip().endswith("</html>")
    head, _, _ = r.text.rpartition('<p class="truncated')
    assert head.rfind("<") < head.rfind(">")  # the cut is between tags
    small = client(run, max_page_bytes=2**20)  # the cap is the app's to set
    assert len(small.get(key).content) <= 2**20 + 4096


def test_a_tournament_page_grows_linearly_with_its_file(tmp_path: Path) -> None:
    """A payoff of 300 rows with one distinct key each, a table and ratings of the same shape (5 KiB
    each), made 300 x 300 grids (2.4 MiB; a 161 KiB file: 89 MiB using 1.26 GB). Now a mostly empty
    grid is one row a value, every table keeps at most 200 rows and 50 columns, a heatmap 100 of
    each, and the page says what it left out."""
    run = tmp_path / "run"
    run.mkdir()
    wide = {f"a{i}": {f"b{i}": 1} for i in range(300)}
    text = json.dumps({"payoff": wide, "per_game": wide, "ratings": [{f"r{i}": i} for i in range(300)]})
    (run / "t.json").write_text(text)
    r = client(run).get("/tournaments")
    assert r.status_code == 200
    assert len(r.content) < 30 * len(text), f"{len(r.content)} bytes of HTML for a file of {len(text)}"
    assert r.text.count("first 200 of 300 rows; first 50 of 300 columns; mostly empty: one row a value") == 3
    assert "<td>a299</td>" not in r.text and "<td>a199</td><td>b199</td>" in r.text
    dense = {f"a{i}": {f"b{j}": i * j for j in range(300)} for i in range(300)}  # 300 x 300, every cell a value
    (run / "t.json").write_text(json.dumps({"payoff": dense, "per_game": dense}))
    r = client(run).get("/tournaments")
    assert r.status_code == 200 and r.text.count('<td data-bg="hsl(') == 100 * 100
    assert "first 200 of 300 rows; first 50 of 300 columns" in r.text


@pytest.mark.skipif(not LINUX, reason="Linux only (/proc)")
def test_tournament_files_are_read_one_at_a_time(tmp_path: Path) -> None:
    """12 tournament files of 6 MiB each (half a million floats: 16 MiB parsed): the old page parsed
    and held all of them, then wrote every one (40 files: 154 s, 2.76 GB). Now it reads one at a
    time and stops reading past 32 MiB of JSON; the rest are links, each shown alone on its own page.
    The server's peak RSS grows by less than 100 MiB (the old page: 330 MiB)."""
    run = tmp_path / "run"
    run.mkdir()
    body = b'{"games": 3, "x": [' + b"0.123456789," * (6 * 2**20 // 12) + b"1]}"
    for i in range(12):
        (run / f"t{i:02d}.json").write_bytes(body)
    proc, port = cli_server(run)
    try:
        assert get(port, "/curves")[0] == 200
        base = _vm(proc.pid, "VmRSS")
        status, page, seconds = get(port, "/tournaments")
        grown = (_vm(proc.pid, "VmHWM") - base) / 2**20
        print(f"tournaments page of 12 x 6 MiB: {seconds:.1f} s, {len(page) / 2**20:.1f} MiB, "
              f"peak RSS +{grown:.0f} MiB")
        assert status == 200 and 'id="not-shown"' in page and "the most one page reads" in page
        assert page.count('<section class="tournament">') < 12 and 'href="/tournaments?file=11"' in page
        assert grown < 100, f"the server grew by {grown:.0f} MiB for one tournaments page"
        status, alone, _ = get(port, "/tournaments?file=11")
        assert status == 200 and "t11.json" in alone and alone.count('<section class="tournament">') == 1
        assert get(port, "/tournaments?file=12")[0] == 404
    finally:
        stop(proc)


# ---------------------------------------------------------------- listings
def test_a_cached_listing_of_thousands_of_files_answers_at_once(tmp_path: Path) -> None:
    """5,000 step files, listed once: the next listings open none of them (one scandir and one lstat
    a file), so each answers in a fraction of a second. The old viewer opened every file, component by
    component, on every listing: 20,000 cached files took 12 s a listing, one listing at a time."""
    run = tmp_path / "run"
    (run / "episodes").mkdir(parents=True)
    data = gzip.compress(line(ep("e")))
    for i in range(5000):
        (run / "episodes" / f"step_{i:06d}.jsonl.gz").write_bytes(data)
    server = Server(run)
    try:
        status, body, _ = get(server.port)
        assert status == 200 and "5000 of 5000 episodes" in body
        times = []
        for _ in range(3):
            status, body, seconds = get(server.port)
            assert status == 200 and "5000 of 5000 episodes" in body
            times.append(seconds)
        assert min(times) < 0.5, f"a cached listing of 5,000 files took {times} s"
        (run / "episodes" / "step_000000.jsonl.gz").write_bytes(gzip.compress(line(ep("changed"))))
        assert "changed" in get(server.port, "/?q=changed")[1]  # a changed file is still read again
    finally:
        server.stop()


def test_a_gzip_of_blank_lines_is_cheap_and_reading_has_a_cpu_budget(tmp_path: Path) -> None:
    """16 MiB of newlines (a 16 KiB gzip; 62 KiB held a listing for 95 s) are folded in C, not read
    a line at a time: the listing takes well under a second. Lines that each cost a parse ('{' alone,
    2 million of them) stop at the CPU budget (0.3 s here, 4 s by default): the file is refused whole,
    saying why, and the refusal is cached with the file's signature, so the next listing is quick."""
    run = tmp_path / "run"
    write_gz(run / "episodes" / "step_000001.jsonl.gz", b"\n" * (16 * 2**20) + line(ep("after")) + b"\n" * 1000)
    store = RunStore(run)
    t0 = time.thread_time()
    rows, skips = store.scan()
    assert [r.episode_id for r in rows] == ["after"] and not skips and time.thread_time() - t0 < 1.5
    write_gz(run / "episodes" / "step_000002.jsonl.gz", b"{\n" * (2 * 2**20))
    budget = RunStore(run, read_cpu_s=0.3)
    t0 = time.thread_time()
    rows, skips = budget.scan()
    assert time.thread_time() - t0 < 1.5 and [r.episode_id for r in rows] == ["after"]
    (why,) = [v for k, v in skips.files.items() if "step_000002" in k]
    assert why.startswith("took more than 0.3 s of CPU to read")
    t0 = time.thread_time()
    assert budget.scan()[1].files == skips.files and time.thread_time() - t0 < 0.3
    s = Skips()  # the same budget, for any reader of a JSONL file
    assert list(json_lines(run / "episodes" / "step_000002.jsonl.gz", run, s, max_cpu_s=0.2)) == [] and s.refused


def test_a_run_folder_that_vanishes_gives_404_never_500(tmp_path: Path) -> None:
    """Eval folders deleted and made again while listings run, then the run folder itself gone:
    every answer is 200 or 404, none a 500 (a folder gone between a glob's steps raised
    FileNotFoundError); once the folder is gone its pages say so with 404."""
    run = tmp_path / "run"
    write_gz(run / "episodes" / "step_000001.jsonl.gz", line(ep("a")))
    (run / "t.json").write_text(json.dumps({"games": 1}))
    server = Server(run)
    stop_churn = threading.Event()

    def churn() -> None:
        while not stop_churn.is_set():
            for i in range(30):
                write_gz(run / "evals" / f"e{i}" / "step_000001.jsonl", line(ep(f"e{i}")))
            shutil.rmtree(run / "evals", ignore_errors=True)

    churner = threading.Thread(target=churn, daemon=True)
    churner.start()
    try:
        statuses = [get(server.port, path)[0] for _ in range(40) for path in ("/", "/tournaments")]
        stop_churn.set()
        churner.join(timeout=10)
        assert set(statuses) == {200}, statuses
        shutil.rmtree(run)
        for path in ("/", "/tournaments", "/episode/episodes/step_000001.jsonl.gz/0"):
            status, body, _ = get(server.port, path)
            assert status == 404, (path, status, body[:200])
        assert "cannot be opened" in get(server.port, "/")[1]
    finally:
        stop_churn.set()
        server.stop()
