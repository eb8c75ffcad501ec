"""The sandbox's seccomp filters, as classic BPF (the format ``seccomp_export_bpf`` writes), hand-assembled.

:func:`no_fork_filter` is loaded by bubblewrap (``--seccomp FD``) before it execs the
interpreter; :func:`no_exec_filter` is stacked by the trusted driver once the
interpreter runs. See sandbox.py for the threat model they serve. Both raise
ValueError for an architecture they do not know (x86_64 and aarch64 only).
"""

from __future__ import annotations

import os
import struct
from typing import Any

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# (clone, clone3, [fork, vfork]) syscall numbers per architecture.
_NR = {"x86_64": (56, 435, (57, 58)), "aarch64": (220, 435, ())}
# Syscalls denied with EPERM: name -> (x86_64, aarch64); None where the architecture lacks it.
_DENIED: dict[str, tuple[int | None, int | None]] = {
    # reading or writing another process, attaching to it
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271), "kcmp": (312, 272),
    "pidfd_getfd": (438, 438), "process_madvise": (440, 440),
    # memory outside RLIMIT_AS: SysV IPC, POSIX message queues, memfd, io_uring, userfaultfd
    "shmget": (29, 194), "shmat": (30, 196), "shmctl": (31, 195), "shmdt": (67, 197),
    "msgget": (68, 186), "msgsnd": (69, 189), "msgrcv": (70, 188), "msgctl": (71, 187),
    "semget": (64, 190), "semop": (65, 193), "semctl": (66, 191), "semtimedop": (220, 192),
    "mq_open": (240, 180), "mq_unlink": (241, 181), "mq_timedsend": (242, 182), "mq_timedreceive": (243, 183),
    "mq_notify": (244, 184), "mq_getsetattr": (245, 185),
    "memfd_create": (319, 279), "memfd_secret": (447, 447), "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    # pages held by reference in a pipe, past munmap and outside RLIMIT_AS: vmsplice of a 4 KiB piece kept a
    # whole 2 MiB huge page alive (718 MiB under a 256 MiB limit); splice, tee and sendfile (which splices
    # into a pipe) hold page-cache folios the same way. Written data is copied instead: bounded by capacity.
    "vmsplice": (278, 75), "splice": (275, 76), "tee": (276, 77), "sendfile": (40, 71),
    # kernel memory in /tmp the inode count misses: hard links (a dentry each) and extended attributes
    "link": (86, None), "linkat": (265, 37), "setxattr": (188, 5), "lsetxattr": (189, 6), "fsetxattr": (190, 7),
    # host-wide budgets a run could exhaust for everyone (fs.aio-max-nr, the uid's inotify instances and
    # watches: a root caller's run counts as the host's root) and POSIX timers (kernel memory, no rlimit)
    "io_setup": (206, 0), "inotify_init": (253, None), "inotify_init1": (294, 26), "inotify_add_watch": (254, 27),
    "timer_create": (222, 107),
    # kernel keyrings, BPF, perf, execution domains
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218), "bpf": (321, 280),
    "perf_event_open": (298, 241), "personality": (135, 92), "modify_ldt": (154, None), "uselib": (134, None),
    # namespaces and mounts
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39), "pivot_root": (155, 41),
    "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429), "fsopen": (430, 430),
    "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433), "mount_setattr": (442, 442),
    "name_to_handle_at": (303, 264), "open_by_handle_at": (304, 265),
    # the machine (all need capabilities the sandbox lacks; denied anyway)
    "kexec_load": (246, 104), "kexec_file_load": (320, 294), "init_module": (175, 105),
    "finit_module": (313, 273), "delete_module": (176, 106), "reboot": (169, 142), "swapon": (167, 224),
    "swapoff": (168, 225), "acct": (163, 89), "quotactl": (179, 60), "fanotify_init": (300, 262),
}  # fmt: skip
_EXEC = {"x86_64": (59, 322), "aarch64": (221, 281)}  # execve, execveat
_CLONE_THREAD = 0x00010000
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
_CLONE_NEW = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000 | 0x80
_RET_ALLOW, _RET_KILL = 0x7FFF0000, 0x80000000
_EPERM, _EAGAIN, _ENOSYS, _EAFNOSUPPORT = 1, 11, 38, 97
_AF_UNIX, _AF_NETLINK = 1, 16
# Syscalls allowed only for some families (args[0]), else EAFNOSUPPORT: name -> ((x86_64, aarch64), families).
# A TCP connection on the sandbox's own loopback queues ~4 MiB of kernel buffers that RLIMIT_AS does not
# count (28 of them: 104 MiB), and there is no network anyway; socketpair(2) exists for AF_UNIX only.
_FAMILIES: dict[str, tuple[tuple[int, int], tuple[int, ...]]] = {
    "socket": ((41, 198), (_AF_UNIX, _AF_NETLINK)),  # AF_NETLINK: if_nameindex
    "socketpair": ((53, 199), (_AF_UNIX,)),
}
# Syscalls refused (EPERM) for some values of one argument: name -> ((x86_64, aarch64), argument, values).
# fcntl: F_SETLEASE (leases, the host's lease-break machinery), F_NOTIFY (dnotify) and F_SETPIPE_SZ (a pipe
# stays at its 64 KiB, not pipe-max-size's 1 MiB, which also fed the uid's pipe-user-pages budget). prctl:
# PR_SET_PDEATHSIG (the run would outlive bwrap) and PR_SET_DUMPABLE (hiding /proc/PID from the parent).
# setsockopt: SO_SNDBUF, SO_RCVBUF and their FORCE twins, whatever the level (only AF_UNIX and AF_NETLINK
# sockets exist here; SOL_NETLINK's 7 and 8 are NETLINK_LISTEN_ALL_NSID and a get-only option), so a socket
# keeps net.core.wmem_default's buffer instead of 2 x wmem_max (8 MiB on a 4 MiB host): 31 socketpairs queued
# 486 MiB before this. The kernel reads these arguments as 32-bit ints: the low word is the whole value.
_ARGUMENTS: dict[str, tuple[tuple[int, int], int, tuple[int, ...]]] = {
    "fcntl": ((72, 25), 1, (1024, 1026, 1031)),
    "prctl": (_PRCTL := (157, 167), 0, (1, 4)),
    "setsockopt": ((54, 208), 2, (7, 8, 32, 33)),
}
_PR_SET_THP_DISABLE = 41  # set by the driver before the code runs; the exec filter refuses it afterwards


def _ret_errno(errno: int) -> int:
    return 0x00050000 | errno


def _assemble(prog: list[tuple[int, Any, Any, int]], labels: dict[str, int]) -> bytes:
    """Resolve symbolic jump targets (label names) to relative offsets and pack ``sock_filter`` entries."""
    where = {name: len(prog) + i for i, name in enumerate(labels)}
    prog = prog + [(0x06, 0, 0, k) for k in labels.values()]
    out = b""
    for pc, (code, jt, jf, k) in enumerate(prog):
        jt = where[jt] - pc - 1 if isinstance(jt, str) else jt
        jf = where[jf] - pc - 1 if isinstance(jf, str) else jf
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp jump out of range")
        out += struct.pack("=HBBI", code, jt, jf, k)
    return out


def _check_machine(machine: str | None) -> str:
    machine = machine or os.uname().machine
    if machine not in _AUDIT_ARCH:
        raise ValueError(f"no seccomp filter for architecture {machine!r}")
    return machine


def _argument_rules(column: int) -> list[tuple[int, Any, Any, int]]:
    """The rules of :data:`_FAMILIES` and :data:`_ARGUMENTS`; each ends with the accumulator holding ``nr`` again."""
    ld, jeq = 0x20, 0x15
    out: list[tuple[int, Any, Any, int]] = []
    for nrs, families in _FAMILIES.values():
        checks = [(jeq, "allow", 0, f) for f in families[:-1]] + [(jeq, "allow", "eafnosupport", families[-1])]
        out += [(jeq, 0, 1 + len(checks), nrs[column]), (ld, 0, 0, 16), *checks]
    for nrs, arg, values in _ARGUMENTS.values():
        checks = [(jeq, "eperm", 0, v) for v in values[:-1]] + [(jeq, "eperm", "allow", values[-1])]
        out += [(jeq, 0, 1 + len(checks), nrs[column]), (ld, 0, 0, 16 + 8 * arg), *checks] if values else []
    return out


def no_fork_filter(machine: str | None = None) -> bytes:
    """The sandbox's classic-BPF seccomp program (as ``seccomp_export_bpf`` writes it), loaded by bubblewrap.

    ``seccomp_data`` layout: ``nr`` at offset 0, ``arch`` at 4, ``args[i]`` at
    ``16 + 8 i`` (low 32 bits first, little-endian). Rules, in order: a foreign
    architecture is killed (no i386 ``int 0x80`` door); x32 syscalls
    (``nr >= 0x40000000``) and ``clone3`` (whose flags live in memory a filter
    cannot read) get ENOSYS; ``fork``/``vfork`` get EAGAIN; the syscalls of
    :data:`_DENIED` get EPERM; ``socket``/``socketpair`` of a family not in
    :data:`_FAMILIES` get EAFNOSUPPORT; the ``fcntl``/``prctl`` operations of
    :data:`_ARGUMENTS` get EPERM; ``clone`` is allowed only with ``CLONE_THREAD``
    and no ``CLONE_NEW*`` flag in ``args[0]`` (else EAGAIN / EPERM); all else is
    allowed. It is a deny-list: a syscall not named here is the kernel's to police
    (namespaces, no capabilities, rlimits).
    """
    machine = _check_machine(machine)
    clone, clone3, forks = _NR[machine]
    column = 0 if machine == "x86_64" else 1
    denied = sorted({nrs[column] for nrs in _DENIED.values() if nrs[column] is not None})
    ld, jeq, jge, jset = 0x20, 0x15, 0x35, 0x45
    prog: list[tuple[int, Any, Any, int]] = [
        (ld, 0, 0, 4),
        (jeq, 0, "kill", _AUDIT_ARCH[machine]),
        (ld, 0, 0, 0),
        (jge, "enosys", 0, 0x40000000),
        (jeq, "enosys", 0, clone3),
        *[(jeq, "eagain", 0, nr) for nr in forks],
        *[(jeq, "eperm", 0, nr) for nr in denied],
        *_argument_rules(column),
        (jeq, 0, "allow", clone),
        (ld, 0, 0, 16),
        (jset, "eperm", 0, _CLONE_NEW),
        (jset, "allow", "eagain", _CLONE_THREAD),
    ]
    labels = {"allow": _RET_ALLOW, "eagain": _ret_errno(_EAGAIN), "enosys": _ret_errno(_ENOSYS),
              "eperm": _ret_errno(_EPERM), "eafnosupport": _ret_errno(_EAFNOSUPPORT), "kill": _RET_KILL}  # fmt: skip
    return _assemble(prog, labels)


def no_exec_filter(machine: str | None = None) -> bytes:
    """A second filter, stacked by the driver once the interpreter runs: ``execve``/``execveat`` get EPERM,
    and so does ``prctl(PR_SET_THP_DISABLE)``.

    bubblewrap's filter is loaded before bubblewrap execs the interpreter, so it
    must allow that one exec; this one closes the door behind it (no binary under
    ``/usr`` can replace the interpreter). The driver turns transparent huge pages
    off for the run just before (a huge page's 2 MiB stand behind any 4 KiB of it
    that something still holds); this filter keeps the code from turning them back on.
    """
    machine = _check_machine(machine)
    column = 0 if machine == "x86_64" else 1
    ld, jeq = 0x20, 0x15
    prctl = _PRCTL[column]
    prog: list[tuple[int, Any, Any, int]] = [
        (ld, 0, 0, 4),
        (jeq, 0, "kill", _AUDIT_ARCH[machine]),
        (ld, 0, 0, 0),
        *[(jeq, "eperm", 0, nr) for nr in _EXEC[machine]],
        (jeq, 0, "allow", prctl),
        (ld, 0, 0, 16),
        (jeq, "eperm", "allow", _PR_SET_THP_DISABLE),
    ]
    return _assemble(prog, {"eperm": _ret_errno(_EPERM), "allow": _RET_ALLOW, "kill": _RET_KILL})
