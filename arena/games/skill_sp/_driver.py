"""The trusted first code of a sandbox run (see sandbox.py): hide the channel, set the limits, then run the job.

Runs as ``python -I -S -B /box/_driver.py RUN_ID`` inside bubblewrap (as pid 1
of its pid namespace), standard library only. Before any untrusted code runs it

0. writes one byte (``READY``) on the result descriptor and waits for the secret: the
   parent uses that pause to take hold of this process (a pidfd) and of its ``/tmp``
   (a descriptor it measures with ``fstatvfs``), so nothing the code does later can hide either;
1. reads the run's secret from stdin (a pipe the parent wrote and closed) and
   puts ``/dev/null`` on fd 0, so the secret is left only in this process's memory;
2. sets the resource limits (soft = hard: without capabilities they cannot be raised back)
   and turns transparent huge pages off for the process (``PR_SET_THP_DISABLE``);
3. installs a second seccomp filter that denies ``execve``/``execveat`` (bubblewrap's
   filter must still allow the exec of this interpreter; this one comes after it) and
   ``PR_SET_THP_DISABLE``, so the code cannot turn huge pages back on.

Reads ``/box/_job.json``: ``{"mode": "run", "code": ...}`` runs the code as
``__main__``; ``{"mode": "call", "module", "function", "kwargs"}`` imports the
module from ``/box`` and calls the function (its prints go to stderr). The
outcome is written once, after the untrusted code has returned, on the result
descriptor (``result_fd``) as ``SECRET`` followed by one JSON object:
``{"ok": true, "value": ...}`` or ``{"ok": false, "error": kind, "reason": ...}``
with kind ``exception``, ``memory`` (with ``vm_peak_kb`` and ``allocation_failed``), ``file`` (EFBIG, and a file
under ``/tmp`` reached RLIMIT_FSIZE) or ``bad_result``. The parent trusts only a
message that starts with the secret and is alone on that descriptor; the exit
status is never read as a label.
"""

import dis
import json
import os
import resource
import sys
import traceback

_write, _exit = os.write, os._exit  # taken before untrusted code can patch them
READY = b"R"  # the first byte on the result descriptor: the driver runs, in the sandbox's final root
MAX_DEPTH = 64  # as sandbox.MAX_DEPTH: deeper results are refused here already
# Queued signals of the run: each is kernel memory, and every level of user namespaces above counts them too,
# so the host's root (the caller's uid) shares one budget with the run (20 000 queued to itself made the
# host's own timer_create fail). Far above what any validator queues; the code cannot raise it back.
SIGPENDING = 64
_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def to_json(value, depth=0):
    """JSON text of a result, by this module's own code: the untrusted code shares the interpreter and may
    have patched the ``json`` module (its encoder class, its C accelerators). Builtin methods are called
    through the builtin types, so a subclass's overrides do not run either. Raises ValueError."""
    if depth > MAX_DEPTH:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    if value is None or value is True or value is False:
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError("NaN or infinity")
        return float.__repr__(value)
    if isinstance(value, str):
        out = []
        for c in str.__str__(value):
            if c in _ESCAPES:
                out.append(_ESCAPES[c])
            elif c < " " or "\ud800" <= c <= "\udfff":
                out.append(f"\\u{ord(c):04x}")
            else:
                out.append(c)
        return '"' + "".join(out) + '"'
    if isinstance(value, (list, tuple)):
        items = list.__iter__(value) if isinstance(value, list) else tuple.__iter__(value)
        return "[" + ", ".join(to_json(v, depth + 1) for v in items) + "]"
    if isinstance(value, dict):
        parts = []
        for k, v in dict.items(value):
            if not (k is None or isinstance(k, (str, int, float))):
                raise ValueError(f"keys must be str, int, float, bool or None, not {type(k).__name__}")
            key = k if isinstance(k, str) and not isinstance(k, bool) else to_json(k, depth + 1).strip('"')
            parts.append(to_json(str.__str__(key) if isinstance(key, str) else key, depth + 1) + ": "
                         + to_json(v, depth + 1))  # fmt: skip
        return "{" + ", ".join(parts) + "}"
    raise ValueError(f"Object of type {type(value).__name__} is not JSON serializable")


def take_secret():
    """The run's secret from stdin; fd 0 becomes /dev/null so the code cannot read it again."""
    data = b""
    while len(data) < 256:
        chunk = os.read(0, 256)
        if not chunk:
            break
        data += chunk
    null = os.open("/dev/null", os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return data.strip()


def set_limits(lim):
    """Soft and hard limits alike: without capabilities they cannot be raised back.

    RLIMIT_CPU: soft = hard, so the kernel sends SIGKILL at the limit (pid 1 of a
    namespace ignores a default-action SIGXCPU). RLIMIT_NPROC does not bind a
    process whose real uid is the host's root; the seccomp filter is what holds.
    RLIMIT_SIGPENDING: :data:`SIGPENDING` queued signals (the kernel drops or refuses more).
    """
    mb = 1 << 20
    for res, value in (
        (resource.RLIMIT_CPU, lim["cpu_s"]),
        (resource.RLIMIT_AS, lim["memory_mb"] * mb),
        (resource.RLIMIT_FSIZE, lim["file_bytes"]),
        (resource.RLIMIT_NOFILE, lim["open_files"]),
        (resource.RLIMIT_NPROC, lim["processes"]),  # counted per user namespace: this run's threads
        (resource.RLIMIT_CORE, 0),
        (resource.RLIMIT_MEMLOCK, 0),
        (resource.RLIMIT_MSGQUEUE, 0),
        (resource.RLIMIT_SIGPENDING, SIGPENDING),
    ):
        resource.setrlimit(res, (value, value))


def no_huge_pages():
    """``prctl(PR_SET_THP_DISABLE, 1)``: no transparent huge page for this process, whatever the host's setting.

    A page held by reference past munmap (a pipe, before seccomp denied vmsplice) keeps its whole folio
    alive: 2 MiB for a 4 KiB piece, none of it counted by RLIMIT_AS. The exec filter refuses the prctl after this."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(41, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_THP_DISABLE failed")


def deny_exec(filter_hex):
    """Stack a seccomp filter (built by sandbox.no_exec_filter) that makes execve/execveat fail with EPERM."""
    import ctypes

    prog = bytes.fromhex(filter_hex)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    fprog = SockFprog(len(prog) // 8, prog)
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_no_new_privs, pr_set_seccomp, seccomp_mode_filter = 38, 22, 2
    if libc.prctl(pr_set_no_new_privs, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
    if libc.prctl(pr_set_seccomp, seccomp_mode_filter, ctypes.byref(fprog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "installing the exec filter failed")


def vm_peak_kb():
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmPeak:"):
                    return int(line.split()[1])
    except (OSError, ValueError, MemoryError):
        pass
    return 0


def file_at_limit(limit, top="/tmp", most=10000):
    """Whether a file under ``top`` (the only writable mount) reached ``limit`` bytes: a write past
    RLIMIT_FSIZE is cut at the limit, so an EFBIG that the limit raised leaves such a file behind."""
    seen = 0
    for folder, _, names in os.walk(top):
        for name in names:
            seen += 1
            if seen > most:
                return False
            try:
                if os.lstat(os.path.join(folder, name)).st_size >= limit:
                    return True
            except OSError:
                continue
    return False


# Where an explicitly raised exception stands: a raise statement, a re-raise, a generator's throw().
_EXPLICIT = frozenset(dis.opmap[name] for name in ("RAISE_VARARGS", "RERAISE", "YIELD_VALUE", "SEND", "RESUME")
                      if name in dis.opmap)  # fmt: skip


def allocation_failed(exc):
    """Whether a MemoryError came from an allocation that failed, not from the code raising one itself:
    the innermost frame of its traceback stands on an instruction that allocates, not on a raise.
    (Code that calls the C API through ctypes can still pass this test; it is in-process introspection.)"""
    tb = exc.__traceback__
    if tb is None:
        return False
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code.co_code
    return 0 <= tb.tb_lasti < len(code) and code[tb.tb_lasti] not in _EXPLICIT


def outcome(exc, lim):
    """The report of an exception raised by the untrusted code."""
    if isinstance(exc, MemoryError):
        try:
            failed = allocation_failed(exc)
        except BaseException:  # noqa: BLE001 - a hostile traceback object: not a genuine failure
            failed = False
        return {"ok": False, "error": "memory", "reason": "MemoryError", "vm_peak_kb": vm_peak_kb(),
                "allocation_failed": failed}  # fmt: skip
    try:
        reason = traceback.format_exception_only(type(exc), exc)[-1].strip()[:300]
    except BaseException:  # noqa: BLE001 - a hostile __str__
        reason = "an exception whose message could not be formatted"
    errno = exc.errno if isinstance(exc, OSError) and isinstance(exc.errno, int) else None
    file_limit = errno == 27 and file_at_limit(lim["file_bytes"])  # EFBIG, and RLIMIT_FSIZE really cut a file
    try:
        traceback.print_exc(limit=-3)
    except BaseException:  # noqa: BLE001 - stderr may be closed by the code
        pass
    return {"ok": False, "error": "file" if file_limit else "exception", "reason": reason}


def run_job(job):
    try:
        if job["mode"] == "run":
            try:
                exec(compile(job["code"], "<sandbox>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    raise
            sys.stdout.flush()
            return {"ok": True}
        real_stdout, sys.stdout = sys.stdout, sys.stderr  # the code's prints go to stderr
        try:
            module = __import__(job["module"])
            value = getattr(module, job["function"])(**job["kwargs"])
        finally:
            sys.stdout = real_stdout
    except SystemExit as exc:
        return {"ok": False, "error": "exception", "reason": f"SystemExit: {exc.code!r}"[:300]}
    except BaseException as exc:  # noqa: BLE001 - the code under test may raise anything
        return outcome(exc, job["limits"])
    try:
        return {"ok": True, "_json": to_json(value)}
    except (TypeError, ValueError, RecursionError) as exc:
        reason = f"result is not JSON: {exc}"[:300]
        try:
            print(reason, file=sys.stderr)
        except BaseException:  # noqa: BLE001 - stderr may be closed by the code
            pass
        return {"ok": False, "error": "bad_result", "reason": reason}
    except MemoryError as exc:
        return outcome(exc, job["limits"])


def send(secret, fd, report):
    """One message on the result descriptor: the secret, then the report as JSON."""
    if "_json" in report:
        text = '{"ok": true, "value": ' + report["_json"] + "}"
    else:
        text = to_json(report)
    data = secret + b"\n" + text.encode()
    while data:
        data = data[_write(fd, data) :]


def main():
    with open("/box/_job.json") as f:
        job = json.load(f)
    fd = job["result_fd"]
    _write(fd, READY)  # the parent now watches this process and its /tmp, then sends the secret
    secret = take_secret()
    if not secret:  # the parent could not take hold of this run: nothing runs
        return 1
    os.closerange(3, fd)  # whatever else was inherited (bubblewrap's bind descriptors) goes before the code runs
    os.closerange(fd + 1, 1 << 20)
    os.set_inheritable(fd, False)
    set_limits(job["limits"])
    no_huge_pages()
    deny_exec(job["noexec_filter"])
    sys.path.insert(0, "/box")
    del sys.argv[1:]
    report = run_job(job)
    try:
        sys.stdout.flush()
    except BaseException:  # noqa: BLE001 - the code may have closed or replaced stdout
        pass
    try:
        send(secret, fd, report)
    except MemoryError:
        send(secret, fd, {"ok": False, "error": "memory", "reason": "MemoryError", "vm_peak_kb": vm_peak_kb()})
    return 0


if __name__ == "__main__":
    try:
        rc = main()
    except BaseException:  # noqa: BLE001 - the driver's own setup failed: the parent sees no message
        traceback.print_exc()
        rc = 1
    _exit(rc)
