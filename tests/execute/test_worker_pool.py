"""Pre-started workers: ready before their candidate, used once, cleaned up, and no looser than a fresh spawn."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from harness import env as envmod
from harness.execute.parent.checker_client import CheckerPool
from harness.execute.parent.options import RunOptions
from harness.execute.parent.pool import Demand, WorkerPool
from harness.execute.parent.session import Session
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry

from _support import device_context, task_for

FIXTURES = Path(__file__).parent / "fixtures" / "mixed"


def _wait_idle(pool: WorkerPool, n: int, timeout_s: float = 120.0) -> None:
    t0 = time.monotonic()
    while len(pool._idle) < n:
        assert time.monotonic() - t0 < timeout_s, "pre-started workers never became idle"
        time.sleep(0.2)


def test_pool_prestarts_replaces_and_cleans_up(tmp_path):
    opts = RunOptions(device="cpu", sandbox=False)
    problem = load_registry().get("gelu").path
    pool = WorkerPool(opts, None, tmp_path, "t", [problem], size=2)
    try:
        _wait_idle(pool, 2)
        w = pool.take()
        assert w is not None and w.prestarted and w.proc.poll() is None
        _wait_idle(pool, 2)  # the one taken was replaced
        idle = list(pool._idle)
    finally:
        pool.close()
    w.discard()
    for x in [w, *idle]:
        assert x.proc.poll() is not None and not x.scratch.exists()
    assert pool.take() is None  # closed: nothing handed out, nothing started


def test_prestarted_worker_refuses_a_problem_it_was_not_sandboxed_for(tmp_path):
    """Bug it stops: a pool set up for other problems must not run a candidate it cannot sandbox correctly."""
    reg = load_registry()
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), time_kernels=False, scratch_root=tmp_path)
    pool = WorkerPool(opts, None, tmp_path, "t", [reg.get("softmax").path], size=1)
    checkers = CheckerPool("cpu", None, tmp_path / "checker")
    try:
        _wait_idle(pool, 1)
        sess = Session(task_for(FIXTURES, "gelu.py", "gelu"), device_context(opts, checkers=checkers, pool=pool))
        (rec,) = sess.run()
    finally:
        pool.close()
        checkers.close()
    assert rec.status.value == "HARNESS_ERROR" and "pre-started worker" in rec.error.message


def test_same_statuses_with_and_without_prestart(tmp_path):
    sub = tmp_path / "mixed"
    sub.mkdir()
    for name in ("gelu.py", "silu__abort.py", "gelu__nan.py", "manifest.json"):
        (sub / name).write_text((FIXTURES / name).read_text())
    names = ("mixed/gelu.py", "mixed/silu__abort.py", "mixed/gelu__nan.py")
    got = {}
    for prestart in (True, False):
        opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=2, time_kernels=False,
                          compile_timeout_s=60, round_timeout_s=30, prestart=prestart)
        req = EvalRequest(submissions=[sub], registry=load_registry(), out_dir=tmp_path / str(prestart),
                          options=opts, env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False,
                          )
        got[prestart] = {r.candidate: r.status.value for r in evaluate(req) if r.candidate in names}
    assert got[True] == got[False] and len(got[True]) == 3
    assert got[True]["mixed/gelu.py"] == "PASSED" and got[True]["mixed/silu__abort.py"] == "CRASHED"


def test_pool_starts_no_more_workers_than_candidates_left(tmp_path):
    """Two spares per job (up to 8) would start 8 interpreters for a 1-candidate run; the
    shared demand caps the pool at the candidates still to come."""
    opts = RunOptions(device="cpu", sandbox=False)
    problem = load_registry().get("gelu").path
    pool = WorkerPool(opts, None, tmp_path, "d", [problem], size=4, demand=Demand(1))
    try:
        _wait_idle(pool, 1)
        time.sleep(0.5)
        assert len(pool._idle) + pool._starting == 1
        w = pool.take()
        assert w is not None
        time.sleep(0.5)
        assert len(pool._idle) + pool._starting == 0  # nobody left to serve: no replacement
    finally:
        pool.close()
    w.discard()


def test_a_standing_demand_keeps_the_pool_full_after_its_run_is_served():
    """A service lane's kept executor (KeptExecutor) expects more runs: its pools refill to their size even when
    the run's own candidates are all served. Cost it stops (the service's H200 load test): the first twelve
    records of each batch of 64 had waited a median 8.2 s for a worker, 10-13 s between batches."""
    run_only, standing = Demand(1), Demand(1, standing=True)
    for d in (run_only, standing):
        d.take()
    assert run_only.left == 0 and standing.left >= 1 << 20
    standing.add(5)
    standing.take()
    assert standing.left >= 1 << 20 and standing._left == 4


def test_pool_hands_out_only_warm_workers_and_warms_a_few_at_a_time(tmp_path):
    """Bug it stops: the pool counted a worker idle as soon as it was spawned, so a 12-job GPU run warmed ~20
    interpreters at once and the first candidate waited for all of them (15-18 s on the H200)."""
    opts = RunOptions(device="cpu", sandbox=False)
    problem = load_registry().get("gelu").path
    pool = WorkerPool(opts, None, tmp_path, "m", [problem], size=2, max_starting=1)
    seen_starting = set()
    try:
        t0 = time.monotonic()
        while len(pool._idle) < 2:
            assert time.monotonic() - t0 < 180, "pre-started workers never became warm"
            seen_starting.add(pool._starting)
            time.sleep(0.05)
        assert seen_starting <= {0, 1}  # never two warming at once
        w = pool.take()
        assert w is not None and w.proc.poll() is None
        assert {"import_s", "recorder_s", "profiler_s", "wall_s"} <= set(w.warm_s)  # CPU: the recorder is warmed  # its warm-up, step by step
        # the warm line was consumed by the pool: what the worker sends next is the signed channel's
        import select
        assert select.select([w.c2p_r], [], [], 0.2)[0] == []
    finally:
        pool.close()
    w.discard()


def test_pool_stops_prestarting_after_workers_fail_to_warm(tmp_path):
    """A broken environment (here: settings a worker cannot start with) must not respawn forever; the pool
    gives up after a few failures in a row and take() returns None, so sessions spawn their own workers and
    report the failure on the record."""
    from harness.execute.parent.pool import MAX_FAILED_STARTS

    opts = RunOptions(device="cpu", sandbox=False)
    problem = load_registry().get("gelu").path
    pool = WorkerPool(opts, None, tmp_path, "b", [problem], size=0, max_starting=1)  # starts nothing yet
    # the worker's lock-down raises on it, before its warm-up imports torch (seconds per failed start)
    pool.prestart = {**pool.prestart, "max_file_bytes": "not a number"}
    pool.size = 2
    try:
        pool._fill()
        t0 = time.monotonic()
        while not pool.broken:
            assert time.monotonic() - t0 < 180, "the pool kept starting workers that cannot warm up"
            time.sleep(0.1)
        time.sleep(0.5)
        assert pool._failed_in_a_row == MAX_FAILED_STARTS and pool._starting == 0 and not pool._idle
        assert pool.take(wait_s=1.0) is None
    finally:
        pool.close()


def test_warm_line_round_trip_and_garbage():
    from harness.execute.wire.protocol import parse_warm_line, warm_line

    assert parse_warm_line(warm_line({"import_s": 1.5, "cuda_s": 0.25})) == {"import_s": 1.5, "cuda_s": 0.25}
    for bad in (b"kernelgate-worker-warm\n", b"hello\n", b"kernelgate-worker-warm [1]\n",
                b"kernelgate-worker-warm {}", b"kernelgate-worker-warm " + b"x" * 2000 + b"\n"):
        assert parse_warm_line(bad) is None, bad
    assert parse_warm_line(b'kernelgate-worker-warm {"a": -1, "b": "x", "c": 2}\n') == {"c": 2.0}


def test_close_ends_workers_still_warming_up(tmp_path):
    """Bug it stops: close() killed only the warm workers; those still warming up finished their warm-up (seconds
    of CPU each) after the run had ended, beside whatever ran next. (Started with exec: a forked worker is warm
    too soon to be caught warming up.)"""
    opts = RunOptions(device="cpu", sandbox=False, spawn="exec")
    problem = load_registry().get("gelu").path
    pool = WorkerPool(opts, None, tmp_path, "c", [problem], size=2, max_starting=2)
    t0 = time.monotonic()
    while len(pool._warming) < 2:
        assert time.monotonic() - t0 < 30, "the pool never started its workers"
        time.sleep(0.02)
    warming = list(pool._warming)
    pool.close()
    t0 = time.monotonic()
    while any(w.proc.poll() is None or w.scratch.exists() for w in warming):
        assert time.monotonic() - t0 < 10, "a worker kept warming up after close(), or its scratch stayed"
        time.sleep(0.05)
    assert not pool._idle


def test_a_worker_makes_its_gpu_context_only_with_a_background_place_in_the_gate(tmp_path):
    """Bug it stops: workers starting beside a timed workload (their CUDA context and profiler made outside the
    gate) slowed honest kernels' libraries 3-11x in the service's load test. Given the device's gate, a
    pre-started worker stops before that step and waits: while a timing holds the gate exclusively it never
    becomes warm; once the gate is free it does, and its slot is given back. (On the CPU the step is empty; the
    handshake is the same.)"""
    from harness.execute.parent.gate import DeviceGate

    asked = threading.Event()

    class Watched(DeviceGate):
        def acquire_background(self) -> None:
            asked.set()
            super().acquire_background()

    gate = Watched(1)
    gate.acquire_exclusive()  # a workload is being timed
    opts = RunOptions(device="cpu", sandbox=False)
    pool = WorkerPool(opts, None, tmp_path, "g", [load_registry().get("gelu").path], size=1, gate=gate)
    try:
        assert asked.wait(120), "the worker never asked for the GPU"
        time.sleep(1.0)
        assert pool._idle == [] and gate.state() == (0, True)  # waiting: not warm while the timing holds the GPU
        gate.release_exclusive()
        _wait_idle(pool, 1, timeout_s=60)
        assert gate.state() == (0, False) and gate.background == 0  # the place was held for the GPU step only
        assert pool._idle[0].warm_s["gpu_wait_s"] >= 0.9
    finally:
        pool.close()


def test_a_pool_without_a_gate_tells_its_workers_not_to_wait(tmp_path):
    pool = WorkerPool(RunOptions(device="cpu", sandbox=False), None, tmp_path, "n", [load_registry().get("gelu").path],
                      size=0)
    assert pool.prestart["gpu_gate"] is False
    pool.close()
