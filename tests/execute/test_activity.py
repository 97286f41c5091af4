"""The log of neighbours' GPU work outside the gate (harness.execute.parent.activity): intervals and their overlap."""

from __future__ import annotations

import threading

import pytest

from harness.execute.parent import activity as act
from harness.execute.parent.activity import DeviceActivity, Overlap, describe


@pytest.fixture
def clock(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(act.time, "monotonic", lambda: now[0])
    return now


def test_closed_and_open_intervals_overlap_a_window_by_their_seconds_inside_it(clock):
    log = DeviceActivity()
    a = log.begin("build")          # 100 .. 103
    clock[0] = 101.0
    b = log.begin("exit")           # 101 .. 101.5
    clock[0] = 101.5
    log.end(b)
    clock[0] = 103.0
    log.end(a)
    log.begin("build")              # 103 .. open
    got = log.overlap(102.0, 104.0)
    assert got["build"] == Overlap(2, 2.0)  # 1 s of the first, 1 s of the open one (up to the window's end)
    assert got["exit"] == Overlap(0, 0.0)
    assert log.overlap(101.0, 101.5)["exit"] == Overlap(1, 0.5)
    assert log.overlap(90.0, 99.0) == {"build": Overlap(0, 0.0), "exit": Overlap(0, 0.0)}


def test_ending_twice_or_nothing_is_harmless_and_old_intervals_are_forgotten(clock):
    log = DeviceActivity()
    t = log.begin("exit")
    log.end(t)
    log.end(t)
    log.end(None)
    assert log.overlap(99.0, 101.0)["exit"].count == 1
    clock[0] += act.KEEP_S + 1
    log.end(log.begin("build"))
    assert log.overlap(0.0, clock[0])["exit"].count == 0


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown activity kind 'compile'"):
        DeviceActivity().begin("compile")


def test_concurrent_sessions_log_without_losing_intervals():
    log = DeviceActivity()

    def work():
        for _ in range(200):
            log.end(log.begin("build"))
    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert log.overlap(0.0, float("inf"))["build"].count == 1600


def test_the_description_on_a_note():
    assert describe({"build": Overlap(2, 0.613), "exit": Overlap(1, 0.05)}) == \
        "2 neighbours building (0.61 s), 1 worker exiting (0.05 s)"
    assert describe({"build": Overlap(1, 0.2), "exit": Overlap(0, 0.0)}) == "1 neighbour building (0.20 s)"
    assert describe({"build": Overlap(0, 0.0), "exit": Overlap(0, 0.0)}) == "no neighbour building or exiting"
