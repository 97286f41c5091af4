"""Stopping a worker's whole process tree while the checker reads what it committed, and letting it run again.

:func:`freeze` sends SIGSTOP to the confined worker and to every descendant it has (in its own PID namespace
every process the candidate starts is one), and returns once every thread of every one of them is stopped; a
process started meanwhile is found by the next pass over the tree, and passes repeat until one finds nothing
running. SIGSTOP cannot be caught or ignored, and a stopped process sends nothing. The kernel itself can still
deliver a SIGCONT the tree armed beforehand (a lease-break or I/O signal set with ``F_SETSIG``, a POSIX timer):
the seccomp filter refuses the obvious routes, and :class:`Frozen` records every thread's CPU time when the tree
is stopped, so :meth:`Frozen.ran` tells afterwards whether any of it ran (``/proc/PID/task/TID/schedstat``, in
nanoseconds), whatever woke it, and which processes and threads exited since. :func:`thaw` sends SIGCONT. Works
unprivileged and as root; needs no cgroup.

A thread in uninterruptible sleep (``D``) cannot take SIGSTOP until its system call ends, and one waiting in
``vfork`` for a child the freeze stopped never ends it (an honest ``subprocess`` call on a thread does this). Such a
thread runs no user code while its process has a stop pending (the stop is taken on the way back to user mode), so
a ``D`` thread whose CPU time has not moved for :data:`SETTLE_S` counts as stopped; :meth:`Frozen.ran` then
accepts it still asleep or stopped, and anything else as having run.

Reads ``/proc/PID/task/TID/children``, ``stat`` and ``schedstat`` (Linux 3.5+). Nothing happens at import.
"""

from __future__ import annotations

import os
import signal
import time

FREEZE_TIMEOUT_S = 5.0
"""An honest worker, idle in a read of its pipe once it has committed, stops within milliseconds; one whose tree
is not stopped by then is ended (a thread held in the kernel, a tree that keeps growing)."""
_STOPPED = frozenset("TtZXx")
"""Task states that run no user code: stopped (T), traced (t), dead or zombie."""
_ASLEEP = "D"
"""Uninterruptible sleep: counts as stopped once its CPU time has not moved for :data:`SETTLE_S`."""
_DEAD = frozenset("ZXx")
SETTLE_S = 0.05
"""How long a ``D`` thread's CPU time must stand still before it counts as stopped (a vfork wait is idle; a thread
finishing an ordinary disk read or driver call leaves ``D`` well within it)."""


class FreezeError(RuntimeError):
    """The tree could not be stopped in time (the worker is then ended by the caller)."""


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for tid in _tasks(pid):
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except (OSError, ValueError):
            continue
    return out


def _state(pid: int, tid: str) -> str:
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0].decode()
    except (OSError, IndexError):
        return "X"  # gone


def tree(root: int) -> list[int]:
    """``root`` and its descendants, parents first."""
    seen, order, todo = set(), [], [root]
    while todo:
        pid = todo.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        order.append(pid)
        todo.extend(_children(pid))
    return order


def _all_stopped(pid: int, asleep: dict | None = None, now: float = 0.0) -> bool:
    """Every thread of ``pid`` stopped; with ``asleep`` (``(pid, tid) -> (first seen, CPU time)``, kept by the
    caller across passes), a ``D`` thread whose CPU time stood still for :data:`SETTLE_S` counts as stopped."""
    ok = True
    for tid in _tasks(pid):
        st = _state(pid, tid)
        if st in _STOPPED:
            continue
        if st == _ASLEEP and asleep is not None:
            rt = _runtime(pid, tid)
            seen = asleep.get((pid, tid))
            if seen is None or seen[1] != rt:
                asleep[(pid, tid)] = (now, rt)
                ok = False
            elif now - seen[0] < SETTLE_S:
                ok = False
            continue
        ok = False
    return ok


def _runtime(pid: int, tid: str) -> int | None:
    """Nanoseconds the thread has run on a CPU, or None (gone, or no schedstat on this kernel)."""
    try:
        with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[0])
    except (OSError, IndexError, ValueError):
        return None


class Frozen(list):
    """The pids :func:`freeze` stopped (a list, for :func:`thaw`), with every thread's state and CPU time once all
    were stopped."""

    def __init__(self, root: int, pids: list[int]):
        super().__init__(pids)
        self.root = root
        self.state = {(pid, tid): _state(pid, tid) for pid in pids for tid in _tasks(pid)}
        self.runtime = {key: _runtime(*key) for key in self.state}

    def ran(self) -> list[str]:
        """Why the tree is no longer what was stopped: a thread that ran (its CPU time grew), one that is not
        stopped, a process or thread that appeared, or one that exited (it must have run to do so: a stopped
        thread cannot exit, and nothing but the parent kills); empty when nothing of it ran since :func:`freeze`."""
        out = []
        now_tree = tree(self.root)
        for pid in now_tree:
            if pid not in self:
                out.append(f"process {pid} appeared")
                continue
            for tid in _tasks(pid):
                key = (pid, tid)
                if key not in self.state:
                    out.append(f"thread {tid} of process {pid} appeared")
                    continue
                now_state, was = _state(pid, tid), self.state[key]
                if was == _ASLEEP:  # its system call may end (kernel time), but no user code runs
                    if now_state not in _STOPPED and now_state != _ASLEEP:
                        out.append(f"thread {tid} of process {pid} left its system call and is running")
                    continue
                now, then = _runtime(pid, tid), self.runtime.get(key)
                if now is not None and then is not None and now > then:
                    out.append(f"thread {tid} of process {pid} ran {(now - then) / 1e3:.0f} us")
                elif now_state not in _STOPPED:
                    out.append(f"thread {tid} of process {pid} is running")
        alive_now = set(now_tree)
        for (pid, tid), was in self.state.items():
            if was in _DEAD:
                continue
            if pid not in alive_now:
                out.append(f"process {pid} exited")
            elif _state(pid, tid) in _DEAD:
                out.append(f"thread {tid} of process {pid} exited")
        return sorted(set(out))


def freeze(root: int, timeout_s: float = FREEZE_TIMEOUT_S) -> Frozen:
    """Stop ``root`` and its whole tree; returns the pids stopped (for :func:`thaw`, and :meth:`Frozen.ran`).
    Raises :class:`FreezeError` when the tree is not stopped within ``timeout_s`` (what was stopped stays stopped:
    the caller ends it), and ProcessLookupError when ``root`` is gone."""
    os.kill(root, signal.SIGSTOP)
    deadline = time.monotonic() + timeout_s
    stopped: list[int] = []
    known: set[int] = set()
    asleep: dict = {}
    while True:
        now = time.monotonic()
        running = False
        for pid in tree(root):
            if pid not in known:
                known.add(pid)
                stopped.append(pid)
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                running = True
            elif not _all_stopped(pid, asleep, now):
                running = True
                try:
                    os.kill(pid, signal.SIGSTOP)  # continued by a process that ran until its own stop
                except ProcessLookupError:
                    pass
        if not running and all(_all_stopped(pid, asleep, now) for pid in tree(root)) and set(tree(root)) <= known:
            return Frozen(root, stopped)
        if time.monotonic() > deadline:
            raise FreezeError(f"the worker's process tree ({len(known)} process(es)) did not stop within "
                              f"{timeout_s:.0f} s")
        time.sleep(0.0002)


def thaw(pids: list[int]) -> None:
    """Let stopped processes run again (those gone meanwhile are skipped)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
