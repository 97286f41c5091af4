"""The parent's outside view of a worker's confinement: which process is the confined worker, and what the
kernel says about it.

A worker's keeper (the process the parent started or was handed by the fork server) has exactly one child, the
confined worker (:mod:`harness.execute.boundary.enter`). What the worker reports about its confinement is sent
before any candidate code runs; :func:`observe` checks it against ``/proc/PID/ns/*`` and ``/proc/PID/status``
all the same, so the record says what the kernel enforces, not what a message said.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

NAMESPACES = {"user": "user", "pid": "pid", "mount": "mnt", "net": "net", "ipc": "ipc", "uts": "uts"}


@dataclass(frozen=True, slots=True)
class Observed:
    """What the kernel shows of one process, from outside."""

    namespaces: tuple[str, ...]
    """Namespaces it does not share with the parent."""
    no_new_privs: bool
    seccomp_filter: bool
    """``Seccomp: 2`` (a filter is loaded)."""
    capabilities: bool
    """Any capability left in its effective, permitted or bounding set."""

    def mismatch(self, claimed_namespaces: tuple[str, ...], claimed_seccomp: bool, claimed_dropped: bool) -> list[str]:
        """Parts the worker reported that the kernel does not show (empty when its report holds)."""
        out = [f"{ns} namespace" for ns in claimed_namespaces if ns in NAMESPACES and ns not in self.namespaces]
        if claimed_seccomp and not self.seccomp_filter:
            out.append("seccomp filter")
        if claimed_dropped and (self.capabilities or not self.no_new_privs):
            out.append("dropped privileges")
        return out


def confined_pid(keeper: int) -> int | None:
    """The keeper's one child (the confined worker), or None (not started yet, or already gone)."""
    try:
        with open(f"/proc/{keeper}/task/{keeper}/children", "rb") as f:
            kids = [int(x) for x in f.read().split()]
    except (OSError, ValueError):
        return None
    return kids[0] if len(kids) == 1 else None


def observe(pid: int) -> Observed | None:
    """The kernel's view of ``pid`` (None when it is gone, or going: a process that is exiting has already
    dropped its mount, network, IPC and UTS namespaces, whose links then read as ENOENT while its user and PID
    links still read; that is a dying worker, not a confinement that was never in force)."""
    own = {}
    for name, link in NAMESPACES.items():
        try:
            own[name] = (os.readlink(f"/proc/self/ns/{link}"), os.readlink(f"/proc/{pid}/ns/{link}"))
        except FileNotFoundError:
            return None
        except OSError:  # e.g. EACCES: unknown, so not counted as in force
            own[name] = None
    fields: dict[str, str] = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields[key] = value.strip()
    except OSError:
        return None
    caps = any(int(fields.get(k, "0"), 16) for k in ("CapEff", "CapPrm", "CapBnd"))
    return Observed(namespaces=tuple(n for n, v in own.items() if v is not None and v[0] != v[1]),
                    no_new_privs=fields.get("NoNewPrivs") == "1", seccomp_filter=fields.get("Seccomp") == "2",
                    capabilities=caps)


def live_descendants(pid: int) -> list[int]:
    """Descendants of ``pid`` that are alive, read from ``/proc``: any thread of theirs not a zombie (a process whose
    first thread ended shows its leader as a zombie while its other threads run on)."""
    from harness.execute.parent.freeze import _state, _tasks, tree

    return [child for child in tree(pid)[1:] if any(_state(child, tid) not in "ZXx" for tid in _tasks(child))]


def channel_holders(pids: list[int], inodes: tuple[int, ...]) -> dict[int, list[tuple[int, int]]]:
    """{pipe inode: [(pid, fd), ...]}: every descriptor of ``pids`` open on one of ``inodes`` (read from
    ``/proc/PID/fd``; a process whose table cannot be read is listed with fd -1)."""
    want = {f"pipe:[{ino}]": ino for ino in inodes}
    out: dict[int, list[tuple[int, int]]] = {ino: [] for ino in inodes}
    for pid in pids:
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except FileNotFoundError:
            continue
        except OSError:
            for ino in inodes:
                out[ino].append((pid, -1))
            continue
        for name in names:
            try:
                ino = want.get(os.readlink(f"/proc/{pid}/fd/{name}"))
            except OSError:
                continue
            if ino is not None:
                out[ino].append((pid, int(name)))
    return out


def channel_tampering(worker: int, pids: list[int], expected: dict[int, int]) -> list[str]:
    """What is wrong with the worker's channel in a stopped tree: ``expected`` maps each of the parent's pipe
    inodes to the worker's descriptor on it (as the worker reported before its candidate ran). Each must still be
    that descriptor, and no other descriptor of the tree may be open on the pipe (a relay moves the pipe to a
    descriptor of its own and puts another pipe in its place, or keeps a second one to read or write behind the
    worker's back). Empty when intact."""
    holders = channel_holders(pids, tuple(expected))
    out = []
    for ino, fd in expected.items():
        got = holders[ino]
        if (worker, -1) in got:
            continue  # the table cannot be read (not dumpable without a PID namespace): nothing to compare
        if (worker, fd) not in got:
            out.append(f"descriptor {fd} of the worker is no longer the parent's pipe")
        out += [f"process {pid} holds the parent's pipe at descriptor {d}" for pid, d in got
                if (pid, d) != (worker, fd) and d >= 0]
    return out
