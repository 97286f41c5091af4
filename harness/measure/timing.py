"""The timing protocol: cold cache, device-wide sync, alternation, raw samples.

Why each choice (in the spirit of ``triton.testing.do_bench``)::

    for trial in range(trials):
        for i in range(reps):
            for name in ("library", "candidate"):        # A B A B: drift cancels
                flush()                                  # write > 2x L2; still running while fn launches
                start.record()
                fn(*inputs[i % len(inputs)])             # rotate input sets: no pointer caching
                device_synchronize()                     # ALL streams: side-stream work counts
                end.record(); end.synchronize()
                samples[name].append(start.elapsed_time(end))

* L2 flush before every sample: a GPU-sized workload is meant to stream from
  DRAM; a warm L2 would favour whichever kernel ran last.
* The window ends after a *device-wide* synchronize, so a candidate that
  returns early and finishes on a side stream (or another thread's stream) is
  still charged for its work. This adds the host's sync-return latency (a few
  microseconds) equally to both sides; KernelGate's GPU workloads run far
  longer than that. There is deliberately no sync *before* the start event:
  the flush keeps the GPU busy while the host launches, so Python launch
  overhead is not counted (the 2026-11-30 H200 runs still synced there, which
  added tens of microseconds to both sides of every sample).
* The clock objects are captured when this module is imported, which the
  worker does before importing candidate code, so rebinding
  ``torch.cuda.Event`` or ``time.perf_counter`` afterwards changes nothing here.
* All raw samples are kept; medians and IQR are computed by the parent.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import Any, Callable

_perf_counter = time.perf_counter  # captured at import, before candidate code runs
MIN_REPS = 5


@dataclass(frozen=True, slots=True)
class TimingConfig:
    warmup: int = 10
    reps: int = 50
    trials: int = 3
    flush_bytes: int = 256 * 1024 * 1024
    """Bytes written before each sample; at least twice the L2 (H200: 60 MB)."""
    input_sets: int = 3
    budget_ms: float = 20_000.0
    """Soft cap on one timing phase; only very slow kernels reach it (see time_alternating)."""

    @classmethod
    def for_device(cls, device: str, quick: bool = False) -> "TimingConfig":
        if device == "cpu":
            # CPU runs are functional checks of the protocol (the Triton
            # interpreter is orders of magnitude slower than a GPU): keep them short.
            return cls(warmup=1, reps=3, trials=1, flush_bytes=8 * 1024 * 1024, input_sets=2, budget_ms=5_000.0)
        if quick:
            return cls(warmup=5, reps=20, trials=2, budget_ms=4_000.0)
        return cls()

    def to_dict(self) -> dict:
        return {"warmup": self.warmup, "reps": self.reps, "trials": self.trials,
                "flush_bytes": self.flush_bytes, "input_sets": self.input_sets, "budget_ms": self.budget_ms}


class DeviceTimer:
    """Times callables on one device; built before candidate code is imported."""

    def __init__(self, device: str, flush_bytes: int):
        import torch

        self.device = device
        self.is_cuda = device.startswith("cuda")
        if self.is_cuda:
            self._event = torch.cuda.Event
            self._sync = torch.cuda.synchronize
            self._elapsed = torch.cuda.Event.elapsed_time
            self._record = torch.cuda.Event.record
            self._event_sync = torch.cuda.Event.synchronize
        self._zero = torch.Tensor.zero_
        self._flush_buf = torch.empty(max(flush_bytes // 4, 1), dtype=torch.int32, device=device)

    @property
    def name(self) -> str:
        return "cuda_event" if self.is_cuda else "host_perf_counter"

    def flush(self) -> None:
        self._zero(self._flush_buf)

    def sample_ms(self, fn: Callable, args: list) -> float:
        self.flush()
        if self.is_cuda:
            # No sync between the flush and the start event: the GPU is still busy
            # flushing while the host launches fn, so host-side launch overhead
            # stays outside the window (as in triton.testing.do_bench). The window
            # closes after a device-wide sync, so side-stream work is counted.
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            self._record(start)
            fn(*args)
            self._sync()
            self._record(end)
            self._event_sync(end)
            return float(self._elapsed(start, end))
        t0 = _perf_counter()
        fn(*args)
        return (_perf_counter() - t0) * 1e3


def time_alternating(timer: DeviceTimer, fns: dict[str, tuple[Callable, list[list]]], cfg: TimingConfig) -> dict[str, list[float]]:
    """Alternate the callables sample by sample; return every raw sample in ms per name."""
    import torch

    samples: dict[str, list[float]] = {name: [] for name in fns}
    with torch.no_grad():
        for name, (fn, sets) in fns.items():
            for i in range(cfg.warmup):
                fn(*sets[i % len(sets)])
        # Bound the phase for very slow kernels: after warm-up, one sample of
        # each estimates the cost, and reps shrink (never below MIN_REPS) so
        # the whole phase stays near budget_ms.
        est = sum(timer.sample_ms(fn, sets[0]) for fn, sets in fns.values())
        reps = cfg.reps
        if est * cfg.reps * cfg.trials > cfg.budget_ms:
            reps = max(MIN_REPS, int(cfg.budget_ms / (est * cfg.trials)))
        for _ in range(cfg.trials):
            for i in range(reps):
                for name, (fn, sets) in fns.items():
                    samples[name].append(timer.sample_ms(fn, sets[i % len(sets)]))
    return samples


def summarize(samples_ms: list[float]) -> dict[str, Any]:
    """Median, IQR, min, mean of raw samples (the parent turns this into TimingStats)."""
    xs = sorted(samples_ms)
    if not xs:
        raise ValueError("no timing samples")
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = xs[-1] - xs[0]
    return {"median_ms": statistics.median(xs), "iqr_ms": iqr, "min_ms": xs[0], "mean_ms": statistics.fmean(xs)}
