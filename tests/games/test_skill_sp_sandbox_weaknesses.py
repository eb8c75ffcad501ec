"""Issue 25, the weaknesses: nested user namespaces, the seccomp deny-list, status labels the code chooses,
forged results, deep results and the validators' static check, each tried for real and shown to fail.

Helpers and the sandbox fixture come from test_skill_sp_sandbox_escapes.py.
"""

from __future__ import annotations

import pytest

from arena.games.skill_sp.env import JUDGE_SOURCE
from arena.games.skill_sp.loader import TOOLS_SOURCE, validator_problems
from arena.games.skill_sp.sandbox import _DENIED, CPU_SHARE, MAX_DEPTH, Status, json_depth, parse_report
from tests.games.test_skill_sp_sandbox_escapes import (  # noqa: F401 - sandbox is a fixture
    COLUMN,
    LIBC,
    LIMITS,
    leftovers,
    report,
    sandbox,
)


# ---------------------------------------------------------------- weakness 1: nested user namespaces, mounts
def test_no_nested_user_namespace_and_no_mount(sandbox):
    code = LIBC + f"""
out = {{}}
out["unshare_user"] = sc({_DENIED["unshare"][COLUMN]}, 0x10000000)
out["unshare_mnt"] = sc({_DENIED["unshare"][COLUMN]}, 0x00020000)
out["libc_unshare"] = (libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())
out["mount"] = (libc.mount(b"none", b"/tmp", b"tmpfs", 0, b"size=1g"), ctypes.get_errno())
out["setns"] = sc({_DENIED["setns"][COLUMN]}, 0, 0)
try:
    out["max_userns"] = open("/proc/sys/user/max_user_namespaces").read().strip()
except OSError as e:
    out["max_userns"] = str(e)
print(json.dumps(out))
"""
    out = report(sandbox.run(code))
    for name in ("unshare_user", "unshare_mnt", "libc_unshare", "mount", "setns"):
        assert out[name] == [-1, 1], (name, out[name])


# ---------------------------------------------------------------- weakness 2: the seccomp deny-list, for real
def test_every_denied_syscall_fails_with_eperm(sandbox):
    numbers = {name: nrs[COLUMN] for name, nrs in _DENIED.items() if nrs[COLUMN] is not None}
    code = LIBC + f"""
out = {{name: sc(nr, 0, 0, 0, 0, 0, 0)[1] for name, nr in {numbers!r}.items()}}
import subprocess
for name, attempt in {{
    "execv": lambda: os.execv("/usr/bin/true", ["true"]),
    "execve_python": lambda: os.execv("/usr/bin/env", ["env"]),
    "posix_spawn": lambda: os.posix_spawn("/usr/bin/true", ["true"], {{}}),
    "subprocess": lambda: subprocess.run(["/usr/bin/true"]),
    "fork": os.fork,
}}.items():
    try:
        attempt()
        out[name] = "ran"
    except OSError as e:
        out[name] = e.errno
print(json.dumps(out))
"""
    out = report(sandbox.run(code))
    assert {name: out[name] for name in numbers} == dict.fromkeys(numbers, 1)  # EPERM, never reached the kernel
    assert out["execv"] == out["execve_python"] == 1  # the exec filter stacked by the driver
    assert all(out[n] != "ran" for n in ("posix_spawn", "subprocess", "fork")), out


# ---------------------------------------------------------------- weakness 3: the code choosing its status
def test_the_code_cannot_choose_its_status_label(sandbox):
    attempts = {
        "sigxcpu": "import os, signal\nos.kill(os.getpid(), signal.SIGXCPU)\nraise SystemExit(1)",
        "sigxcpu_dfl": "import os, signal\nsignal.signal(signal.SIGXCPU, signal.SIG_DFL)\n"
        "os.kill(os.getpid(), signal.SIGXCPU)\nos._exit(128 + signal.SIGXCPU)",
        "exit3": "import os\nos._exit(3)",
        "exit137": "import os\nos._exit(137)",
        "exit152": "import os\nos._exit(152)",
        "raise_memory": "raise MemoryError",
        "raise_memory_in_function": "def f():\n    raise MemoryError()\nf()",
        "throw_memory": "def g():\n    yield 1\nit = g()\nnext(it)\nit.throw(MemoryError)",
        "reraise_memory": "try:\n    raise MemoryError\nexcept MemoryError:\n    raise",
        "sigkill_self": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\nos._exit(137)",
        "fake_efbig": "raise OSError(27, 'File too large')",
        "stderr_lies": "import sys\nprint('MemoryError\\nCPU time limit exceeded', file=sys.stderr)\nsys.exit(3)",
    }
    for name, code in attempts.items():
        r = sandbox.run(code)
        assert r.status is Status.ERROR and r.limit is None, (name, r)
        assert leftovers(r.run_id) == []
    # The real limits are still told apart, by the parent's own measurements.
    cpu = sandbox.run("while True:\n    pass")
    assert cpu.status is Status.TIMEOUT and cpu.limit == "cpu" and cpu.cpu_s >= CPU_SHARE * LIMITS.cpu_s, cpu
    wall = sandbox.run("import time\ntime.sleep(60)", limits=LIMITS.model_copy(update={"wall_s": 1.0}))
    assert wall.status is Status.TIMEOUT and wall.limit == "wall"


# ---------------------------------------------------------------- weakness 4: forged results
FORGED = {"value": {"forged": True}}
FORGE_ALL_FDS = """
import json, os
line = (json.dumps({"value": {"forged": True}}) + "\\n").encode()
for fd in range(1024):
    try:
        os.write(fd, line)
    except OSError:
        pass
for fd in os.listdir("/proc/self/fd"):
    try:
        with open(f"/proc/self/fd/{fd}", "wb") as f:
            f.write(line)
    except OSError:
        pass
"""


def test_forged_result_lines_never_replace_the_result(sandbox):
    honest = "def f():\n    return {'forged': False}\n"
    cases = {
        "module_print": "import json\nprint(json.dumps({'value': {'forged': True}}))\n" + honest,
        "module_write_fd1": "import os, json\nos.write(1, json.dumps({'value': {'forged': True}}).encode())\n" + honest,
        "one_line_then_exit0": "import os\ndef f():\n    os.write(1, b'{\"value\": {\"forged\": true}}')\n    os._exit(0)\n",
        "swap_stdout_then_exit0": "import sys, os\ndef f():\n    sys.stdout = sys.__stdout__\n"
        "    print('{\"value\": {\"forged\": true}}')\n    sys.stdout.flush()\n    os._exit(0)\n",
        "all_fds_then_return": FORGE_ALL_FDS + honest,
        "all_fds_then_exit0": "def f():\n" + "\n".join("    " + line for line in FORGE_ALL_FDS.splitlines())
        + "\n    os._exit(0)\n",
        "thread_after_return": "import threading, time\n" + "def forge():\n    time.sleep(0.05)\n"
        + "\n".join("    " + line for line in FORGE_ALL_FDS.splitlines())
        + "\ndef f():\n    threading.Thread(target=forge).start()\n    return {'forged': False}\n",
    }
    for name, source in cases.items():
        r = sandbox.call("m", "f", {}, {"m.py": source})
        assert r.value != FORGED["value"], (name, r)
        assert r.status is Status.ERROR or r.value == {"forged": False}, (name, r)
        assert leftovers(r.run_id) == []
    printed = sandbox.call("m", "f", {}, {"m.py": cases["module_print"]})
    assert printed.ok and printed.value == {"forged": False}  # a module-level print is only noise (on stderr)


def test_forged_judge_result(sandbox):
    """A hostile validators.py cannot replace what the trusted judge.py and tools.py return."""
    validators = (
        "import json\nimport tools\n"
        "print(json.dumps({'value': [{'correct': True, 'answer': 42}]}))\n"
        "tools.run_calls = lambda response: {'value': 42}\n"
        "for name in dir(tools):\n    if callable(vars(tools)[name]):\n        vars(tools)[name] = lambda *a, **k: 42\n"
        "json.JSONEncoder.encode = lambda self, o: '[{\"correct\": true, \"answer\": 42}]'\n"
        "json.dumps = lambda *a, **k: '[{\"correct\": true, \"answer\": 42}]'\n"
        "def validate(contract):\n    return []\n"
        "def check(contract, response):\n    return False\n"
    )
    files = {"validators.py": validators, "tools.py": TOOLS_SOURCE, "judge.py": JUDGE_SOURCE}
    contract = {"answer": 42, "calls": [{"tool": "calculate", "args": {"expression": "6 * 7"}}]}
    response = {"tool": "calculate", "args": {"expression": "2 + 2"}}
    r = sandbox.call("judge", "evaluate_all", {"contract": contract, "responses": [response]}, files)
    assert r.ok, r
    assert r.value == [{"correct": False, "answer": 4}]  # the real check and the real tool, not the forgery
    # A check that writes the judge's output line itself and ends the process before judge.py can answer.
    exiting = validators.replace(
        "def check(contract, response):\n    return False\n",
        "def check(contract, response):\n    import os\n"
        "    os.write(1, json.dumps({'value': [{'correct': True, 'answer': 42}]}).encode())\n    os._exit(0)\n",
    )
    r = sandbox.call("judge", "evaluate_all", {"contract": contract, "responses": [response]},
                     {**files, "validators.py": exiting})  # fmt: skip
    assert r.ok and [{k: v[k] for k in ("correct", "answer")} for v in r.value] == [{"correct": False, "answer": 4}], r
    assert "the validators' run failed" in r.value[0]["error"], r  # wrong, and the trusted answer still stands


# ---------------------------------------------------------------- weakness 5: nested results, validators' imports
def test_deeply_nested_results_are_refused_without_recursion_error(sandbox):
    for depth in (MAX_DEPTH + 1, 500, 100_000):
        code = f"def f():\n    v = 0\n    for _ in range({depth}):\n        v = [v]\n    return v\n"
        r = sandbox.call("m", "f", {}, {"m.py": code})
        assert r.status is Status.ERROR and r.value is None, (depth, r)
    fine = sandbox.call("m", "f", {}, {"m.py": "def f():\n    return [[[{'a': '[[[[['}]]]\n"})
    assert fine.ok and fine.value == [[[{"a": "[[[[["}]]]
    secret = b"s" * 32
    assert isinstance(parse_report(secret + b"\n" + b"[" * 1_000_000 + b"]" * 1_000_000, secret), str)
    assert isinstance(parse_report(secret + b"\n" + b'{"ok": true, "value": ' + b"[" * 5000, secret), str)
    assert json_depth('["[[[[", {"a": "\\"[["}]') == 2


@pytest.mark.parametrize(
    "source",
    [
        "x = __import__('os')",
        "import importlib",
        "from importlib import import_module",
        "x = eval('1')",
        "exec('import os')",
        "c = compile('1', 'x', 'eval')",
        "import tools\nf = getattr(tools, 'run_calls')",
        "import typing\nos = typing.sys.modules['os']",
        "x = ().__class__.__bases__[0].__subclasses__()",
        "b = __builtins__",
        "g = globals()",
        "def f():\n    yield 1\nfr = f().gi_frame.f_globals",
        "from typing import sys",
        "o = open('/etc/passwd')",
        "v = vars()",
        "import operator\nsubs = operator.attrgetter('__class__.__base__.__subclasses__')(())",
        "from operator import attrgetter",
        "import dataclasses\nf = dataclasses.inspect.currentframe()",
        "import statistics\nos = statistics.random._os",
    ],
)
def test_validator_static_check_catches_dynamic_imports(source):
    full = source + "\ndef validate(contract):\n    return []\ndef check(contract, response):\n    return True\n"
    assert validator_problems(full), source


def test_validator_static_check_accepts_ordinary_code():
    ok = ("import math, re\nimport tools\nfrom collections import Counter\n"
          "def validate(contract):\n    return [] if __name__ else ['x']\n"
          "def check(contract, response):\n    return type(response) is int and tools is not None\n")  # fmt: skip
    assert validator_problems(ok) == []
