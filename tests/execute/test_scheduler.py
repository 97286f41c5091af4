"""The pull scheduler with fake devices: load balance, exclusivity per device, retirement."""

from __future__ import annotations

import threading
import time

from harness.execute.scheduler import DeviceUnhealthy, run_pull


def test_fast_device_takes_more_work_than_slow_one():
    speed = {"fast": 0.01, "slow": 0.08}
    ran = []

    def run_task(task, dev):
        time.sleep(speed[dev])
        return [(task, dev)]

    report = run_pull(range(20), ["fast", "slow"], 1, run_task, lambda t, recs: ran.extend(recs))
    assert sorted(t for t, _ in ran) == list(range(20)) and report.done == 20 and not report.not_run
    assert report.per_device["fast"] > 2 * report.per_device["slow"]


def test_one_exclusive_phase_per_device_with_several_slots():
    locks = {d: threading.Lock() for d in (0, 1)}
    busy = {0: 0, 1: 0}
    peak = {0: 0, 1: 0}
    guard = threading.Lock()

    def run_task(task, dev):
        time.sleep(0.01)  # "compile", overlapping freely
        with locks[dev]:  # the exclusive correctness+timing phase, as Session does
            with guard:
                busy[dev] += 1
                peak[dev] = max(peak[dev], busy[dev])
            time.sleep(0.01)
            with guard:
                busy[dev] -= 1
        return [task]

    report = run_pull(range(24), [0, 1], 3, run_task, lambda t, r: None)
    assert report.done == 24 and peak == {0: 1, 1: 1}
    assert min(report.per_device.values()) >= 6


def test_unhealthy_device_is_retired_and_others_finish():
    def run_task(task, dev):
        if dev == "bad" and task == 0:
            raise DeviceUnhealthy("probe failed", records=[("crash", task)])
        time.sleep(0.005)
        return [("ok", task)]

    seen = []
    report = run_pull(range(10), ["bad", "good"], 1, run_task, lambda t, r: seen.extend(r))
    assert "bad" in report.retired and not report.not_run
    assert ("crash", 0) in seen and len(seen) == 10


def test_all_devices_retired_leaves_tasks_not_run():
    def run_task(task, dev):
        raise DeviceUnhealthy("probe failed")

    report = run_pull(range(5), [0], 2, run_task, lambda t, r: None)
    assert report.retired and len(report.not_run) == 5 - report.done
