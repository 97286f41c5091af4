"""Process trees: the child-subreaper flag, a process's descendants read from ``/proc``, and a kill of a whole tree.

Why: a process group is not a tree. A candidate that starts ``sh -c 'setsid sleep 97 &'`` leaves a ``sleep``
in a session and group of its own, whose parent (``sh``) is gone: the kernel hands such an orphan to the
nearest ancestor marked *child subreaper* (``prctl(PR_SET_CHILD_SUBREAPER)``), or to init when there is none.
So a worker marks itself before any candidate code runs (:func:`set_subreaper`): every orphan of its
candidate's processes becomes the worker's own child, stays in its tree while the worker lives, and dies with
it when the parent ends the worker (:func:`kill_tree`, called by :func:`harness.execute.parent.children.kill_group`).
The fork server marks itself too: orphans of a worker that ended (or that cleared its own flag) go to it, and
it kills every child it did not fork (:mod:`harness.execute.forkserver.server`).

Linux only: elsewhere :func:`set_subreaper` does nothing and returns False (there is no such flag), and
:func:`children` / :func:`descendants` find nothing (there is no ``/proc``), so :func:`kill_tree` kills only
the process itself. Nothing happens at import.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterable

PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
KILL_ROUNDS = 20
"""Scans of a tree in one :func:`kill_tree`: each kills what the last missed (a child forked meanwhile)."""


def _prctl():
    """libc's ``prctl``, or None where there is none (not Linux, no libc)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.prctl
    except (OSError, AttributeError):
        return None
    fn.restype = ctypes.c_int
    return fn


def set_subreaper() -> bool:
    """Mark this process a child subreaper: orphans among its descendants become its children instead of
    init's. True when the flag is set; False where it cannot be (not Linux, no libc, a kernel before 3.4).

    The flag is per process, not inherited by children (``fork``) and kept across ``exec``."""
    import ctypes

    fn = _prctl()
    if fn is None:
        return False
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    return fn(ctypes.c_int(PR_SET_CHILD_SUBREAPER), one, zero, zero, zero) == 0


def is_subreaper() -> bool:
    """Whether this process is a child subreaper (False where the flag does not exist)."""
    import ctypes

    fn = _prctl()
    if fn is None:
        return False
    flag = ctypes.c_int(0)
    zero = ctypes.c_ulong(0)
    if fn(ctypes.c_int(PR_GET_CHILD_SUBREAPER), ctypes.byref(flag), zero, zero, zero) != 0:
        return False
    return bool(flag.value)


def parse_stat(line: bytes) -> tuple[int, str, str, int]:
    """``(pid, comm, state, ppid)`` of a ``/proc/PID/stat`` line.

    The command name (``comm``, in parentheses) is chosen by the process and may hold spaces and parentheses
    (``prctl(PR_SET_NAME)``, ``/proc/self/comm``): a name such as ``x) Z 1 (y`` would make a parser that splits
    at the first ``)`` read state ``Z`` and parent 1. Only the last ``)`` ends it. Raises ValueError on a
    line that is not a stat line."""
    head, sep, tail = line.rpartition(b")")
    pid, open_paren, comm = head.partition(b" (")
    fields = tail.split()
    if not sep or not open_paren or len(fields) < 2:
        raise ValueError(f"not a /proc/PID/stat line: {line[:120]!r}")
    return int(pid), comm.decode(errors="replace"), fields[0].decode(errors="replace"), int(fields[1])


def _stat(pid: int) -> tuple[int, str, str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return parse_stat(f.read())
    except (OSError, ValueError):
        return None


def parent_map() -> dict[int, tuple[int, str]]:
    """``{pid: (ppid, state)}`` of every process this one can see in ``/proc`` (empty where there is none):
    one scan, a file per process."""
    out: dict[int, tuple[int, str]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for entry in entries:
        if entry.isdigit():
            st = _stat(int(entry))
            if st is not None:
                out[st[0]] = (st[3], st[2])
    return out


def _task_children(pid: int) -> list[int] | None:
    """Children of ``pid`` from ``/proc/PID/task/TID/children`` (one small file per thread); None when the
    kernel has no such files (built without ``CONFIG_PROC_CHILDREN``): the caller scans ``/proc`` instead."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # gone, or not visible
    out: list[int] = []
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(p) for p in f.read().split())
        except FileNotFoundError:
            if os.path.isdir(f"/proc/{pid}/task/{tid}"):
                return None  # the thread is there, its children file is not
        except (OSError, ValueError):
            continue  # the thread ended meanwhile
    return out


def children(pid: int) -> list[int]:
    """Pids of ``pid``'s children (zombies included), in any session or group; [] when it is gone."""
    got = _task_children(pid)
    if got is not None:
        return got
    return [p for p, (ppid, _) in parent_map().items() if ppid == pid]


def descendants(pid: int, spare: Iterable[int] = ()) -> list[int]:
    """Pids of ``pid``'s children, their children and so on (zombies included), nearest first; the subtree
    of a pid in ``spare`` is left out, that pid included."""
    spared = set(spare)
    found: list[int] = []
    seen = {pid}
    first = _task_children(pid)
    if first is None:  # no children files: one scan serves the whole tree
        kids_of: dict[int, list[int]] = {}
        for p, (ppid, _) in parent_map().items():
            kids_of.setdefault(ppid, []).append(p)
        step = lambda p: kids_of.get(p, [])  # noqa: E731
    else:
        step = lambda p: first if p == pid else (_task_children(p) or [])  # noqa: E731
    frontier = [pid]
    while frontier:
        nxt: list[int] = []
        for parent in frontier:
            for kid in step(parent):
                if kid in seen or kid in spared:
                    continue
                seen.add(kid)
                found.append(kid)
                nxt.append(kid)
        frontier = nxt
    return found


def _running(pid: int) -> bool:
    """Not yet dead: present in ``/proc`` and neither a zombie (``Z``) nor dying (``X``)."""
    st = _stat(pid)
    return st is not None and st[2] not in ("Z", "X")


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def kill_tree(pid: int, spare: Iterable[int] = (), itself: bool = True) -> int:
    """SIGKILL every descendant of ``pid`` (whatever its session or group), then ``pid`` itself unless
    ``itself`` is False; returns how many processes were signalled. Processes that end meanwhile, and those
    this one may not signal, are skipped. The subtrees of pids in ``spare`` are left alone (workers of a fork
    server being closed: their owners end them).

    How: ``pid`` is stopped first (SIGSTOP), so it starts no child while its tree is killed and stays alive to
    adopt the orphans of each kill (when it is a subreaper); then the tree is scanned and killed again until a
    scan finds nothing running (at most :data:`KILL_ROUNDS` scans), and ``pid`` last. Killing ``pid`` first
    would hand its descendants to init. The caller must own ``pid`` (an unreaped child: its pid cannot have
    been reused)."""
    spare = frozenset(spare)
    killed: set[int] = set()
    if itself:
        _signal(pid, signal.SIGSTOP)
    for round_ in range(KILL_ROUNDS):
        alive = [p for p in descendants(pid, spare) if _running(p)]
        if not alive:
            break
        killed.update(p for p in alive if _signal(p, signal.SIGKILL))
        time.sleep(0.0005 * (round_ + 1))  # a SIGKILL lands asynchronously: give the exits a moment
    if itself and _signal(pid, signal.SIGKILL):
        killed.add(pid)
    return len(killed)
