"""The timing protocol of one call (CPU path), the window choice, and the launch-queue hold."""

from __future__ import annotations

import time

import pytest

from harness.measure import timing
from harness.measure.timing import DeviceTimer, TimingConfig, choose_windows, hold_for, summarize


def test_timed_call_returns_the_result_and_its_times():
    timer = DeviceTimer("cpu", 1 << 16)
    out, stream_ms, device_ms, enq_us = timer.timed_call(lambda: (time.sleep(0.005), 7)[1], hold_us=50.0)
    assert out == 7 and stream_ms >= 4.0 and device_ms == stream_ms and enq_us == pytest.approx(stream_ms * 1e3)


def test_monkeypatching_time_after_the_timer_is_built_does_not_fool_it(monkeypatch):
    timer = DeviceTimer("cpu", 1 << 16)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    _, ms, _, _ = timer.timed_call(lambda: time.sleep(0.005), 20.0)
    assert ms >= 4.0


def test_summarize():
    s = summarize([1.0, 2.0, 3.0, 4.0, 100.0])
    assert s["median_ms"] == 3.0 and s["min_ms"] == 1.0 and s["iqr_ms"] == 2.0


def test_hold_is_twice_the_last_enqueue_within_bounds():
    assert hold_for(30.0) == 60.0
    assert hold_for(1.0) == timing.MIN_HOLD_US
    assert hold_for(1e6) == timing.MAX_HOLD_US
    assert hold_for(None) == 500.0


def test_side_stream_work_after_the_end_event_switches_both_sides_to_device_wide():
    # exploit: return while a side stream still works; the stream event would miss it
    cand_s, cand_d = [0.100] * 5, [0.600] * 5
    lib_s, lib_d = [0.100] * 5, [0.110] * 5
    c, lib, note = choose_windows(cand_s, cand_d, lib_s, lib_d)
    assert c == cand_d and lib == lib_d and "side stream" in note


def test_the_same_sync_gap_keeps_stream_windows():
    c, lib, note = choose_windows([0.1] * 5, [0.112] * 5, [0.1] * 5, [0.110] * 5)
    assert c == [0.1] * 5 and lib == [0.1] * 5 and note == ""


def test_cpu_config_is_short_and_samples_count():
    cfg = TimingConfig.for_device("cpu")
    assert cfg.samples == cfg.reps * cfg.trials <= 5
    assert TimingConfig.from_dict(cfg.to_dict()) == cfg
