"""``python -m arena.view RUN_DIR``: serve the run viewer on 127.0.0.1 and print its address."""

from __future__ import annotations

import argparse
from pathlib import Path

from arena.cli import run_cli
from arena.config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m arena.view", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", help="a run folder (metrics.jsonl, episodes/, config.json), e.g. runs/spy")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--tournament", action="append", default=[], type=Path, metavar="FILE",
                   help="a tournament JSON to show besides those in the run folder (repeatable)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"run_dir: no such folder {str(run_dir)!r}; pass a run folder such as runs/spy")
    import uvicorn

    from arena.view.app import create_app

    config = uvicorn.Config(create_app(run_dir, args.tournament), host=args.host, port=args.port, log_level="warning")
    server = uvicorn.Server(config)
    # The address is printed once the socket is bound (port 0 resolves to the one chosen).
    original = server.startup

    async def startup(sockets=None):  # noqa: ANN001, ANN202 - uvicorn's signature
        await original(sockets)
        for s in server.servers:
            for sock in s.sockets:
                host, port = sock.getsockname()[:2]
                print(f"arena view: http://{host}:{port}/  (run {run_dir}; Ctrl-C stops)", flush=True)

    server.startup = startup  # type: ignore[method-assign]
    server.run()
    return 0


if __name__ == "__main__":
    run_cli(main)
