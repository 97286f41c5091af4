"""The timed pair's cores (harness.execute.parent.cpus): plans, and affinity set on every thread of a live process."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from harness.execute.parent.cpus import CpuPlan, plans, set_affinity

pytestmark = pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="no CPU affinity API (not Linux)")


def test_plans_reserve_disjoint_cores_per_gpu_and_nothing_on_small_machines():
    (one,) = plans(1, set(range(16)))
    assert one.reserved == {13, 14, 15} and one.others == set(range(13))
    two = plans(2, set(range(32)))
    assert two[0].reserved.isdisjoint(two[1].reserved) and all(len(p.reserved) == 3 for p in two)
    assert two[0].others == two[1].others == set(range(26))
    assert [len(p.reserved) for p in plans(1, set(range(8)))] == [2]
    assert plans(1, {0, 1}) == [None]  # the CI machine: nothing reserved
    assert plans(8, set(range(16))) == [None] * 8  # reserving would take half the machine


def test_plan_refuses_overlapping_or_empty_sets():
    with pytest.raises(ValueError, match="disjoint"):
        CpuPlan(frozenset({1}), frozenset({1, 2}))
    with pytest.raises(ValueError, match="non-empty"):
        CpuPlan(frozenset(), frozenset({0}))


def _threads(pid: int) -> list[int]:
    return [int(t) for t in os.listdir(f"/proc/{pid}/task")]


def test_confine_and_pin_reach_every_thread_of_a_live_process():
    """Bug it stops: ``os.sched_setaffinity(pid)`` sets one thread; a worker's threads started before it was
    confined would keep running on the reserved cores."""
    usable = sorted(os.sched_getaffinity(0))
    if len(usable) < 2:
        pytest.skip("needs 2 usable cores")
    plan = CpuPlan(frozenset(usable[-1:]), frozenset(usable[:-1]))
    code = ("import threading, time\n"
            "ts = [threading.Thread(target=time.sleep, args=(30,), daemon=True) for _ in range(3)]\n"
            "[t.start() for t in ts]\nprint('up', flush=True)\ntime.sleep(30)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "up"
        tids = _threads(proc.pid)
        assert len(tids) == 4
        assert plan.confine(proc.pid) == 4
        assert all(os.sched_getaffinity(t) == plan.others for t in tids)
        assert plan.pin(proc.pid) == 4
        assert all(os.sched_getaffinity(t) == plan.reserved for t in tids)
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.1)
    assert set_affinity(proc.pid, plan.others) == 0  # gone: nothing set, nothing raised
    assert set_affinity(0, plan.others) == 0 and os.sched_getaffinity(0) == set(usable)  # never this process
