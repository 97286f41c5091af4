"""A service lane's engine keeps its executor between runs (EngineConfig.keep_executor, KeptExecutor).

Cost it stops (an H200 load test): every batch of 64 started its own checkers and worker pool, and
15-22 s passed between one batch's last record and the next one's first. Here, on the CPU path: the second run is
served by the same checker processes (same pids) and its records are as correct as the first's; a run whose
device-level options differ gets an executor of its own; close() ends every process the engine kept.
"""

from __future__ import annotations

import os
import threading
import time

from harness.api import resolve_problem
from harness.serve.engine import Engine, EngineConfig, EvalItem, Selection
from harness.serve.presets import get_preset
from serve_helpers import GELU, variant


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except OSError:
        return False


def _run(engine: Engine, keys: list[str], preset: str = "quick") -> dict[str, str]:
    got: dict[str, str] = {}
    gelu = resolve_problem("gelu")
    items = [EvalItem(key=k, source=variant(GELU, n), problem=gelu) for n, k in enumerate(keys)]
    engine.run(items, get_preset(preset), Selection(tags=("smoke",)), lambda key, rec: got.__setitem__(key, rec.status.value))
    return got


def test_the_second_run_is_served_by_the_first_runs_processes(tmp_path):
    engine = Engine(EngineConfig(device="cpu", scratch_root=tmp_path, jobs=1, seed=7, keep_executor=True))
    try:
        assert _run(engine, ["a1", "a2"]) == {"a1": "PASSED", "a2": "PASSED"}
        kept = engine._keeper._ex
        pids = [p.proc.pid for dev in kept.devices.values() for p in dev.checkers.procs]
        assert pids and all(_alive(p) for p in pids)  # kept up after the run
        pool = next(iter(kept.devices.values())).pool
        t0 = time.monotonic()  # its pre-started workers refill to the pool's size, ready for the next run
        while len(pool._idle) < pool.size:
            assert time.monotonic() - t0 < 180, f"the kept pool stayed at {len(pool._idle)} of {pool.size} workers"
            time.sleep(0.2)
        assert _run(engine, ["b1"]) == {"b1": "PASSED"}
        assert engine._keeper._ex is kept and not engine._keeper._busy
        assert [p.proc.pid for dev in kept.devices.values() for p in dev.checkers.procs] == pids
        assert kept.run_id != "" and all(dev.run_id == kept.run_id for dev in kept.devices.values())
    finally:
        engine.close()
    assert not any(_alive(p) for p in pids)
    assert not (tmp_path / "kept").exists()


def test_a_run_with_other_device_options_gets_another_executor(tmp_path):
    from harness.execute.parent.local import KeptExecutor
    from harness.execute.parent.options import RunOptions
    from harness import env as envmod

    keeper = KeptExecutor()
    env = envmod.snapshot("cpu", 0)
    gelu = resolve_problem("gelu").path
    one = RunOptions(device="cpu", jobs=1, scratch_root=tmp_path, prestart=False)
    ex, kept = keeper.acquire(one, env, "run-1", problem_paths=[gelu], expected_tasks=0, screen_for=None)
    try:
        assert kept
        shared, kept2 = keeper.acquire(one, env, "run-2", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert shared is ex and kept2  # a second run beside the first shares its processes, gate and job slots
        third: list = []
        t = threading.Thread(target=lambda: third.append(
            keeper.acquire(one, env, "run-2b", problem_paths=[gelu], expected_tasks=0, screen_for=None)))
        t.start()
        t.join(0.5)
        assert t.is_alive() and not third  # a third at once waits (a second executor would bring a second gate)
        keeper.release(ex)
        t.join(10)
        assert third == [(ex, True)]
        keeper.release(ex)
        keeper.release(ex)
        same, kept3 = keeper.acquire(one, env, "run-3", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert same is ex and kept3 and ex.run_id == "run-3"
        keeper.release(ex)
        two = RunOptions(device="cpu", jobs=2, scratch_root=tmp_path, prestart=False)
        new, kept4 = keeper.acquire(two, env, "run-4", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert new is not ex and kept4  # other jobs: the old one is closed and replaced
        assert not any(_alive(p.proc.pid) for dev in ex.devices.values() for p in dev.checkers.procs)
        keeper.release(new)
        silu = resolve_problem("silu").path
        wider, _ = keeper.acquire(two, env, "run-5", problem_paths=[silu], expected_tasks=0, screen_for=None)
        assert wider is not new and {gelu.resolve(), silu.resolve()} <= wider.problem_paths  # sandboxed for both
        keeper.release(wider, broken=True)  # an interrupted run: not kept
        assert keeper._ex is None
    finally:
        keeper.close()


def test_a_broken_run_closes_the_shared_executor_only_after_the_other_run(tmp_path):
    """An interrupted run (broken) must not kill the processes of the run beside it: the kept executor is closed
    when its last run is released, and nothing rebinds it meanwhile."""
    from harness.execute.parent.local import KeptExecutor
    from harness.execute.parent.options import RunOptions
    from harness import env as envmod

    keeper = KeptExecutor()
    env = envmod.snapshot("cpu", 0)
    gelu = resolve_problem("gelu").path
    one = RunOptions(device="cpu", jobs=1, scratch_root=tmp_path, prestart=False)
    try:
        ex, _ = keeper.acquire(one, env, "run-1", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        same, _ = keeper.acquire(one, env, "run-2", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert same is ex
        pids = [p.proc.pid for dev in ex.devices.values() for p in dev.checkers.procs]
        keeper.release(ex, broken=True)
        assert pids and keeper._ex is ex and all(_alive(p) for p in pids)  # the other run still uses it
        keeper.release(ex)
        assert keeper._ex is None and not any(_alive(p) for p in pids)
        fresh, kept = keeper.acquire(one, env, "run-3", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert kept and fresh is not ex
        keeper.release(fresh)
    finally:
        keeper.close()


def test_a_kept_executor_told_the_services_problems_shares_across_them(tmp_path):
    """Cost it stops (an H200 load test): the second batch had problems the first executor's workers
    were not sandboxed for, so it waited for the first run and replaced the executor (22 s between the runs,
    a fresh pool and fresh checkers). Told every problem of the service up front, the first executor is
    sandboxed for all of them and a batch of other problems shares it at once."""
    from harness.execute.parent.local import KeptExecutor
    from harness.execute.parent.options import RunOptions
    from harness import env as envmod

    gelu, silu = resolve_problem("gelu").path, resolve_problem("silu").path
    keeper = KeptExecutor(problem_paths=[gelu, silu])
    env = envmod.snapshot("cpu", 0)
    one = RunOptions(device="cpu", jobs=1, scratch_root=tmp_path, prestart=False)
    try:
        ex, _ = keeper.acquire(one, env, "run-1", problem_paths=[gelu], expected_tasks=0, screen_for=None)
        assert {gelu.resolve(), silu.resolve()} <= ex.problem_paths
        other, kept = keeper.acquire(one, env, "run-2", problem_paths=[silu], expected_tasks=0, screen_for=None)
        assert other is ex and kept  # shared beside the first run, not waited for and replaced
        keeper.release(ex)
        keeper.release(ex)
    finally:
        keeper.close()
    assert KeptExecutor()._known == frozenset()
