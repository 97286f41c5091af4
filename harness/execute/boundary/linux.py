"""The Linux calls the boundary makes that Python's ``os`` module lacks before 3.12: ``unshare``, ``mount``,
``prctl``, ``capset``. A thin ``ctypes`` binding of libc's own functions (no system-call numbers, no structures
beyond the capability header), loaded on first use; nothing happens at import.

Each call raises :class:`OSError` with the errno and the call named, so a caller can say which part of the
boundary could not be had.
"""

from __future__ import annotations

import ctypes
import os
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = {"user": CLONE_NEWUSER, "pid": CLONE_NEWPID, "mount": CLONE_NEWNS, "net": CLONE_NEWNET,
                   "ipc": CLONE_NEWIPC, "uts": CLONE_NEWUTS}
"""The namespaces a worker gets, by the name ``/proc/PID/ns/`` gives them (``mount`` is ``mnt`` there)."""
PROC_NS_NAMES = {"user": "user", "pid": "pid", "mount": "mnt", "net": "net", "ipc": "ipc", "uts": "uts"}

MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 8, 1 << 12, 1 << 14, 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522

_LIBC: list[Any] = []


def _libc() -> Any:
    if not _LIBC:
        _LIBC.append(ctypes.CDLL(None, use_errno=True))
    return _LIBC[0]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def supported() -> bool:
    """Linux, where all of these calls exist."""
    return sys.platform.startswith("linux")


def unshare(flags: int) -> None:
    """``unshare(2)``: the caller leaves its namespaces for new ones (a new PID namespace takes its next child)."""
    if hasattr(os, "unshare"):
        os.unshare(flags)
        return
    _check(_libc().unshare(ctypes.c_int(flags)), f"unshare({flags:#x})")


def mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    fs = fstype.encode() if fstype is not None else None
    _check(_libc().mount(source.encode(), target.encode(), fs, ctypes.c_ulong(flags),
                         data.encode() if data is not None else None),
           f"mount({source!r}, {target!r}, {fstype!r})")


def umount(target: str) -> None:
    """``umount2(target, MNT_DETACH)``."""
    _check(_libc().umount2(target.encode(), ctypes.c_int(2)), f"umount2({target!r})")


def prctl(option: int, arg2: int = 0) -> None:
    _check(_libc().prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0),
                         ctypes.c_ulong(0)), f"prctl({option}, {arg2})")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def clear_capabilities() -> None:
    """Empty the calling thread's effective, permitted and inheritable capability sets (``capset(2)``)."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc().capset(ctypes.byref(header), data), "capset(all empty)")


def last_capability() -> int:
    """The highest capability number this kernel knows."""
    try:
        with open("/proc/sys/kernel/cap_last_cap") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 40
