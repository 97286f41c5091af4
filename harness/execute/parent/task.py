"""What an executor is given per candidate, and what it shares per device.

A :class:`Task` is one candidate with the workloads it still needs, the
static findings of its scan and the exact bytes that were scanned: the worker
runs those bytes (written into its scratch folder), never a file re-read from
the submission folder, so what was scanned is what runs.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from harness.execute.parent.activity import DeviceActivity
from harness.records import EnvSnapshot


@dataclass(frozen=True, slots=True)
class Task:
    candidate: Any
    """:class:`harness.candidates.discover.Candidate`."""
    problem: Any
    """:class:`harness.problems.loader.Problem`."""
    workloads: tuple[Any, ...]
    diagnostics: tuple[dict, ...]
    source: bytes
    """The candidate's bytes as scanned; their sha256 is ``candidate.sha256``."""
    mode: str = "eval"
    alone: bool = False
    """Run with the device to itself from the first call (a retry after a failure neighbours may have caused)."""
    attempt: int = 1
    reason: str = ""
    """Why this attempt runs alone (the first attempt's failure)."""
    notes: tuple[str, ...] = ()
    """Warnings every record of this task carries (e.g. code extracted from a Markdown reply)."""

    def __post_init__(self) -> None:
        if hashlib.sha256(self.source).hexdigest() != self.candidate.sha256:
            raise ValueError(f"{self.candidate.rel_path}: the bytes to run are not the bytes that were scanned")


@dataclass
class DeviceContext:
    """What the sessions on one device share: checkers, admission, pre-started workers, learned facts."""

    opts: Any
    """:class:`harness.execute.parent.options.RunOptions`."""
    env: EnvSnapshot
    run_id: str
    gpu: int | None
    checkers: Any
    """:class:`harness.execute.parent.checker_client.CheckerPool`."""
    gate: Any
    """:class:`harness.execute.parent.gate.DeviceGate`."""
    memory: Any
    """:class:`harness.execute.parent.memory.DeviceMemory`."""
    pool: Any = None
    """:class:`harness.execute.parent.pool.WorkerPool` or None (spawn on demand)."""
    screen_for: Callable[[Any], Callable | None] | None = None
    """Problem -> its screening callback (None: no ceilings, so no screening)."""
    cpus: Any = None
    """:class:`harness.execute.parent.cpus.CpuPlan`: the cores kept for this device's timed pair, or None."""
    slots: Any = None
    """``threading.BoundedSemaphore`` of the device's job slots, shared by the runs of one executor (two runs of a
    kept executor may overlap: together they never run more sessions on the device than ``--jobs`` gives it), or
    None (no limit besides the run's own threads)."""
    library_kernels: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per workload context: the library op's kernels on this device, GPU microseconds per call by name."""
    """Checker context key -> names of the library op's kernels (profiled once per executor: a run, or the runs of
    a kept executor)."""
    activity: DeviceActivity = field(default_factory=DeviceActivity)
    """The workers' builds and exits on this device (outside its
    gate), for the notes on a disturbed sample set."""
    quiet_library: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Checker context key -> (median ms, relative IQR) of the library measured with no candidate alive."""
    lock: threading.Lock = field(default_factory=threading.Lock)
