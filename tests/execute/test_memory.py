"""GPU memory admission with a fake device memory: jobs wait until they fit, oversized ones are TOO_LARGE."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from harness.execute.memory import DeviceMemory, TooLarge, device_capacity, estimate


def _w(in_b, out_b, dtype="float32", params=0):
    return SimpleNamespace(input_bytes=in_b, output_bytes=out_b, param_bytes=params, dtype=dtype,
                           min_bytes=in_b + out_b)


def test_estimate_counts_the_float64_reference_and_the_kept_outputs():
    e = estimate(_w(6 << 30, 6 << 30))  # KernelBench 19_ReLU at native size: 6.4 GB in, 6.4 GB out
    assert e.checker_bytes > 2 * (12 << 30)  # the float64 reference of inputs and outputs
    assert e.worker_bytes > 3 * (6 << 30) + (12 << 30)
    small = estimate(_w(1 << 20, 1 << 20))
    assert small.total < 4 << 30


def test_estimate_without_a_size_split_uses_min_bytes():
    w = SimpleNamespace(input_bytes=None, output_bytes=None, param_bytes=None, dtype="float16", min_bytes=2 << 30)
    assert estimate(w).total > 2 << 30


def test_reservations_wait_until_they_fit():
    mem = DeviceMemory(100 << 30, margin=0.0)
    mem.reserve(60 << 30)
    got = []
    t = threading.Thread(target=lambda: (mem.reserve(50 << 30), got.append(time.monotonic())))
    t.start()
    time.sleep(0.3)
    assert not got  # 60 + 50 > 100: it waits
    mem.release(60 << 30)
    t.join(timeout=5)
    assert got and mem.used == 50 << 30


def test_a_job_larger_than_the_device_is_too_large_not_waiting():
    mem = DeviceMemory(10 << 30, margin=0.1, fixed=1 << 30)
    with pytest.raises(TooLarge, match="GiB of device memory"):
        mem.reserve(9 << 30)


def test_fake_device_memory_for_tests(monkeypatch):
    monkeypatch.setenv("KERNELGATE_FAKE_DEVICE_MEMORY_GB", "2.5")
    assert device_capacity(0) == int(2.5 * 2**30)


def test_unknown_capacity_admits_everything():
    mem = DeviceMemory(None)
    mem.reserve(1 << 50)
    mem.release(1 << 50)
