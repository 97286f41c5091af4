"""DeviceGate: correctness phases share a GPU (bounded), timing owns it, and a waiting timer is not starved."""

from __future__ import annotations

import threading
import time

import pytest

from harness.execute.parent.gate import DeviceGate


def test_shared_holders_bounded_and_exclusive_excludes_everyone():
    gate = DeviceGate(2)
    peak = {"shared": 0, "bad": 0}
    guard = threading.Lock()
    live = {"shared": 0, "excl": 0}

    def checker():
        for _ in range(20):
            gate.acquire_shared()
            with guard:
                live["shared"] += 1
                peak["shared"] = max(peak["shared"], live["shared"])
                peak["bad"] += live["excl"] > 0
            time.sleep(0.001)
            with guard:
                live["shared"] -= 1
            gate.release_shared()

    def timer():
        for _ in range(10):
            gate.acquire_exclusive()
            with guard:
                live["excl"] += 1
                peak["bad"] += live["shared"] > 0 or live["excl"] > 1
            time.sleep(0.001)
            with guard:
                live["excl"] -= 1
            gate.release_exclusive()

    threads = [threading.Thread(target=checker) for _ in range(5)] + [threading.Thread(target=timer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert peak["shared"] == 2 and peak["bad"] == 0
    assert gate.state() == (0, False)


def test_waiting_timer_blocks_new_checks():
    gate = DeviceGate(3)
    gate.acquire_shared()
    got = threading.Event()

    def timer():
        gate.acquire_exclusive()
        got.set()

    t = threading.Thread(target=timer)
    t.start()
    time.sleep(0.05)
    assert not got.is_set()
    late = threading.Event()
    threading.Thread(target=lambda: (gate.acquire_shared(), late.set()), daemon=True).start()
    time.sleep(0.05)
    assert not late.is_set()  # writer preference: no new check while a timer waits
    gate.release_shared()
    assert got.wait(2)
    assert not late.is_set()
    gate.release_exclusive()
    assert late.wait(2)
    t.join()


def test_misuse_is_an_error():
    gate = DeviceGate(1)
    with pytest.raises(RuntimeError):
        gate.release_shared()
    with pytest.raises(RuntimeError):
        gate.release_exclusive()
    with pytest.raises(ValueError):
        DeviceGate(0)


def test_background_places_are_unbounded_but_keep_timing_out():
    """Context start-ups and tear-downs: many at once beside the correctness slots (dozens of workers warm up in
    a run; they must not take the 3 slots), never while a timing holds or waits for the GPU."""
    gate = DeviceGate(1)
    gate.acquire_shared()  # the one correctness slot is taken...
    for _ in range(5):
        gate.acquire_background()  # ...and five contexts start beside it
    assert gate.background == 5 and gate.state() == (1, False)
    gate.release_shared()
    timed = threading.Event()

    def timer():
        gate.acquire_exclusive()
        timed.set()

    t = threading.Thread(target=timer)
    t.start()
    time.sleep(0.05)
    assert not timed.is_set()  # a context still starting: the timing waits
    late = threading.Event()
    threading.Thread(target=lambda: (gate.acquire_background(), late.set()), daemon=True).start()
    time.sleep(0.05)
    assert not late.is_set()  # and no new start-up begins while it waits (writer preference)
    for _ in range(5):
        gate.release_background()
    t.join(timeout=5)
    assert timed.is_set() and not late.is_set()
    gate.release_exclusive()
    assert late.wait(5) and gate.background == 1
    gate.release_background()
    with pytest.raises(RuntimeError, match="without acquire_background"):
        gate.release_background()


def test_context_starts_are_bounded_when_asked_and_timing_still_goes_first():
    """``background_max``: a third start-up waits for one of two to end; a timing phase asked for meanwhile is
    served before it (writer preference holds for start-ups too)."""
    gate = DeviceGate(1, background_max=2)
    gate.acquire_background()
    gate.acquire_background()
    order: list[str] = []
    third = threading.Thread(target=lambda: (gate.acquire_background(), order.append("third")))
    third.start()
    time.sleep(0.1)
    assert order == [] and gate.background == 2
    timer = threading.Thread(target=lambda: (gate.acquire_exclusive(), order.append("timing"),
                                             time.sleep(0.05), gate.release_exclusive()))
    timer.start()
    time.sleep(0.05)
    gate.release_background()
    gate.release_background()
    timer.join(5)
    third.join(5)
    assert order == ["timing", "third"]
    gate.release_background()
    with pytest.raises(ValueError):
        DeviceGate(1, background_max=-1)
    assert DeviceGate(1).background_max == 0  # the default: no limit
