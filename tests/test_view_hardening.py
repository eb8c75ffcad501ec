"""The viewer against a hostile web page and a hostile run folder (issue 25), each attack tried for real.

HTTP goes to the real app: Starlette's TestClient, a uvicorn server in a thread on 127.0.0.1
(``Server`` of tests/test_view.py) for the Host/Origin checks and the play-session cap, and
``python -m arena.view`` in a subprocess for the hostile folder (a FIFO, ``/dev/zero``, a gzip
bomb), where the server's own memory (VmHWM) and the other clients' answers are checked.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from arena.view.app import create_app
from arena.view.files import Skips, json_lines
from arena.view.store import RunStore
from test_view import ROOT, Server, browser, make_scripted_run, scripted_site  # noqa: F401 - fixtures

HEADERS = {"content-security-policy", "x-frame-options", "x-content-type-options", "referrer-policy"}
FORM = "config=run&seat=player_1&opponent=scripted%3Acopycat&seed=0"


def ep(eid: str, **extra: Any) -> dict[str, Any]:
    """A minimal episode line (what the list needs)."""
    return {"episode_id": eid, "game": "g_v0", "roles": {"p0": "r"}, "turns": [], **extra}


def line(obj: Any) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def write_gz(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data))
    return path


def client(run: Path, **options: Any) -> TestClient:
    return TestClient(create_app(run, **options), base_url="http://127.0.0.1")


def request(port: int, method: str, path: str, headers: dict[str, str], body: str | None = None) -> tuple[int, dict[str, str], str]:
    """One raw HTTP request to 127.0.0.1:port with exactly these headers (Host included)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        data = body.encode() if body is not None else None
        if data is not None:
            conn.putheader("Content-Type", "application/x-www-form-urlencoded")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode("utf-8", "replace")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("hard") / "run"
    make_scripted_run(run, steps=1, games=2)
    return run


# ---------------------------------------------------------------- DNS rebinding: Host and Origin
def test_dns_rebinding_gets_nothing_and_origin_is_checked_against_the_allowed_hosts(run: Path) -> None:
    server = Server(run)
    port, host = server.port, server.app.state.host
    try:
        # The rebinding page's requests carry its own name as Host, with a matching Origin: refused.
        evil = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
        for path in ("/", "/curves", "/api/metrics", "/play", "/static/charts.js",
                     "/episode/episodes/step_000001.jsonl.gz/0"):
            status, headers, _ = request(port, "GET", path, evil)
            assert status == 400 and HEADERS <= set(headers), path
        assert request(port, "POST", "/play", evil, FORM)[0] == 400 and not host.sessions
        # The viewer's own names are served, with or without port; IPv6 loopback too.
        for name in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"localhost:{port}", f"[::1]:{port}", "LOCALHOST"):
            assert request(port, "GET", "/", {"Host": name})[0] == 200, name
        # A write's Origin must be an allowed host on the server's port, over http; the Host header is not trusted.
        own = {"Host": f"127.0.0.1:{port}"}
        for origin in (f"http://evil.example:{port}", f"http://127.0.0.1:{port + 1}", f"https://127.0.0.1:{port}",
                       "null", "http://127.0.0.1", f"http://127.0.0.1.evil.example:{port}", "garbage:xx"):
            assert request(port, "POST", "/play", {**own, "Origin": origin}, FORM)[0] == 403, origin
        assert request(port, "POST", "/play", {**own, "Sec-Fetch-Site": "cross-site"}, FORM)[0] == 403
        assert not host.sessions
        status, headers, _ = request(port, "POST", "/play", {**own, "Origin": f"http://localhost:{port}"}, FORM)
        assert status == 303 and headers["location"].startswith("/play/") and len(host.sessions) == 1
        sid = next(iter(host.sessions))
        status, _, _ = request(port, "POST", f"/play/{sid}/reply", {**own, "Origin": f"http://evil.example:{port}"},
                               "reply=x")
        assert status == 403
    finally:
        server.stop()


def test_allow_host_adds_a_name_and_a_tunnel_port(run: Path, tmp_path: Path) -> None:
    from arena.core.errors import ConfigError
    from arena.view.__main__ import build_parser, make_server

    args = build_parser().parse_args([str(run), "--allow-host", "viewer.lan", "--allow-host", "localhost:9000",
                                      "--max-games", "2", "--idle-timeout", "30"])
    assert args.allow_host == ["viewer.lan", "localhost:9000"] and args.max_games == 2 and args.idle_timeout == 30
    c = TestClient(create_app(run, allow_hosts=args.allow_host, max_sessions=1), base_url="http://viewer.lan")
    assert c.get("/").status_code == 200
    assert TestClient(c.app, base_url="http://other.lan").get("/").status_code == 400
    # An SSH tunnel's local port (the browser's Origin) may post; another port may not.
    local = TestClient(c.app, base_url="http://127.0.0.1:8765")
    assert local.post("/play", content=FORM, headers={"Origin": "http://localhost:9001",
                      "Content-Type": "application/x-www-form-urlencoded"}, follow_redirects=False).status_code == 403
    assert local.post("/play", content=FORM, headers={"Origin": "http://localhost:9000",
                      "Content-Type": "application/x-www-form-urlencoded"}, follow_redirects=False).status_code == 303
    with pytest.raises(ConfigError, match="--allow-host"):
        make_server(run, allow_hosts=["bad host:99999"])
    with pytest.raises(ConfigError, match="--max-games"):
        make_server(run, max_games=0)


# ---------------------------------------------------------------- security headers and CSP
def test_every_response_carries_the_security_headers_and_pages_have_nothing_inline(run: Path) -> None:
    c = client(run)
    for path in ("/", "/episode/episodes/step_000001.jsonl.gz/0", "/curves", "/tournaments", "/play",
                 "/static/style.css",
                 "/api/metrics", "/nope", "/episode/nope/0"):
        r = c.get(path)
        assert HEADERS <= set(r.headers), path
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "style-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        if r.headers["content-type"].startswith("text/html") and r.status_code == 200:
            # what a strict CSP blocks: inline scripts, inline handlers, style attributes and elements
            assert not re.search(r"<script(?![^>]*\bsrc=)", r.text), path
            assert not re.search(r"<[^>]*\son[a-z]+\s*=", r.text), path
            assert not re.search(r"<[^>]*\sstyle\s*=|<style", r.text), path
    assert HEADERS <= set(TestClient(c.app, base_url="http://evil.example").get("/").headers)


def test_pages_work_under_the_csp_in_a_browser(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    """No CSP violation on any page; what view.js now does (colours, bars, the menu) happens."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    _, server = scripted_site
    browser.get_log("browser")  # drop what earlier tests left
    for path in ("/", "/episode/episodes/step_000001.jsonl.gz/0", "/curves", "/tournaments", "/play"):
        browser.get(server.url + path)
        time.sleep(0.3)
    browser.get(server.url + "/tournaments")
    cells = browser.find_elements(By.CSS_SELECTOR, "table.heatmap td")
    assert cells and all(c.value_of_css_property("background-color") != "rgba(0, 0, 0, 0)" for c in cells)
    bar = browser.find_element(By.CSS_SELECTOR, ".bar .range")
    assert bar.get_attribute("data-width") and bar.size["width"] > 0
    browser.get(server.url + "/play")
    menu = Select(browser.find_element(By.NAME, "config"))
    other = [o.get_attribute("value") for o in menu.options if o.get_attribute("value") != "run"][0]
    menu.select_by_value(other)  # the listener view.js adds submits the form
    WebDriverWait(browser, 20).until(lambda d: f"config={other}" in d.current_url)
    csp = [m["message"] for m in browser.get_log("browser") if "Content Security Policy" in m["message"]]
    assert not csp, csp


# ---------------------------------------------------------------- play sessions: capped, idle ones end
def play_threads(host: Any) -> list[threading.Thread]:
    """The live threads of this host's games (other tests' servers may hold some too)."""
    names = {f"play-{sid}" for sid in list(host.sessions)}
    return [t for t in threading.enumerate() if t.name in names and t.is_alive()]


def test_play_sessions_are_capped_with_429_and_idle_ones_end(run: Path) -> None:
    before = threading.active_count()
    # Idle games end after 4 s: longer than the burst takes on a loaded 2-core host (with 1.5 s a game ended
    # mid-burst there and a third was admitted, correctly).
    server = Server(run, max_sessions=2, idle_s=4)
    port, host = server.port, server.app.state.host
    own = {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"}
    try:
        with ThreadPoolExecutor(8) as pool:  # a burst of 40 starts
            statuses = list(pool.map(lambda _: request(port, "POST", "/play", own, FORM), range(40)))
        codes = sorted(s for s, _, _ in statuses)
        assert codes.count(303) == 2 and codes.count(429) == 38
        assert all(h.get("retry-after") for s, h, _ in statuses if s == 429)
        assert "games are being played" in next(b for s, _, b in statuses if s == 429)
        assert len(play_threads(host)) == 2  # one per game; none per refusal
        assert threading.active_count() < before + 45  # and the server's own: uvicorn's, anyio's pool (40 at most)
        deadline = time.time() + 20  # nobody replies: both games end after 4 s and free their threads
        while host.live() and time.time() < deadline:
            time.sleep(0.1)
        assert host.live() == 0
        assert all(s.status == "error" and "no reply within 4 s" in (s.error or "") for s in host.sessions.values())
        deadline = time.time() + 5
        while play_threads(host) and time.time() < deadline:
            time.sleep(0.05)
        assert not play_threads(host)
        status, headers, _ = request(port, "POST", "/play", own, FORM)  # room again
        assert status == 303
        sid = headers["location"].rsplit("/", 1)[1]
        assert "no reply" not in request(port, "GET", f"/play/{sid}", own)[2]
    finally:
        server.stop()


# ---------------------------------------------------------------- files outside the run folder
def test_files_outside_the_run_folder_are_not_read(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.jsonl"
    secret.write_bytes(line(ep("SECRET-EPISODE")))
    (outside / "secret.json").write_text(json.dumps({"games": 1, "name": "SECRET-PLAYER"}))
    (outside / "metrics.jsonl").write_text('{"step": 1, "SECRET_METRIC": 1}\n')
    run = tmp_path / "run"
    write_gz(run / "episodes" / "step_000001.jsonl.gz", line(ep("mine")))
    (run / "episodes" / "step_000002.jsonl.gz").symlink_to(write_gz(outside / "s.jsonl.gz", line(ep("SECRET-GZ"))))
    (run / "episodes" / "step_000003.jsonl.gz").symlink_to(run / "episodes" / "step_000001.jsonl.gz")  # inside: no
    (run / "evals").mkdir()
    (run / "evals" / "x").symlink_to(outside, target_is_directory=True)  # a linked folder leads outside too
    (outside / "step_000001.jsonl").write_bytes(line(ep("SECRET-EVAL")))
    (run / "t.json").symlink_to(outside / "secret.json")
    (run / "metrics.jsonl").symlink_to(outside / "metrics.jsonl")
    c = client(run)
    page = c.get("/")
    assert page.status_code == 200 and "SECRET" not in page.text
    assert [r.episode_id for r in c.app.state.store.rows()] == ["mine"]  # no link is followed, in or out (#38)
    assert page.text.count("is a link (links are not followed)") == 2
    assert "evals/x is a link or not a folder" in page.text
    assert c.get("/episode/episodes/step_000002.jsonl.gz/0").status_code == 404
    assert "SECRET" not in c.get("/tournaments").text and "t.json is a link" in c.get("/tournaments").text
    assert c.get("/api/metrics").json() == {"rows": [], "next": 0, "skipped": 0, "more": False}
    # runner.episodes_jsonl of config.json, absolute or ../: not read either.
    for log in (str(secret), "../outside/secret.jsonl"):
        other = tmp_path / f"run-{len(log)}"
        other.mkdir()
        (other / "config.json").write_text(json.dumps({"runner": {"episodes_jsonl": log}}))
        r = client(other).get("/")
        assert r.status_code == 200 and "SECRET" not in r.text and "leads outside the run folder" in r.text
    # A tournament named on the command line is the person's choice: read wherever it lies.
    assert "SECRET-PLAYER" in TestClient(create_app(run, [outside / "secret.json"]), base_url="http://127.0.0.1").get(
        "/tournaments").text


# ---------------------------------------------------------------- bad lines and files: skipped, counted, shown
def test_bad_lines_and_files_are_skipped_counted_and_shown(tmp_path: Path) -> None:
    run = tmp_path / "run"
    deep_list = b"[" * 200_000 + b"]" * 200_000 + b"\n"
    deep_obj = b'{"a":' * 200_000 + b"1" + b"}" * 200_000 + b"\n"
    bad = [b"not json\n", line([1, 2]), line("a string"), deep_list, deep_obj, b'{"episode_id": "\xff\xfe"}\n',
           line(ep("odd", roles=[1, 2]))]  # an object summarise cannot read
    write_gz(run / "episodes" / "step_000001.jsonl.gz", line(ep("a")) + b"".join(bad) + line(ep("b")))
    c = client(run)
    r = c.get("/")
    assert r.status_code == 200
    rows, skips = c.app.state.store.scan()
    assert [r.episode_id for r in rows] == ["a", "b"]  # the bad lines between them did not drop "b"
    assert skips.lines == len(bad) and not skips.files
    assert f"{len(bad)} lines skipped" in r.text and 'id="skipped"' in r.text
    assert "b" in c.get("/episode/episodes/step_000001.jsonl.gz/1").text  # keys count the episodes read (as linked)
    assert c.get("/episode/episodes/step_000001.jsonl.gz/2").status_code == 404
    # A gzip stream cut short, and one corrupted in its middle: what decoded before the error is kept.
    many = b"".join(line(ep(f"c{i}", info={"pad": os.urandom(300).hex()})) for i in range(200))
    whole = gzip.compress(many)
    (run / "episodes" / "step_000002.jsonl.gz").write_bytes(whole[: len(whole) * 2 // 3])
    corrupt = bytearray(whole)
    corrupt[len(whole) // 2 : len(whole) // 2 + 64] = b"\x00" * 64
    (run / "episodes" / "step_000003.jsonl.gz").write_bytes(bytes(corrupt))
    (run / "episodes" / "step_000004.jsonl.gz").write_bytes(b"this is not gzip at all\n")
    (run / "episodes" / "step_000005.jsonl.gz").write_bytes(whole + b"trailing garbage")  # all 200 kept
    (run / "episodes" / "step_000007.jsonl.gz").symlink_to(run / "gone")  # dangling: counted, not a 500
    r = c.get("/")
    assert r.status_code == 200 and "files not (fully) read" in r.text
    store: RunStore = c.app.state.store
    rows, skips = store.scan()
    by_file = dict(skips.files)
    assert any("step_000002" in k and "unreadable after" in v for k, v in by_file.items())
    assert any("step_000003" in k and "unreadable after" in v for k, v in by_file.items())
    assert any("step_000004" in k for k in by_file) and not any("step_000001" in k for k in by_file)
    assert any("step_000007" in k and "is a link" in v for k, v in by_file.items())
    n2 = sum(1 for r in rows if r.key.startswith("episodes/step_000002.jsonl.gz/"))
    n3 = sum(1 for r in rows if r.key.startswith("episodes/step_000003.jsonl.gz/"))
    n5 = sum(1 for r in rows if r.key.startswith("episodes/step_000005.jsonl.gz/"))
    assert 50 < n2 < 200 and 20 < n3 < 200 and n5 == 200, (n2, n3, n5)
    assert c.get(f"/episode/episodes/step_000002.jsonl.gz/{n2 - 1}").status_code == 200
    assert c.get(f"/episode/episodes/step_000002.jsonl.gz/{n2}").status_code == 404
    # An episode whose turns are of odd shapes is shown, or refused with 422: never a 500.
    write_gz(run / "episodes" / "step_000006.jsonl.gz",
             line(ep("weird", turns=[1, "x", {"seat": [1], "messages": "m", "tokens": 5, "logprobs": "y"}],
                     outcome=[], rewards={"p0": "x"}, info={"k": [[[]]]})))
    assert c.get("/").status_code == 200
    assert c.get("/episode/episodes/step_000006.jsonl.gz/0").status_code in (200, 422)
    # A tournament file nested too deep: shown as an error, the page stays.
    (run / "deep.json").write_bytes(deep_list)
    (run / "odd.json").write_text(json.dumps({"ratings": {"a": [1, {"b": None}]}, "payoff": [[{"x": 1}]]}))
    t = c.get("/tournaments")
    assert t.status_code == 200 and "not JSON: RecursionError" in t.text


def test_long_lines_are_skipped_and_reading_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(line(ep("a")) + b'{"pad": "' + b"x" * 5000 + b'"}\n' + line(ep("b")) + line(ep("c"))[:-1])
    skips = Skips()
    assert [e["episode_id"] for e in json_lines(path, tmp_path, skips, max_line=1000)] == ["a", "b", "c"]
    assert skips.lines == 1 and not skips.files
    skips = Skips()  # and a decompressed-size cap refuses a gzip file whole, saying so
    gz = write_gz(tmp_path / "y.jsonl.gz", line(ep("a")) * 100)
    assert len(list(json_lines(gz, tmp_path, skips, max_decompressed=1000))) < 100
    assert skips.files == {str(gz): "decompresses to more than 1000 bytes: not read"} and skips.refused == {str(gz)}


def test_metrics_with_nan_and_bad_bytes_serve_valid_json(tmp_path: Path) -> None:
    (tmp_path / "metrics.jsonl").write_bytes(
        b'{"step": 1, "loss": NaN, "x": Infinity, "y": [-Infinity, 1.5]}\n'
        b'{"step": 2, "loss": 0.5}\n'
        b'{"step": 3, "note": "\xff\xfe broken"}\n'
        b"[1, 2]\n"
        b"not json\n"
        b'{"step": 4, "loss": 0.25}\n'
    )
    r = client(tmp_path).get("/api/metrics")
    assert r.status_code == 200

    def no_constants(name: str) -> None:
        raise AssertionError(f"{name} is not JSON")

    data = json.loads(r.text, parse_constant=no_constants)
    assert data["rows"] == [{"step": 1, "loss": None, "x": None, "y": [None, 1.5]}, {"step": 2, "loss": 0.5},
                            {"step": 4, "loss": 0.25}]
    assert data["next"] == 6 and data["skipped"] == 3
    assert client(tmp_path).get("/api/metrics?since=5").json() == {"rows": [{"step": 4, "loss": 0.25}], "next": 6,
                                                                   "skipped": 0, "more": False}


# ---------------------------------------------------------------- odd numbers: 404
def test_odd_numbers_give_404_not_500(run: Path) -> None:
    c = client(run)
    huge = "9" * 5000
    for path in (f"/?page={huge}", "/?page=²", "/?page=-1", "/?per_page=²", f"/?per_page={huge}",
                 "/episode/episodes/step_000001.jsonl.gz/²", f"/episode/episodes/step_000001.jsonl.gz/{huge}",
                 "/episode/episodes/step_000001.jsonl.gz/٣",
                 "/api/metrics?since=²", f"/api/metrics?since={huge}", "/play/²", "/api/play/²"):
        assert c.get(path).status_code == 404, path
    assert c.get("/?page=1").status_code == 200 and c.get("/?page=99").status_code == 200  # past the end: the last
    # A step file with 200 digits in its name is listed (its step read from the first 18), not a 500.
    odd = run / "episodes" / f"step_{huge[:200]}.jsonl.gz"
    write_gz(odd, line(ep("odd-step")))
    try:
        assert c.get("/").status_code == 200
    finally:
        odd.unlink()


# ---------------------------------------------------------------- a hostile run folder, served for real
def _vm(pid: int, key: str) -> int:
    """kB of VmRSS/VmHWM of a process."""
    for row in Path(f"/proc/{pid}/status").read_text().splitlines():
        if row.startswith(key + ":"):
            return int(row.split()[1])
    raise AssertionError(key)


@pytest.mark.skipif(not Path("/proc/self/status").exists() or not hasattr(os, "mkfifo"), reason="Linux only")
def test_a_hostile_folder_neither_hangs_nor_grows_the_real_server(tmp_path: Path) -> None:
    run = tmp_path / "run"
    make_scripted_run(run, steps=1, games=2)  # step_000001: two real episodes
    eps = run / "episodes"
    (eps / "step_000002.jsonl.gz").symlink_to("/dev/zero")
    os.mkfifo(eps / "step_000003.jsonl.gz")
    (eps / "step_000004.jsonl.gz").write_bytes(gzip.compress(b"\0" * (300 * 2**20), 9))  # 300 MB, one line
    (eps / "step_000005.jsonl.gz").write_bytes(gzip.compress(b'{"a": "' + b"x" * (40 * 2**20) + b'"}\n' + line(ep("after"))))
    (run / "metrics.jsonl").unlink()
    os.mkfifo(run / "metrics.jsonl")
    os.mkfifo(run / "fifo.json")  # a tournament file
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = subprocess.Popen([sys.executable, "-m", "arena.view", str(run), "--port", "0"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = ""
        deadline = time.time() + 60
        while "http://" not in out and time.time() < deadline:
            out += proc.stdout.readline()  # type: ignore[union-attr]
        port = int(out.split("http://127.0.0.1:")[1].split("/")[0])
        base = _vm(proc.pid, "VmRSS")
        host = {"Host": f"127.0.0.1:{port}"}
        t0 = time.time()
        with ThreadPoolExecutor(6) as pool:  # several clients at once: none waits on the FIFO
            futures = [pool.submit(request, port, "GET", p, host)
                       for p in ("/", "/", "/api/metrics", "/tournaments", "/episode/episodes/step_000003.jsonl.gz/0",
                                 "/curves")]
            results = [f.result(timeout=60) for f in futures]
        assert time.time() - t0 < 60
        listing = results[0]
        assert [s for s, _, _ in results] == [200, 200, 200, 200, 404, 200]
        assert "not a regular file" in listing[2] and "3 of 3 episodes" in listing[2], listing[2][-3000:]
        assert "step_000002.jsonl.gz is a link" in listing[2]  # /dev/zero
        assert "decompresses to more than 64 MiB: not read" in listing[2]  # the 300 MB bomb, refused whole (#38)
        assert "1 line skipped" in listing[2]  # the 40 MB line
        assert json.loads(results[2][2]) == {"rows": [], "next": 0, "skipped": 0, "more": False}
        for _ in range(3):  # the files do not change: served from the cache, quickly
            assert request(port, "GET", "/", host)[0] == 200
        grown = _vm(proc.pid, "VmHWM") - base
        assert grown < 200 * 1024, f"the server grew by {grown // 1024} MB"
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=20)


# ---------------------------------------------------------------- writes: body cap, and the play file
def test_a_write_body_is_capped_before_the_form_is_parsed(run: Path) -> None:
    c = client(run)
    form = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://127.0.0.1"}
    big = FORM + "&pad=" + "x" * (2 * 2**20)
    assert c.post("/play", content=big, headers=form).status_code == 413
    chunked = c.post("/play", content=iter([big.encode()[i : i + 65536] for i in range(0, len(big), 65536)]),
                     headers=form)  # no Content-Length: counted as it comes
    assert chunked.status_code == 413
    r = c.post("/play", content=big, headers={**form, "Origin": "http://evil.example"})
    assert r.status_code == 403 and HEADERS <= set(r.headers)
    assert not c.app.state.host.sessions


def _play_through(c: TestClient, sid: str, timeout: float = 60) -> Any:
    """Answer every turn of the person's seat over HTTP; the finished session."""
    host = c.app.state.host
    deadline = time.time() + timeout
    while time.time() < deadline:
        status = c.get(f"/api/play/{sid}").json()["status"]
        if status in ("done", "error"):
            return host.sessions[sid]
        if status == "you":
            r = c.post(f"/play/{sid}/reply", data={"reply": "Answer: 1\n\\boxed{1}"},
                       headers={"Origin": "http://127.0.0.1"}, follow_redirects=False)
            assert r.status_code == 303
        time.sleep(0.05)
    raise AssertionError("the game did not end")


def test_a_played_game_is_never_written_through_a_link_or_to_a_fifo(run: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.jsonl"
    outside.write_text("")
    play = run / "play"
    play.mkdir(exist_ok=True)
    c = client(run)
    own = {"Origin": "http://127.0.0.1", "Content-Type": "application/x-www-form-urlencoded"}
    try:
        (play / "episodes.jsonl").symlink_to(outside)
        sid = c.post("/play", content=FORM, headers=own, follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        session = _play_through(c, sid)
        assert session.status == "error" and "could not be saved" in session.error and outside.read_text() == ""
        (play / "episodes.jsonl").unlink()
        os.mkfifo(play / "episodes.jsonl")
        sid = c.post("/play", content=FORM, headers=own, follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        session = _play_through(c, sid)  # would hang on the FIFO if opened as a plain file
        assert session.status == "error" and "could not be saved" in session.error
        (play / "episodes.jsonl").unlink()
        sid = c.post("/play", content=FORM, headers=own, follow_redirects=False).headers["location"].rsplit("/", 1)[1]
        session = _play_through(c, sid)  # a plain folder: saved, and listed under the key the page links
        assert session.status == "done" and session.episode_key == "play/episodes.jsonl/0"
        assert c.get("/episode/play/episodes.jsonl/0").status_code == 200
    finally:
        (play / "episodes.jsonl").unlink(missing_ok=True)
