"""``python -m arena.view RUN_DIR``: serve the run viewer on 127.0.0.1 and print its address."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arena.cli import run_cli
from arena.core.errors import ConfigError
from arena.view.play import IDLE_S, MAX_SESSIONS


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m arena.view", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", help="a run folder (metrics.jsonl, episodes/, config.json), e.g. runs/spy")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--tournament", action="append", default=[], type=Path, metavar="FILE",
                   help="a tournament JSON to show besides those in the run folder (repeatable)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME[:PORT]",
                   help="a host name the browser may reach the viewer by, besides 127.0.0.1, localhost and ::1 "
                        "(repeatable); with :PORT, pages served there (an SSH tunnel's local port) may also "
                        "post the play forms. Requests for any other Host get 400 (DNS rebinding)")
    p.add_argument("--max-games", type=int, default=MAX_SESSIONS, metavar="N",
                   help=f"play sessions live at once, each a thread (default {MAX_SESSIONS}); more get 429")
    p.add_argument("--idle-timeout", type=float, default=IDLE_S, metavar="SECONDS",
                   help=f"a play session with no reply for this long ends (default {IDLE_S:g})")
    return p


def make_server(run_dir: Path, host: str = "127.0.0.1", port: int = 8765, tournaments: list[Path] | None = None,
                allow_hosts: list[str] | None = None, max_games: int = MAX_SESSIONS, idle_s: float = IDLE_S,
                limits: Any = None) -> Any:
    """A uvicorn server for the viewer that prints its address once its socket is bound. The bind
    address, unless a wildcard, is an allowed host too (``--host 10.0.0.5`` serves Host: 10.0.0.5).
    ``limits``: what one client may take (:class:`arena.view.serve.Limits`; its defaults when None);
    the process's descriptor limit is raised to its hard limit first."""
    if not run_dir.is_dir():
        raise ConfigError(f"run_dir: no such folder {str(run_dir)!r}; pass a run folder such as runs/spy")
    if max_games < 1 or not idle_s > 0:
        raise ConfigError("--max-games must be at least 1 and --idle-timeout above 0")
    import uvicorn

    from arena.view.app import create_app, split_host
    from arena.view.serve import raise_fd_limit, server_config

    hosts = list(allow_hosts or [])
    try:
        for h in hosts:
            split_host(h)
    except ValueError as e:
        raise ConfigError(f"--allow-host: {e}") from None
    if host not in ("", "0.0.0.0", "::"):
        hosts.append(f"[{host}]" if ":" in host else host)
    app = create_app(run_dir, tournaments, allow_hosts=hosts, max_sessions=max_games, idle_s=idle_s)
    raise_fd_limit()
    server = uvicorn.Server(server_config(app, host, port, limits, log_level="warning"))
    original = server.startup

    async def startup(sockets: Any = None) -> None:
        await original(sockets)
        for s in server.servers:  # port 0 resolves to the port the system chose
            for sock in s.sockets:
                bound_host, bound_port = sock.getsockname()[:2]
                print(f"arena view: http://{bound_host}:{bound_port}/  (run {run_dir}; Ctrl-C stops)", flush=True)

    server.startup = startup  # type: ignore[method-assign]
    return server


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    make_server(Path(args.run_dir), args.host, args.port, args.tournament, args.allow_host, args.max_games,
                args.idle_timeout).run()
    return 0


if __name__ == "__main__":
    run_cli(main)
