"""GPU memory admission with a fake device memory: jobs wait until they fit, oversized ones take the whole device."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from harness.execute.parent.memory import DeviceMemory, device_capacity, estimate


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
    from harness.execute.shared.inputs import POISON_MAX, poison_bytes

    assert poison_bytes(1 << 20) == 2 << 20
    assert poison_bytes(17 << 30) == POISON_MAX  # KernelBench 45_Average_Pooling_2D: 17 GB of input


def test_fake_device_memory_for_tests(monkeypatch):
    monkeypatch.setenv("KERNELGATE_FAKE_DEVICE_MEMORY_GB", "2.5")
    assert device_capacity(0) == int(2.5 * 2**30)


def test_unknown_capacity_admits_everything():
    mem = DeviceMemory(None)
    assert mem.fits(1 << 50)
    mem.release(mem.reserve(1 << 50))


def test_a_job_waiting_for_the_whole_device_is_not_starved_by_small_ones():
    mem = DeviceMemory(10 << 30, margin=0.0)
    first = mem.reserve(1 << 30)
    order = []
    big = threading.Thread(target=lambda: (mem.reserve_all(), order.append("big")))
    big.start()
    time.sleep(0.2)
    small = threading.Thread(target=lambda: (mem.reserve(1 << 30), order.append("small")))
    small.start()
    time.sleep(0.2)
    assert order == []  # the small job fits, but waits behind the whole-device job
    mem.release(first)
    big.join(timeout=5)
    time.sleep(0.2)
    assert order == ["big"]
    mem.release(mem.capacity)
    small.join(timeout=5)
    assert order == ["big", "small"]


def test_a_session_reserves_once_when_the_worker_first_asks_for_the_device_and_oversized_runs_alone():
    """Memory is reserved at the first want_device (after import and build): a candidate that fails to import
    never waits for memory; an estimate over the device makes the task alone instead of refused."""
    import dataclasses as dc

    from harness.execute.parent.session import Session

    @dc.dataclass(frozen=True)
    class T:
        alone: bool = False
        reason: str = ""

    for need, alone in ((2 << 30, False), (50 << 30, True)):
        s = Session.__new__(Session)
        s.t, s.need, s.reserved, s._memory_asked = T(), need, 0, False
        s.dev = SimpleNamespace(memory=DeviceMemory(10 << 30, margin=0.0))
        s._reserve_memory()
        s._reserve_memory()
        assert s.t.alone is alone and s.dev.memory.used == (s.dev.memory.capacity if alone else need)
        assert ("more than the device" in s.t.reason) is alone


def test_the_library_side_of_the_timed_batch_is_held_apart_once_per_device():
    """Gap it closes: a job's estimate counts its worker's timed batch (up to BATCH_KEEP_BYTES) but not the
    checker's copy (LibBatch: the library's inputs and outputs for the same calls). Only one job holds the GPU
    to be timed at a time, so the device keeps one such batch apart from every reservation."""
    from harness.execute.parent.memory import BATCH_KEEP_BYTES, CONTEXT_BYTES, fixed_bytes

    assert fixed_bytes(10, 3, 1 << 30) == 10 * CONTEXT_BYTES + 3 * (1 << 30) + BATCH_KEEP_BYTES
    mem = DeviceMemory(140 << 30, margin=0.1, fixed=fixed_bytes(10, 3, 4 << 30))
    assert mem.capacity == int((140 << 30) * 0.9) - 10 * CONTEXT_BYTES - (12 << 30) - BATCH_KEEP_BYTES
