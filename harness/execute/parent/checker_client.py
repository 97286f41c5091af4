"""The parent's handle on the trusted checker processes of one device (a pool).

Each request goes to a free process, so the correctness phases that share a
GPU (:mod:`harness.execute.parent.gate`) are checked side by side. A workload's
requests prefer the process that served it last: that process has its
references and its library model cached (the candidates of one problem get
the same round seeds), so a problem's references are computed once per run.
A timing phase *leases* one process for its whole conversation (library
samples, kept outputs, verifications, batches), see :meth:`CheckerPool.lease`.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from harness.execute.parent.children import CappedBuffer, drain, kill_group, popen, scrubbed_env
from harness.execute.parent.vitals import Vitals
from harness.execute.parent.vitals import read as read_vitals
from harness.execute.wire import protocol as P
from harness.execute.wire.channel import ChannelError, Endpoint


class CheckerDied(RuntimeError):
    """A checker process ended or answered garbage: the harness's failure, never the candidate's."""


REPLY_TIMEOUT_S = 900.0
"""The longest the parent waits for one reply (a float64 reference of a large convolution on the CPU takes
minutes); a checker silent for longer is dead to it."""


class CheckerProcess:
    """One checker subprocess speaking :mod:`harness.execute.wire.protocol` on stdin/stdout."""

    def __init__(self, device: str, gpu: int | None, scratch: Path, threads: int = 1, cpus: Any = None):
        env = scrubbed_env(scratch, device, gpu, threads)
        env.pop("TRITON_INTERPRET", None)  # the checker never runs candidate kernels
        self.stderr = CappedBuffer()
        self.proc = popen([sys.executable, "-m", "harness.execute.checker.main"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=scratch)
        self.cpus = cpus
        if cpus is not None:
            cpus.confine(self.proc.pid)  # pinned to the reserved cores only while it serves a timing phase (harness.execute.parent.cpus)
        threading.Thread(target=drain, args=(self.proc.stderr, self.stderr), daemon=True).start()
        self.lock = threading.Lock()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.chan = Endpoint(self.proc.stdout.fileno(), self.proc.stdin.fileno())
        self.vitals: Vitals | None = None
        """Its scheduling and limits once it first answered (:meth:`altered` compares with them)."""

    def request(self, req: Any) -> Any:
        """Send one request, return its decoded reply (an :class:`protocol.ErrorReply` when it failed); a reply
        that does not come within :data:`REPLY_TIMEOUT_S`, or is not one, is :class:`CheckerDied`."""
        with self.lock:
            try:
                self.chan.send(P.encode(req), timeout_s=REPLY_TIMEOUT_S)
                raw = self.chan.recv(REPLY_TIMEOUT_S)
            except (ChannelError, OSError) as exc:
                raise CheckerDied(f"reference checker died or stalled ({exc}): " + self.stderr.text()[-2000:]) from None
            if self.vitals is None:
                self.vitals = read_vitals(self.proc.pid)
        try:
            return P.decode(raw, P.REPLY_FOR[type(req)])
        except P.ProtocolError as exc:
            raise CheckerDied(f"reference checker sent an unreadable reply ({exc})") from None

    def altered(self) -> list[str]:
        """How its scheduling policy, niceness or limits (and, where no CPU plan moves it, its cores) differ from
        what they were at its first answer; empty when they do not (or it has not answered yet)."""
        if self.vitals is None:
            return []
        now = read_vitals(self.proc.pid)
        if now is None:
            return ["gone"]
        return self.vitals.changes(now, affinity=self.cpus is None)

    def close_stdin(self) -> None:
        if self.proc.poll() is None and self.proc.stdin:
            try:
                self.proc.stdin.close()
            except OSError:
                pass


class CheckerPool:
    def __init__(self, device: str, gpu: int | None, scratch: Path, size: int = 1, threads: int = 1,
                 cpus: Any = None):
        scratch.mkdir(parents=True, exist_ok=True)
        for sub in ("tmp", "home", "cache"):
            (scratch / sub).mkdir(exist_ok=True)
        self._start = lambda: CheckerProcess(device, gpu, scratch, threads, cpus)
        self.procs = [self._start() for _ in range(max(1, size))]
        self.replaced: list[str] = []
        """Why each replaced checker was replaced (diagnostics)."""
        self._cv = threading.Condition()
        self._free: list[CheckerProcess] = list(self.procs)
        self._last: dict[str, CheckerProcess] = {}  # workload key -> the process that computed its references

    def _take(self, key: str) -> CheckerProcess:
        with self._cv:
            while not self._free:
                self._cv.wait()
            proc = self._last.get(key)
            if proc not in self._free:
                proc = self._free[0]
            self._free.remove(proc)
            self._last[key] = proc
            return proc

    def _give(self, proc: CheckerProcess) -> None:
        with self._cv:
            self._free.append(proc)
            self._cv.notify()

    def _replace(self, proc: CheckerProcess, why: str) -> CheckerProcess:
        """A fresh process in ``proc``'s place (``proc``, leased by the caller, is ended); the caller gives the
        new one back."""
        kill_group(proc.proc)
        fresh = self._start()
        with self._cv:
            self.procs[self.procs.index(proc)] = fresh
            self._last = {k: v for k, v in self._last.items() if v is not proc}
            self.replaced.append(why[:300])
        return fresh

    def request(self, req: Any, key: str) -> tuple[Any, float]:
        """(reply, seconds waited for a free process) for one request about workload ``key``. A checker that dies
        is replaced before :class:`CheckerDied` reaches the caller: the next request gets a fresh one."""
        t0 = time.monotonic()
        proc = self._take(key)
        waited = time.monotonic() - t0
        try:
            return proc.request(req), waited
        except CheckerDied as exc:
            proc = self._replace(proc, str(exc))
            raise
        finally:
            self._give(proc)

    @contextmanager
    def lease(self, key: str) -> Iterator[CheckerProcess]:
        """One process for a whole conversation (its kept outputs stay where they were made). One whose scheduling
        or limits were changed since it first answered is replaced first (a process outside the run's control
        re-limited or re-scheduled it: its library timings would be wrong); one that dies during the lease is
        replaced when it is given back."""
        proc = self._take(key)
        altered = proc.altered()
        if altered:
            proc = self._replace(proc, f"its {', '.join(altered)} had changed")
        try:
            yield proc
        except CheckerDied as exc:
            proc = self._replace(proc, str(exc))
            raise
        finally:
            self._give(proc)

    def close(self, timeout_s: float = 10.0) -> None:
        """End every checker: close their stdin, give them ``timeout_s`` in all, then kill the rest."""
        for p in self.procs:
            p.close_stdin()
        deadline = time.monotonic() + timeout_s
        for p in self.procs:
            try:
                p.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(p.proc)
            else:
                kill_group(p.proc)  # reaps, and forgets it in process.LIVE
