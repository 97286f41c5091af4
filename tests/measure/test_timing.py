"""The timing protocol of one call (CPU path), the window choice, and the launch-queue hold."""

from __future__ import annotations

import time

import pytest

from harness.measure import timing
from harness.measure.timing import DeviceTimer, TimingConfig, choose_windows, hold_for, summarize


def test_timed_call_returns_the_result_and_its_times():
    timer = DeviceTimer("cpu", 1 << 16)
    out, stream_ms, device_ms, enq_us, idle_ms = timer.timed_call(lambda: (time.sleep(0.005), 7)[1], hold_us=50.0)
    assert out == 7 and stream_ms >= 4.0 and device_ms == stream_ms and enq_us == pytest.approx(stream_ms * 1e3)
    assert idle_ms == 0.0


def test_monkeypatching_time_after_the_timer_is_built_does_not_fool_it(monkeypatch):
    timer = DeviceTimer("cpu", 1 << 16)
    monkeypatch.setattr(time, "perf_counter", lambda: 0.0)
    assert timer.timed_call(lambda: time.sleep(0.005), 20.0).stream_ms >= 4.0


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


def test_a_slower_host_round_trip_on_one_side_is_not_side_stream_work():
    """Bug it stops (on an H200): under load the candidate's device-wide end, seen
    through the host, came 21-61 us later than the library's for honest kernels, and both sides were scored
    device-wide (44-91% slower). The round trip measured right after each call is taken out of its gap."""
    stream, idle_c, idle_l = [0.1] * 7, [0.052] * 7, [0.011] * 7
    cand_d = [s + i + 0.001 for s, i in zip(stream, idle_c)]
    lib_d = [s + i + 0.001 for s, i in zip(stream, idle_l)]
    assert choose_windows(stream, cand_d, stream, lib_d)[2] != ""  # the rule without the round trip fires
    c, lib, note = choose_windows(stream, cand_d, stream, lib_d, idle_c, idle_l)
    assert c == stream and lib == stream and note == ""


def test_side_stream_work_shows_after_the_round_trip_is_taken_out_and_is_scored_without_it():
    """What it keeps: 0.5 ms left on a side stream is still found, and scored as the device-wide end less the
    host's round trip (never below the stream's end)."""
    cand_s, cand_d, idle = [0.100] * 5, [0.650] * 5, [0.050] * 5
    lib_s, lib_d, lib_idle = [0.100] * 5, [0.150] * 5, [0.049] * 5
    c, lib, note = choose_windows(cand_s, cand_d, lib_s, lib_d, idle, lib_idle)
    assert c == pytest.approx([0.6] * 5) and lib == pytest.approx([0.101] * 5) and "side stream" in note
    assert timing.net_device([0.1], [0.12], [0.05]) == [0.1]  # a round trip longer than the gap


def test_cpu_config_is_short_and_samples_count():
    cfg = TimingConfig.for_device("cpu")
    assert cfg.samples == cfg.reps * cfg.trials <= 5
    assert TimingConfig.from_dict(cfg.to_dict()) == cfg


def test_device_wide_windows_stand_only_with_work_on_another_stream():
    """Bug it stops (on an H200): an honest TileLang GELU, every kernel on the
    timed stream, was scored device-wide (28% slower than its other run) because the host saw its device-wide
    end 41 us after the library's in all three sample sets. Stream order: with no kernel or copy on another
    stream nothing runs after the end event, so the stream windows are scored."""
    dev_c, dev_l, stream = [0.23] * 5, [0.18] * 5, ([0.178] * 5, [0.172] * 5)
    note = "work finished 41 us after the timed stream's end event (side stream?): both sides timed device-wide"
    c, lib, why = timing.confirm_side_work(dev_c, dev_l, note, stream, 0.0)
    assert (c, lib) == stream and "the profiler saw no kernel or copy on another stream" in why
    # what it keeps: real work on another stream, or no profiler, leaves the device-wide windows
    assert timing.confirm_side_work(dev_c, dev_l, note, stream, 12.5) == (dev_c, dev_l, note)
    assert timing.confirm_side_work(dev_c, dev_l, note, stream, None) == (dev_c, dev_l, note)
    assert timing.confirm_side_work(stream[0], stream[1], "", None, 0.0) == (stream[0], stream[1], "")
