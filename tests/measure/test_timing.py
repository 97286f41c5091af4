"""Timing protocol on the CPU path: alternation, raw samples, slow-kernel budget, captured clock."""

from __future__ import annotations

import time

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
