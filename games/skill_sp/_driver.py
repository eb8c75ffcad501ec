"""The trusted first code of a sandbox run (see sandbox.py): set the limits, then run the job.

Runs as ``python -I -S -B /box/_driver.py TOKEN`` inside bubblewrap, standard
library only. Reads ``/box/_job.json``: ``{"mode": "run", "code": ...}`` runs the
code as ``__main__``; ``{"mode": "call", "module", "function", "kwargs"}``
imports the module from ``/box`` and writes ``{"value": result}`` as JSON to
stdout (the function's own prints go to stderr). Exit codes: 0 ok, 1 the code
raised, 3 MemoryError, 4 the result is not JSON.
"""

import json
import resource
import sys
import traceback

EXIT_EXCEPTION, EXIT_MEMORY, EXIT_BAD_RESULT = 1, 3, 4


def set_limits(lim):
    """Soft and hard limits alike: without capabilities they cannot be raised back."""
    mb = 1 << 20
    for res, value in (
        (resource.RLIMIT_CPU, None),
        (resource.RLIMIT_AS, lim["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, lim["file_bytes"]),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_NPROC, 1),
        (resource.RLIMIT_CORE, 0),
    ):
        if res == resource.RLIMIT_CPU:
            resource.setrlimit(res, (lim["cpu_s"], lim["cpu_s"] + 1))  # SIGXCPU, then SIGKILL a second later
        else:
            resource.setrlimit(res, (value, value))


def main():
    with open("/box/_job.json") as f:
        job = json.load(f)
    set_limits(job["limits"])
    sys.path.insert(0, "/box")
    del sys.argv[1:]
    try:
        if job["mode"] == "run":
            exec(compile(job["code"], "<sandbox>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            sys.stdout.flush()
            return 0
        module = __import__(job["module"])
        real_stdout, sys.stdout = sys.stdout, sys.stderr
        try:
            value = getattr(module, job["function"])(**job["kwargs"])
        finally:
            sys.stdout = real_stdout
    except MemoryError:
        return EXIT_MEMORY
    except SystemExit as exc:
        if exc.code in (None, 0):
            return 0
        print(f"SystemExit: {exc.code!r}"[:300], file=sys.stderr)
        return EXIT_EXCEPTION
    except BaseException:  # noqa: BLE001 - the code under test may raise anything
        try:
            traceback.print_exc(limit=-3)
        except MemoryError:
            return EXIT_MEMORY
        return EXIT_EXCEPTION
    try:
        text = json.dumps({"value": value}, allow_nan=False)
    except (TypeError, ValueError) as exc:
        print(f"result is not JSON: {exc}", file=sys.stderr)
        return EXIT_BAD_RESULT
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except MemoryError:
        rc = EXIT_MEMORY
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - stdout may be closed by the code; the exit code still speaks
        pass
    import os

    os._exit(rc)
