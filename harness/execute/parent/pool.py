"""Pre-started workers per device, so a candidate does not wait for an interpreter.

A pre-started worker has already applied its resource limits and Landlock
sandbox (granting read access to every problem folder of the run), installed
its audit hooks, imported torch and Triton, built Triton's driver helpers and
created its CUDA context (TileLang, about 2.7 s of a warm-up on the H200, is
imported once the worker's candidate turns out to be TileLang, before that
candidate is imported: Triton candidates never pay for it); it waits for one
candidate's spec, serves that candidate only, and exits like any worker.
Every worker taken is replaced at once, up to ``size`` idle or starting.
Given the device's gate, a worker makes its CUDA context and profiler only
while the pool holds a background place in it for the worker (:func:`harness.execute.parent.process.wait_ready`):
never while a workload on that GPU is timed.
Nothing about the candidate is known to the worker before its spec, so the
isolation guarantees are those of a freshly spawned worker. Workers are forked
from the run's fork server (:mod:`harness.execute.parent.forks`) unless the run
says ``--spawn exec``: the import of torch and Triton, about 5 s of a warm-up
on an H200 host, is then paid once per run.

A worker counts as idle only once it has written its warm line
(:func:`harness.execute.wire.protocol.warm_line`, with the seconds each warm-up
step took), so a session is handed a worker that is ready, the oldest first,
instead of the one it happened to spawn. At most ``max_starting`` warm up at
once: twice the cores by default, in effect no limit below the pool's size.
Measured on an H200 host: a quarter of its cores (4 of 16) made the
warm-ups the bottleneck of a 12-job run (the median candidate waited 16.7 s
for a worker; 2,302 evaluations per GPU-hour against 2,905 with no limit),
because one warm-up takes about 12 s even when few run beside it; one per
core (2) made the CPU test suite's whole-evaluation tests 15-25% slower on
a 2-core machine.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from harness.execute.parent.options import RunOptions
from harness.execute.parent.children import kill_group
from harness.execute.parent.process import WorkerProc, make_scratch, spawn_worker, wait_ready

WARM_TIMEOUT_S = 300.0
"""A pre-started worker not warm by then is discarded (a hung CUDA context, a stuck import)."""
MAX_FAILED_STARTS = 3
"""Pre-started workers that died or hung in a row before the pool stops starting them; sessions then spawn
their own workers, whose failure is reported on the record (a broken environment, not a candidate)."""


def default_max_starting() -> int:
    """Workers warming up at once: twice this machine's cores, at least 4 (in effect no limit below a pool's
    usual size: fewer starved the runs that were measured, see the module docstring)."""
    return max(4, 2 * (os.cpu_count() or 2))


def _altered(w: WorkerProc) -> list[str]:
    """How the confined worker's scheduling, niceness, limits or cores differ from when it was warm (recorded by
    :meth:`WorkerPool._spawn`); a worker that is not there counts as altered. Such a worker is discarded, never
    handed a candidate: whatever changed it would bias that candidate's run."""
    from harness.execute.parent import vitals

    pid = w.confined_pid()
    now = vitals.read(pid) if pid is not None else None
    if now is None:
        return ["gone"]
    return w.vitals.changes(now) if w.vitals is not None else []


def _forked(w: WorkerProc) -> bool:
    from harness.execute.parent.forks import ForkedProc

    return isinstance(w.proc, ForkedProc)


class Demand:
    """How many candidates of the run still need a worker, shared by the devices' pools: a pool
    never keeps more workers ready than candidates are left (a small run starts no spares), unless
    ``standing``: a long-lived caller (a service lane's kept executor) expects more runs, so its pools
    stay full between them."""

    def __init__(self, candidates: int, standing: bool = False):
        self._left = max(0, candidates)
        self.standing = standing
        self._lock = threading.Lock()

    @property
    def left(self) -> int:
        return 1 << 30 if self.standing else self._left

    def take(self) -> None:
        with self._lock:
            self._left = max(0, self._left - 1)

    def add(self, n: int) -> None:
        with self._lock:
            self._left += max(0, n)


def prestart_settings(opts: RunOptions, problem_paths: list[Path]) -> dict:
    """What a pre-started worker is told before any candidate exists (and nothing about one)."""
    return {"device": opts.device, "isolation": opts.isolation_level, "max_file_bytes": opts.max_file_bytes,
            "problem_paths": sorted({str(Path(p)) for p in problem_paths}), "cpu_threads": opts.cpu_threads}


class WorkerPool:
    def __init__(self, opts: RunOptions, gpu: int | None, root: Path, tag: str, problem_paths: list[Path], size: int,
                 demand: Demand | None = None, max_starting: int | None = None,
                 warm_timeout_s: float = WARM_TIMEOUT_S, cpus: Any = None, gate: Any = None):
        self.o, self.gpu, self.root, self.tag, self.size = opts, gpu, root, tag, max(0, size)
        self.cpus = cpus
        self.gate = gate
        self.demand = demand or Demand(1 << 30)
        self.prestart = {**prestart_settings(opts, problem_paths), "gpu_gate": gate is not None}
        self.max_starting = max(1, max_starting or default_max_starting())
        self.warm_timeout_s = warm_timeout_s
        self._idle: list[WorkerProc] = []
        self._warming: list[WorkerProc] = []  # spawned, warm line not read yet: close() kills them too
        self._starting = 0
        self._failed_in_a_row = 0
        self._fork_failed = ""  # why the last forked worker did not warm up, until an exec start tells why
        self._closed = False
        self._lock = threading.Condition()
        self._fill()

    @property
    def broken(self) -> bool:
        """True once :data:`MAX_FAILED_STARTS` pre-started workers in a row failed to warm up."""
        return self._failed_in_a_row >= MAX_FAILED_STARTS

    def _fill(self) -> None:
        """Start workers until ``size`` are idle or warming (no more than candidates are left, no more than
        ``max_starting`` warming at once)."""
        while True:
            with self._lock:
                if (self._closed or self.broken or self._starting >= self.max_starting
                        or len(self._idle) + self._starting >= min(self.size, self.demand.left)):
                    return
                self._starting += 1
            threading.Thread(target=self._spawn, daemon=True).start()

    def refill(self) -> None:
        """Start workers for candidates added to the demand since the last take (a kept executor's next run)."""
        self._fill()

    def _spawn(self) -> None:
        w = None
        warm = False
        with self._lock:
            fork = self.o.spawn == "fork" and not self._fork_failed
        try:
            w = spawn_worker(make_scratch(self.root, f"{self.tag}-pool"), self.o.device, self.gpu, self.prestart,
                             self.o.cpu_threads, cpus=self.cpus, fork=fork)
            with self._lock:
                self._warming.append(w)
                closed = self._closed
            warm = not closed and wait_ready(w, self.warm_timeout_s, self.gate)  # the pipe ends if close() kills it
        except OSError:
            pass
        forked = w is not None and _forked(w)
        with self._lock:
            if w is not None and w in self._warming:
                self._warming.remove(w)
            self._starting -= 1
            if forked and not warm and not self._closed:
                # not counted: the next start is by exec, and tells a broken fork image from a broken setting
                self._fork_failed = f"a forked worker did not warm up: {w.err_buf.text()[-300:]!r}"
            else:
                self._failed_in_a_row = 0 if warm else self._failed_in_a_row + 1
                if not fork and self._fork_failed:
                    if warm:  # exec works where fork did not: the fork server's image is unusable here
                        self._give_up_forking(self._fork_failed)
                    else:  # exec fails too: the settings or the machine, not the fork; forking goes on
                        self._fork_failed = ""
            if warm and w is not None and not self._closed:
                from harness.execute.parent import vitals

                pid = w.confined_pid()
                w.vitals = vitals.read(pid) if pid is not None else None
                self._idle.append(w)
                w = None
            self._lock.notify_all()
        if w is not None:
            w.discard()
        self._fill()

    @staticmethod
    def _give_up_forking(why: str) -> None:
        """Every later worker of this process is started with exec (a library the fork server imported broke
        its children here, say); the pool's own flag stays set, so this pool never forks again either."""
        from harness.execute.parent import forks as forkserver

        forkserver.give_up(why)

    def take(self, wait_s: float = 120.0) -> WorkerProc | None:
        """A pre-started, warm worker (oldest first), or None; either way a replacement starts.

        When none is idle but some are warming up, waits for one (up to ``wait_s``): it
        started earlier than a worker spawned now would, so waiting is never slower.
        """
        self.demand.take()
        got = None
        deadline = time.monotonic() + wait_s
        with self._lock:
            while got is None and not self._closed:
                while self._idle and got is None:
                    w = self._idle.pop(0)
                    if w.proc.poll() is None and not _altered(w):
                        got = w
                    else:
                        threading.Thread(target=w.discard, daemon=True).start()
                left = deadline - time.monotonic()
                if got is not None or self._starting == 0 or left <= 0:
                    break
                self._lock.wait(timeout=left)
        self._fill()
        return got

    def close(self, timeout_s: float = 30.0) -> None:
        """Kill every idle worker at once and reap them side by side (a worker with a CUDA
        context can take a second or two to exit; one after the other, eight took > 9 s)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
            warming = list(self._warming)
            self._lock.notify_all()
        for w in warming:
            # still warming up: killed only, so the thread reading its warm line sees the pipe end and discards it
            # (closing the pipe here could hand its number to another thread's new file mid-read)
            kill_group(w.proc)
        reapers = [threading.Thread(target=w.discard, daemon=True) for w in idle]
        for t in reapers:
            t.start()
        deadline = time.monotonic() + timeout_s
        for t in reapers:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
