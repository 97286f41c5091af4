"""The local executor never loses a task: a session that raises is run once more alone, then recorded.

Bug it stops: on the H200 a slot thread died inside the health probe (EBADF from a file descriptor another
thread had closed twice); its task was never recorded and the GPU's lock was never released, so the run
stalled until its budget ended with 21 candidates unrun.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from harness.execute.parent import local as local_mod
from harness.execute.parent.process import WorkerProc
from harness.records import Status


def _executor(monkeypatch, outcomes):
    """A LocalExecutor with no processes, whose sessions do what ``outcomes`` says, in order."""
    from harness import env as envmod

    seen = []

    class FakeSession:
        def __init__(self, task, dev):
            self.task = task

        def run(self):
            seen.append((self.task.alone, self.task.attempt))
            what = outcomes[len(seen) - 1]
            if isinstance(what, BaseException):
                raise what
            return what

    monkeypatch.setattr(local_mod, "Session", FakeSession)
    ex = local_mod.LocalExecutor.__new__(local_mod.LocalExecutor)
    ex.o = SimpleNamespace(baseline="eager", base_seed=7)
    ex.run_id = "run-1"
    ex.demand = SimpleNamespace(add=lambda n: None)
    ex.devices = {0: SimpleNamespace(env=envmod.snapshot("cpu"), run_id="run-1", slots=None,
                                     opts=SimpleNamespace(baseline="eager", base_seed=7))}
    cand = SimpleNamespace(rel_path="sub/gelu.py", sha256="0" * 64, generator="g", generator_version="1",
                           problem_id="gelu", dsl="triton")
    problem = SimpleNamespace(category="elementwise", version="v1", id="gelu")
    workload = SimpleNamespace(name="w1", dtype="float16", flops=1, min_bytes=2, allow_tf32=False, params={"N": 4},
                               secret=False)
    task = SimpleNamespace(candidate=cand, problem=problem, workloads=(workload,), diagnostics=(), mode="eval",
                           alone=False, attempt=1, reason="")
    monkeypatch.setattr(local_mod.dataclasses, "replace", lambda t, **kw: SimpleNamespace(**{**vars(t), **kw}))
    return ex, task, seen


def test_a_session_that_raises_is_retried_alone_then_recorded_as_the_harnesss_failure(monkeypatch):
    ex, task, seen = _executor(monkeypatch, [OSError(9, "Bad file descriptor"), OSError(9, "Bad file descriptor")])
    records = ex._run_one(task, ex.devices[0])
    assert seen == [(False, 1), (True, 2)]
    assert [r.status for r in records] == [Status.HARNESS_ERROR]
    assert "not the candidate's fault" in records[0].error.message and "Bad file descriptor" in records[0].error.message


def test_a_retry_that_succeeds_is_the_record_kept(monkeypatch):
    ex, task, seen = _executor(monkeypatch, [RuntimeError("transient"), ["a record"]])
    assert ex._run_one(task, ex.devices[0]) == ["a record"] and seen == [(False, 1), (True, 2)]


def test_an_unhealthy_device_still_stops_the_device(monkeypatch):
    from harness.execute.parent.scheduler import DeviceUnhealthy

    ex, task, _ = _executor(monkeypatch, [DeviceUnhealthy("probe failed", [])])
    with pytest.raises(DeviceUnhealthy):
        ex._run_one(task, ex.devices[0])


def test_a_pipe_end_is_closed_once_even_when_its_number_is_reused():
    """The double close itself: after close_fds, a new file that got the same number must stay open."""
    r, w = os.pipe()
    wp = WorkerProc(proc=None, scratch=None, p2c_w=w, c2p_r=r, out_buf=None, err_buf=None, drains=[])
    wp.close_fds()
    r2, w2 = os.pipe()  # the lowest free numbers: the ones just closed
    try:
        wp.close_fds()  # a second clean-up (the session's finally, a pool's discard) must not close them
        os.write(w2, b"x")
        assert os.read(r2, 1) == b"x"
        assert (wp.p2c_w, wp.c2p_r) == (-1, -1)
    finally:
        os.close(r2)
        os.close(w2)
