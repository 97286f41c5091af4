"""A process's scheduling and limits, read from outside, and whether they are still what they were.

The trusted side checks its own processes with this before it relies on them: a checker before each timing
phase (one whose policy, niceness, limits or cores were changed is replaced, :mod:`harness.execute.parent.checker_client`),
a pre-started worker before a candidate is handed to it (:mod:`harness.execute.parent.pool`). The OS boundary
already keeps workers from naming these processes; this catches anything else on the host that did, and the
harness's own mistakes, before they bias a measurement.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

LIMITS = ("RLIMIT_CPU", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_NOFILE", "RLIMIT_NPROC", "RLIMIT_FSIZE", "RLIMIT_STACK",
          "RLIMIT_MEMLOCK", "RLIMIT_RTPRIO", "RLIMIT_RTTIME")


@dataclass(frozen=True, slots=True)
class Vitals:
    """What the kernel will schedule and allow a process to use."""

    policy: int
    """``os.sched_getscheduler`` (``SCHED_OTHER`` 0, ``SCHED_IDLE`` 5, ...)."""
    nice: int
    affinity: frozenset[int]
    limits: tuple[tuple[str, int, int], ...]
    """(name, soft, hard) of each of :data:`LIMITS` this system has."""

    def changes(self, now: "Vitals", affinity: bool = True) -> list[str]:
        """What differs in ``now`` (empty when nothing); ``affinity=False`` leaves the cores out (a process whose
        cores the harness moves, or whose libraries pin their own threads)."""
        out = []
        if now.policy != self.policy:
            out.append(f"scheduling policy {self.policy} -> {now.policy}")
        if now.nice != self.nice:
            out.append(f"niceness {self.nice} -> {now.nice}")
        if affinity and now.affinity != self.affinity:
            out.append(f"cores {sorted(self.affinity)} -> {sorted(now.affinity)}")
        before = {name: (soft, hard) for name, soft, hard in self.limits}
        for name, soft, hard in now.limits:
            if before.get(name, (soft, hard)) != (soft, hard):
                out.append(f"{name} {before[name]} -> {(soft, hard)}")
        return out


def read(pid: int) -> Vitals | None:
    """``pid``'s vitals, or None when it is gone (or not visible)."""
    try:
        limits = []
        for name in LIMITS:
            res = getattr(resource, name, None)
            if res is not None:
                soft, hard = resource.prlimit(pid, res)
                limits.append((name, soft, hard))
        return Vitals(os.sched_getscheduler(pid), os.getpriority(os.PRIO_PROCESS, pid),
                      frozenset(os.sched_getaffinity(pid)), tuple(limits))
    except (ProcessLookupError, PermissionError, OSError):
        return None
