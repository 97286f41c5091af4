"""GPU memory admission with a fake device memory: jobs wait until they fit, oversized ones take the whole device."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from harness.execute.memory import DeviceMemory, device_capacity, estimate


def _w(in_b, out_b, dtype="float32", params=0):
    return SimpleNamespace(input_bytes=in_b, output_bytes=out_b, param_bytes=params, dtype=dtype,
                           min_bytes=in_b + out_b)


def test_estimate_counts_the_float64_reference_and_the_kept_outputs():
    e = estimate(_w(6 << 30, 6 << 30))  # KernelBench 19_ReLU at native size: 6.4 GB in, 6.4 GB out
    assert e.checker_bytes > 2 * (12 << 30)  # the float64 reference of inputs and outputs
    assert e.worker_bytes > 2 * (6 << 30) + (12 << 30)  # a live set, the poison fill, two kept calls
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


def test_a_job_larger_than_the_device_waits_for_the_whole_device_instead_of_being_refused():
    mem = DeviceMemory(10 << 30, margin=0.1, fixed=1 << 30)
    assert not mem.fits(9 << 30)
    mem.reserve(2 << 30)  # a neighbour
    got = []
    t = threading.Thread(target=lambda: got.append(mem.reserve(9 << 30)))
    t.start()
    time.sleep(0.3)
    assert not got  # it waits for the neighbour to leave: it runs alone
    mem.release(2 << 30)
    t.join(timeout=5)
    assert got == [mem.capacity] and mem.used == mem.capacity
    blocked = []
    t2 = threading.Thread(target=lambda: blocked.append(mem.reserve(1 << 20)))
    t2.start()
    time.sleep(0.3)
    assert not blocked  # nothing runs beside it
    mem.release(got[0])
    t2.join(timeout=5)
    assert blocked == [1 << 20]


def test_the_poison_fill_is_bounded():
    from harness.execute.inputs import POISON_MAX, poison_bytes

    assert poison_bytes(1 << 20) == 2 << 20
    assert poison_bytes(17 << 30) == POISON_MAX  # KernelBench 45_Average_Pooling_2D: 17 GB of input


def test_fake_device_memory_for_tests(monkeypatch):
    monkeypatch.setenv("KERNELGATE_FAKE_DEVICE_MEMORY_GB", "2.5")
    assert device_capacity(0) == int(2.5 * 2**30)


def test_unknown_capacity_admits_everything():
    mem = DeviceMemory(None)
    assert mem.fits(1 << 50)
    mem.release(mem.reserve(1 << 50))
