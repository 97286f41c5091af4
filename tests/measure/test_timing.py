"""Timing protocol on the CPU path: alternation, raw samples, slow-kernel budget, captured clock."""

from __future__ import annotations

import time

import pytest
import torch

from harness.measure import timing
from harness.measure.timing import DeviceTimer, TimingConfig, summarize, time_alternating


def test_alternates_and_keeps_every_sample():
    order = []
    cfg = TimingConfig(warmup=1, reps=4, trials=2, flush_bytes=1 << 16, input_sets=2)
    timer = DeviceTimer("cpu", cfg.flush_bytes)
    sets = [[torch.ones(4)], [torch.zeros(4)]]
    out = time_alternating(timer, {"library": (lambda x: order.append("A"), sets),
                                   "candidate": (lambda x: order.append("B"), sets)}, cfg)
    assert len(out["library"]) == len(out["candidate"]) == 8
    timed = order[2 + 2:]  # after one warm-up each and one estimate each
    assert timed[:6] == ["A", "B", "A", "B", "A", "B"]


def test_slow_kernels_get_fewer_reps():
    cfg = TimingConfig(warmup=0, reps=50, trials=1, flush_bytes=1 << 16, input_sets=1, budget_ms=100.0)
    timer = DeviceTimer("cpu", cfg.flush_bytes)
    out = time_alternating(timer, {"slow": (lambda: time.sleep(0.01), [[]])}, cfg)
    assert timing.MIN_REPS <= len(out["slow"]) < 50


def test_monkeypatching_time_after_import_does_not_fool_the_timer(monkeypatch):
    timer = DeviceTimer("cpu", 1 << 16)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    ms = timer.sample_ms(lambda: time.sleep(0.005), [])
    assert ms >= 4.0


def test_summarize():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median_ms"] == 3.0 and s["min_ms"] == 1.0 and s["iqr_ms"] == 2.0


class _FakeGpuTimer:
    """Stands in for DeviceTimer on a GPU: per-callable (stream ms, device-wide ms) samples."""

    is_cuda = True
    hold_cycles = 1

    def __init__(self, gaps_ms):
        self.gaps_ms, self.hold = gaps_ms, None

    def enqueue_us(self, fn, args):
        return 30.0

    def set_hold_us(self, us):
        self.hold = us

    def sample(self, fn, args):
        name = fn()
        return 0.100, 0.100 + self.gaps_ms[name]


def _fns():
    return {"library": (lambda: "library", [[]]), "candidate": (lambda: "candidate", [[]])}


def test_side_stream_work_after_the_end_event_switches_both_sides_to_device_wide():
    # exploit: return while a side stream still works; the stream event would miss it
    notes = []
    out = time_alternating(_FakeGpuTimer({"library": 0.010, "candidate": 0.500}), _fns(),
                           TimingConfig(warmup=1, reps=5, trials=1), notes)
    assert out["candidate"][0] == pytest.approx(0.600) and out["library"][0] == pytest.approx(0.110)
    assert any("side stream" in n for n in notes)


def test_same_sync_gap_keeps_stream_windows_and_holds_the_launch_queue():
    notes = []
    timer = _FakeGpuTimer({"library": 0.010, "candidate": 0.012})
    out = time_alternating(timer, _fns(), TimingConfig(warmup=1, reps=5, trials=1), notes)
    assert out["candidate"][0] == pytest.approx(0.100)
    assert timer.hold == 60.0 and notes and notes[0].startswith("launch queue held 60 us")
