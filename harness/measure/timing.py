"""The timing protocol: cold cache, held launch queue, alternation, raw samples.

Why each choice (in the spirit of ``triton.testing.do_bench`` and nvbench)::

    for trial in range(trials):
        for i in range(reps):
            for name in ("library", "candidate"):        # A B A B: drift cancels
                flush()                                  # write > 2x L2
                gpu_sleep(hold)                          # GPU waits while the host enqueues fn
                start.record()
                fn(*inputs[i % len(inputs)])             # rotate input sets: no pointer caching
                end.record()                             # GPU time of the timed stream
                device_synchronize()                     # ALL streams
                tail.record(); tail.synchronize()
                samples[name].append(start.elapsed_time(end))

* L2 flush before every sample: a GPU-sized workload is meant to stream from
  DRAM; a warm L2 would favour whichever kernel ran last.
* Held launch queue: after the flush, a GPU sleep kernel (``torch.cuda._sleep``,
  calibrated in cycles per microsecond at the first timing phase) keeps the GPU
  busy for longer than the host needs to enqueue the forward (measured during
  warm-up, times two, at least 20 us). So the start event fires with the whole
  forward already queued, and neither Python launch overhead nor a loaded host
  (a dozen compiles beside the timed job) leaks into the window. Both sides
  get the same hold. Without it, the first H200 runs saw the same kernel move
  by up to 80% between two runs on a busy machine.
* The window ends at an event right after ``fn`` on the timed stream, so the
  host's wake-up latency after a synchronize is not counted either. Work left
  running on a side stream would escape that event; the device-wide
  synchronize and ``tail`` event catch it: if the candidate's median
  end-to-tail gap exceeds the library's by more than 20 us and 10% of its
  time, both sides are re-scored end-to-tail (device-wide) and a warning says
  so. (The static scan already fails side streams; this is the runtime net.)
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
        self.hold_cycles = 0
        self._cycles_per_us = 0.0
        if self.is_cuda:
            self._event = torch.cuda.Event
            self._sync = torch.cuda.synchronize
            self._elapsed = torch.cuda.Event.elapsed_time
            self._record = torch.cuda.Event.record
            self._event_sync = torch.cuda.Event.synchronize
            self._sleep = getattr(torch.cuda, "_sleep", None)
            # the sleep kernel is calibrated at the first timing phase, when this
            # worker has the GPU to itself, not at start-up beside others' timing
            self._cycles_per_us = -1.0
        self._zero = torch.Tensor.zero_
        self._flush_buf = torch.empty(max(flush_bytes // 4, 1), dtype=torch.int32, device=device)

    def _sleep_rate(self) -> float:
        if self._cycles_per_us < 0:
            self._cycles_per_us = self._calibrate_sleep() if self._sleep is not None else 0.0
        return self._cycles_per_us

    def _calibrate_sleep(self) -> float:
        """GPU sleep cycles per microsecond (median of 5), or 0 when the sleep kernel is unusable."""
        try:
            rates = []
            for cycles in (1_000_000,) * 5:
                a, b = self._event(enable_timing=True), self._event(enable_timing=True)
                self._sync()
                self._record(a)
                self._sleep(cycles)
                self._record(b)
                self._event_sync(b)
                rates.append(cycles / (float(self._elapsed(a, b)) * 1e3))
            return statistics.median(rates)
        except Exception:  # noqa: BLE001 - no sleep kernel: plain protocol
            return 0.0

    @property
    def name(self) -> str:
        return "cuda_event" if self.is_cuda else "host_perf_counter"

    def flush(self) -> None:
        self._zero(self._flush_buf)

    def set_hold_us(self, hold_us: float) -> None:
        rate = self._sleep_rate() if self.is_cuda else 0.0
        self.hold_cycles = int(hold_us * rate) if rate > 0 else 0

    def enqueue_us(self, fn: Callable, args: list) -> float:
        """Host time to enqueue one call of ``fn`` behind a long GPU sleep (no waiting on the GPU inside)."""
        if self.is_cuda and self._sleep_rate() > 0:
            self._sleep(int(20_000 * self._cycles_per_us))  # 20 ms: the queue never drains meanwhile
        t0 = _perf_counter()
        fn(*args)
        dt = (_perf_counter() - t0) * 1e6
        if self.is_cuda:
            self._sync()
        return dt

    def sample(self, fn: Callable, args: list) -> tuple[float, float]:
        """One cold-cache sample: (stream ms, device-wide ms)."""
        self.flush()
        if self.is_cuda:
            if self.hold_cycles:
                self._sleep(self.hold_cycles)
            start, end, tail = (self._event(enable_timing=True) for _ in range(3))
            self._record(start)
            fn(*args)
            self._record(end)
            self._sync()
            self._record(tail)
            self._event_sync(tail)
            return float(self._elapsed(start, end)), float(self._elapsed(start, tail))
        t0 = _perf_counter()
        fn(*args)
        ms = (_perf_counter() - t0) * 1e3
        return ms, ms

    def sample_ms(self, fn: Callable, args: list) -> float:
        return self.sample(fn, args)[0]


SIDE_WORK_SLACK_MS = 0.020


def time_alternating(timer: DeviceTimer, fns: dict[str, tuple[Callable, list[list]]], cfg: TimingConfig,
                     notes: list[str] | None = None) -> dict[str, list[float]]:
    """Alternate the callables sample by sample; return every raw sample in ms per name.

    ``notes`` (if given) receives one line per protocol decision worth recording
    (the launch hold, a switch to device-wide windows).
    """
    import torch

    stream: dict[str, list[float]] = {name: [] for name in fns}
    device: dict[str, list[float]] = {name: [] for name in fns}
    with torch.no_grad():
        for name, (fn, sets) in fns.items():
            for i in range(cfg.warmup):
                fn(*sets[i % len(sets)])
        if timer.is_cuda:
            enq = [timer.enqueue_us(fn, sets[i % len(sets)]) for fn, sets in fns.values() for i in range(3)]
            hold_us = min(max(20.0, 2.0 * max(enq)), 5_000.0)
            timer.set_hold_us(hold_us)
            if notes is not None:
                notes.append(f"launch queue held {hold_us:.0f} us before each start event (host enqueue "
                             f"max {max(enq):.0f} us)" if timer.hold_cycles else "no GPU sleep kernel: launch queue not held")
        # Bound the phase for very slow kernels: after warm-up, one sample of
        # each estimates the cost, and reps shrink (never below MIN_REPS) so
        # the whole phase stays near budget_ms.
        est = sum(timer.sample(fn, sets[0])[1] for fn, sets in fns.values())
        reps = cfg.reps
        if est * cfg.reps * cfg.trials > cfg.budget_ms:
            reps = max(MIN_REPS, int(cfg.budget_ms / (est * cfg.trials)))
        for _ in range(cfg.trials):
            for i in range(reps):
                for name, (fn, sets) in fns.items():
                    s, d = timer.sample(fn, sets[i % len(sets)])
                    stream[name].append(s)
                    device[name].append(d)
    if "candidate" in fns and "library" in fns and timer.is_cuda:
        gap = {n: statistics.median(d - s for s, d in zip(stream[n], device[n])) for n in fns}
        extra = gap["candidate"] - gap["library"]
        if extra > max(SIDE_WORK_SLACK_MS, 0.1 * statistics.median(stream["candidate"])):
            if notes is not None:
                notes.append(f"work finished {extra * 1e3:.0f} us after the timed stream's end event (side stream?): "
                             "both sides timed device-wide")
            return device
    return stream


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
