"""CPU cores kept for the timed pair: the GPU is exclusive while a workload is timed, and so are a few cores.

A timing phase measures the candidate's worker and the library's checker
calling their forwards; on a GPU, a host-bound forward (its launch takes
longer than its kernels) is scored on the parent's wall clock over batches of
calls, so how fast the host runs those two processes is part of the score.
Everything else a run does (neighbours warming up, compiling, being checked)
competes for the same cores. Plan (Linux, 8 or more usable cores)::

    reserved   2 cores (3 from 16 up) per GPU: no worker or checker may run there,
               except the worker and checker of the workload being timed on that GPU,
               which run only there while it is timed
    others     every other usable core: where every worker and checker runs otherwise

A process's affinity is set thread by thread (``/proc/PID/task``); threads
and children it starts later inherit it. Bug it stops: on the H200, with 12
jobs on 16 cores, a Triton 1x1 convolution (114 us on the GPU) took 465 us
per launch while its neighbours warmed up, so it was scored host-bound in
one run and on its CUDA events in the next (0.114 vs 0.424 ms, 272% apart).
A timed pair widened to every core, rather than pinned to the reserved ones,
left its threads where the scheduler put them, on a busy core: a TileLang
SwiGLU launched in 267 us per call (129 us on the GPU) and was scored
host-bound at 5x its time in another run.

Limits: a candidate can set its own affinity (``sched_setaffinity`` on its
own threads is allowed: thread pools pin theirs) and so run on reserved cores
while another workload is timed; that only takes CPU from a neighbour's
timing, which a candidate can do on any core by spinning.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

MIN_CPUS = 8
"""Below this many usable cores nothing is reserved (the CI machine has 2)."""


@dataclass(frozen=True, slots=True)
class CpuPlan:
    """The cores of one GPU's timed pair, and the cores every other process of the run is confined to."""

    reserved: frozenset[int]
    others: frozenset[int]

    def __post_init__(self) -> None:
        if not self.reserved or not self.others or self.reserved & self.others:
            raise ValueError(f"a CPU plan needs disjoint, non-empty reserved and other cores "
                             f"(got {sorted(self.reserved)} and {sorted(self.others)})")

    def confine(self, pid: int) -> int:
        """Keep ``pid`` (every thread) off the reserved cores; returns the threads set."""
        return set_affinity(pid, self.others)

    def pin(self, pid: int) -> int:
        """Run ``pid`` (every thread) on the reserved cores only, while its workload is timed."""
        return set_affinity(pid, self.reserved)


def plans(n_gpus: int, usable: set[int] | None = None) -> list[CpuPlan | None]:
    """One plan per GPU, reserved cores disjoint; ``None`` each when too few cores (or no affinity API)."""
    if not hasattr(os, "sched_getaffinity") or n_gpus < 1:
        return [None] * max(1, n_gpus)
    cpus = sorted(usable if usable is not None else os.sched_getaffinity(0))
    if len(cpus) < MIN_CPUS:
        return [None] * n_gpus
    per = 3 if len(cpus) // n_gpus >= 16 else 2
    if len(cpus) - per * n_gpus < len(cpus) // 2:
        return [None] * n_gpus  # reserving would take half the machine from compiles and checks
    reserved = [frozenset(cpus[len(cpus) - per * (g + 1): len(cpus) - per * g]) for g in range(n_gpus)]
    others = frozenset(cpus[: len(cpus) - per * n_gpus])
    return [CpuPlan(r, others) for r in reserved]


def set_affinity(pid: int, cpus: frozenset[int]) -> int:
    """Set the affinity of every thread of ``pid``; threads that ended meanwhile are skipped. Returns the
    number of threads set (0 when the process is gone, or ``pid`` is not a process: 0 would mean this one)."""
    if pid <= 0:
        return 0
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    done = 0
    for tid in tids:
        try:
            os.sched_setaffinity(tid, cpus)
            done += 1
        except OSError:  # the thread (or process) ended, or is not ours
            pass
    return done
