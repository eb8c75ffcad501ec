"""``python -m arena.view RUN_DIR``: serve the run viewer on 127.0.0.1 and print its address."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from arena.cli import run_cli
from arena.core.errors import ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m arena.view", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", help="a run folder (metrics.jsonl, episodes/, config.json), e.g. runs/spy")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--tournament", action="append", default=[], type=Path, metavar="FILE",
                   help="a tournament JSON to show besides those in the run folder (repeatable)")
    return p


def make_server(run_dir: Path, host: str = "127.0.0.1", port: int = 8765, tournaments: list[Path] | None = None) -> Any:
    """A uvicorn server for the viewer that prints its address once its socket is bound."""
    if not run_dir.is_dir():
        raise ConfigError(f"run_dir: no such folder {str(run_dir)!r}; pass a run folder such as runs/spy")
    import uvicorn

    from arena.view.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(run_dir, tournaments), host=host, port=port, log_level="warning"))
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
    make_server(Path(args.run_dir), args.host, args.port, args.tournament).run()
    return 0


if __name__ == "__main__":
    run_cli(main)
