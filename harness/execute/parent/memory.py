"""GPU memory as a scheduled resource: what a job needs, and admission that waits until it fits.

When a candidate's worker first asks for the device (after the candidate
imported and its model was built, so a file that fails there never waits),
its session reserves the device memory its job will need at peak
(:func:`estimate`): the worker's and the checker's share for the largest of
its workloads. Reservations on one device never exceed its capacity minus a
margin (fragmentation, the CUDA contexts' growth); a job that does not fit
waits until running jobs release theirs. A job whose estimate exceeds what
the device has is not refused on an estimate: it reserves the whole device
(:meth:`DeviceMemory.reserve_all`, waiting until every other job has left,
while new ones wait behind it) and runs alone; only an out-of-memory of the
harness's own side while it is alone makes it ``TOO_LARGE`` (with the
numbers), never the candidate's failure. The estimate is deliberately
generous: an under-estimate is what lets neighbours run each other out of
memory.

Estimate per workload (bytes; ``E`` = element size of the dtype)::

    worker  = context + flush + params + inputs              (a live set)
              + min(2 x inputs, POISON_MAX)                  (the poison fill, see inputs.poison_bytes)
              + kept calls (2, or a batch's inputs and outputs: at most keep_bytes) + workspace (inputs + outputs)
    checker = context + flush + inputs + params + outputs    (library call, kept output)
              + (inputs + outputs + params) x 8 / E          (the float64 reference)
              + outputs x 8 / E x 3                          (slack for the reference model's own float64 temporaries)
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

CONTEXT_BYTES = 600 << 20
"""A CUDA context with PyTorch's and Triton's modules loaded (measured about 500 MB on the H200)."""
BATCH_KEEP_BYTES = 6 << 30
"""A timed batch's inputs and outputs (either side's) hold at most this much
(:mod:`harness.execute.parent.timing_phase` sizes its batches and blocks by it)."""
FLUSH_BYTES = 256 << 20
ELEM = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8}


@dataclass(frozen=True, slots=True)
class Estimate:
    worker_bytes: int
    checker_bytes: int

    @property
    def total(self) -> int:
        return self.worker_bytes + self.checker_bytes


def _sizes(w: Any) -> tuple[int, int, int]:
    """(input, output, parameter) bytes of a workload; from min_bytes when the loader gave no split."""
    ins, outs, params = (getattr(w, k, None) for k in ("input_bytes", "output_bytes", "param_bytes"))
    if ins is None or outs is None:
        half = max(1, int(w.min_bytes)) // 2
        ins, outs = ins if ins is not None else half, outs if outs is not None else half
    return int(ins), int(outs), int(params or 0)


def fixed_bytes(processes: int, checkers: int, checker_cache: int) -> int:
    """Device bytes held apart from any job's reservation: every process's CUDA context, each checker's bounded
    reference cache, and the library's side of the one batch being timed on the device (:data:`BATCH_KEEP_BYTES`:
    a job's estimate counts its worker's batch; the checker's exists only while that job holds the GPU alone,
    so one per device is enough)."""
    return CONTEXT_BYTES * processes + checkers * checker_cache + BATCH_KEEP_BYTES


def estimate(w: Any, keep_bytes: int = BATCH_KEEP_BYTES) -> Estimate:
    """Peak device bytes of one workload's job; ``keep_bytes`` bounds what a timed batch keeps."""
    from harness.execute.shared.inputs import poison_bytes

    ins, outs, params = _sizes(w)
    e = ELEM.get(w.dtype, 4)
    kept = max(2 * (ins + outs), min(keep_bytes, 256 * (ins + outs)))
    worker = CONTEXT_BYTES + FLUSH_BYTES + params + ins + poison_bytes(ins) + kept + (ins + outs)
    checker = (CONTEXT_BYTES + FLUSH_BYTES + ins + params + outs + (ins + outs + params) * 8 // e
               + 3 * outs * 8 // e)
    return Estimate(int(worker), int(checker))


def fake_capacity() -> int | None:
    """``KERNELGATE_FAKE_DEVICE_MEMORY_GB`` in bytes (tests: admission on the CPU path, a small GPU), else None."""
    fake = os.environ.get("KERNELGATE_FAKE_DEVICE_MEMORY_GB")
    return int(float(fake) * 2**30) if fake else None


def device_capacity(gpu: int | None) -> int | None:
    """Bytes of device memory (``KERNELGATE_FAKE_DEVICE_MEMORY_GB`` overrides, for tests), None if unknown."""
    fake = fake_capacity()
    if fake is not None:
        return fake
    from harness.env import query_gpus

    for g in query_gpus():
        if g["index"] == (gpu or 0) and g.get("memory_mib"):
            return int(g["memory_mib"]) << 20
    return None


class DeviceMemory:
    """Reservations of one device's memory; :meth:`reserve` blocks until the bytes fit."""

    def __init__(self, capacity: int | None, margin: float = 0.1, fixed: int = 0):
        self.capacity = None if capacity is None else int(capacity * (1 - margin)) - fixed
        self._used = 0
        self._waiting_all = 0
        self._cv = threading.Condition()

    @property
    def used(self) -> int:
        return self._used

    def fits(self, nbytes: int) -> bool:
        """Whether ``nbytes`` can ever be reserved beside others (unknown capacity: always)."""
        return self.capacity is None or nbytes <= self.capacity

    def reserve(self, nbytes: int) -> int:
        """Wait until ``nbytes`` fit beside what is reserved; the bytes reserved (release exactly those).

        More than the device has is never refused here: it becomes :meth:`reserve_all`.
        """
        if self.capacity is None:
            return 0
        if nbytes > self.capacity:
            return self.reserve_all()
        with self._cv:
            while self._used + nbytes > self.capacity or self._waiting_all:
                self._cv.wait()
            self._used += nbytes
        return nbytes

    def reserve_all(self) -> int:
        """Wait until nothing else is reserved, then take the whole device (a job that runs alone)."""
        if self.capacity is None:
            return 0
        whole = max(1, self.capacity)
        with self._cv:
            self._waiting_all += 1  # new reservations wait behind it, or a stream of small jobs would starve it
            try:
                while self._used > 0:
                    self._cv.wait()
            finally:
                self._waiting_all -= 1
            self._used += whole
            self._cv.notify_all()
        return whole

    def release(self, nbytes: int) -> None:
        if self.capacity is None:
            return
        with self._cv:
            self._used = max(0, self._used - nbytes)
            self._cv.notify_all()
