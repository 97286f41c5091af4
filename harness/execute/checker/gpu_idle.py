"""Is the GPU idle when the checker starts reading a stopped worker's committed outputs? Checked from the checker.

A stopped worker launches nothing, but kernels it queued before it was stopped still run; an honest worker
synchronizes before it commits, so none of its kernels should be running when the checker reads. The checker
cannot see another process's streams; what it can see is its own: GPU contexts of different processes are
time-sliced (no MPS), so a tiny kernel of the checker's waits for another context's running kernel to yield its
slice. :class:`IdleProbe` launches one such kernel, times it to completion, and calls the GPU busy when it takes
far longer than on an idle GPU (the checker's own baseline, measured when it starts).

The probe cannot tell whose work held the GPU (a neighbour building its model outside the device gate also
does), so busy is a fact recorded beside the read, not a verdict; the verdict comes from the bytes themselves
(:func:`harness.execute.checker.outputs.still_equal`: read again after the comparison, they must not have changed).
"""

from __future__ import annotations

import time
from typing import Callable

BUSY_FACTOR = 5.0
"""A probe slower than this many times the idle baseline means another context held the GPU."""
BUSY_FLOOR_US = 200.0
"""... and slower than this (microsecond kernels jitter by tens of microseconds on an idle GPU)."""
WAIT_S = 0.05
"""How long the checker waits for the GPU to become idle before it reads anyway."""


class IdleProbe:
    """Times a tiny kernel of the checker's own (``launch_and_wait``: seconds for one launch to complete)."""

    def __init__(self, launch_and_wait: Callable[[], float], clock: Callable[[], float] = time.monotonic):
        self.launch_and_wait, self.clock = launch_and_wait, clock
        self.baseline_us: float | None = None

    def calibrate(self, n: int = 21) -> float:
        """The idle baseline (median of ``n`` probes, microseconds), taken with nothing else of the run's on the
        GPU (the checker at start)."""
        samples = sorted(self.launch_and_wait() * 1e6 for _ in range(n))
        self.baseline_us = samples[len(samples) // 2]
        return self.baseline_us

    def busy(self, latency_us: float) -> bool:
        base = self.baseline_us if self.baseline_us is not None else 0.0
        return latency_us > max(BUSY_FLOOR_US, BUSY_FACTOR * base)

    def wait_idle(self, wait_s: float = WAIT_S) -> tuple[bool, float]:
        """Probe until the GPU is idle or ``wait_s`` passed: (idle, the last probe's microseconds)."""
        if self.baseline_us is None:
            self.calibrate()
        deadline = self.clock() + wait_s
        while True:
            us = self.launch_and_wait() * 1e6
            if not self.busy(us):
                return True, us
            if self.clock() >= deadline:
                return False, us


def cuda_probe() -> IdleProbe:
    """The probe on this process's current CUDA device: one element incremented, synchronized."""
    import torch

    x = torch.zeros(1, device="cuda")

    def launch_and_wait() -> float:
        t0 = time.perf_counter()
        x.add_(1)
        torch.cuda.synchronize()
        return time.perf_counter() - t0
    launch_and_wait()
    return IdleProbe(launch_and_wait)
