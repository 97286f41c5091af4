"""The local executor: every device of this machine, its checkers, gates, memory and worker pools.

Given tasks (:class:`harness.execute.parent.task.Task`), it runs each in a
:class:`harness.execute.parent.session.Session` on some device (the pull
scheduler) and hands every record to ``emit`` as tasks finish. The Ray
executor (:mod:`harness.execute.parent.ray_executor`) has the same shape: build it,
:meth:`run` tasks, :meth:`close` it.

Retries: a session that failed in a way its neighbours may have caused (an
out-of-memory or a dead worker while sharing the GPU) raises
:class:`harness.execute.parent.session.RetryAlone`; the task is run once more with
the device to itself, and the record of that attempt is the one kept (it
says so). Nothing else is retried: a candidate's own crash is its status.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable

from harness.execute.parent import cpus, isolation
from harness.execute.checker.main import cache_limit_bytes as checker_cache_bytes
from harness.execute.parent.checker_client import CheckerPool
from harness.execute.parent.gate import DeviceGate
from harness.execute.parent.memory import DeviceMemory, device_capacity, fake_capacity, fixed_bytes
from harness.execute.parent.options import POOL_MAX, RunOptions
from harness.execute.parent.pool import Demand, WorkerPool
from harness.execute.parent.process import gpu_probe, run_tag
from harness.execute.parent.scheduler import DeviceUnhealthy, ScheduleReport, run_pull
from harness.execute.parent.session import RetryAlone, Session
from harness.execute.parent.task import DeviceContext, Task
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status
from harness.results.ids import static_record


def _env_for(env: EnvSnapshot, gpu: int) -> EnvSnapshot:
    """The run's environment snapshot, with this GPU's own identity and clocks."""
    from harness import env as envmod

    return dataclasses.replace(envmod.snapshot("cuda", gpu), sandbox=env.sandbox)


class LocalExecutor:
    """Checkers, gates, memory admission and pre-started workers for each device, alive until :meth:`close`."""

    def __init__(self, opts: RunOptions, env: EnvSnapshot, run_id: str, *, problem_paths: list[Path],
                 expected_tasks: int, screen_for: Callable[[Any], Callable | None] | None = None,
                 standing: bool = False):
        self.o, self.run_id = opts, run_id
        # before any process: a run that cannot confine its workers as asked stops here (IsolationUnavailable)
        self.confinement = isolation.require(opts.isolation_level, opts.device)
        if self.confinement.missing and opts.isolation_level == "available":
            warnings.warn("kernelgate: workers run with less than the full boundary on this machine (--isolation "
                          f"available): missing {'; '.join(self.confinement.missing)[:600]}", RuntimeWarning,
                          stacklevel=2)
        self.key = _kept_key(opts)
        self.problem_paths = frozenset(Path(p).resolve() for p in problem_paths)
        self.gpus: list[int | None] = list(opts.gpus) if opts.device == "cuda" else [None]
        root = Path(opts.scratch_root or "/tmp").resolve()
        slots = max(1, opts.check_slots) if opts.device == "cuda" else 1  # on CPU the checks would share the timed cores
        self.per_device = max(1, opts.jobs // len(self.gpus))
        self.demand = Demand(expected_tasks, standing=standing)  # standing: kept between runs (KeptExecutor)
        pool_size = min(2 * self.per_device, POOL_MAX)
        self.devices: dict[int | None, DeviceContext] = {}
        self.checker_dirs: list[Path] = []
        cpu_plans = cpus.plans(len(self.gpus)) if opts.device == "cuda" else [None] * len(self.gpus)
        for g, plan in zip(self.gpus, cpu_plans):
            denv = env if g in (None, self.gpus[0]) else _env_for(env, g)
            tag = "cpu" if g is None else str(g)
            fixed = fixed_bytes(pool_size + slots + self.per_device, slots, checker_cache_bytes())
            # on the CPU path only a fake capacity (KERNELGATE_FAKE_DEVICE_MEMORY_GB, for tests) is admitted against
            capacity = device_capacity(g) if opts.device == "cuda" else fake_capacity()
            memory = DeviceMemory(capacity, opts.memory_margin, fixed)
            gate = DeviceGate(slots, opts.context_starts)
            pool = (WorkerPool(opts, g, root, run_tag(run_id), problem_paths, pool_size, self.demand, cpus=plan,
                               gate=gate if opts.device == "cuda" else None)
                    if opts.prestart and expected_tasks else None)
            self.checker_dirs.append(root / f"checker-{run_tag(run_id)}-{tag}")
            self.devices[g] = DeviceContext(
                opts=opts, env=denv, run_id=run_id, gpu=g,
                checkers=CheckerPool(opts.device, g, self.checker_dirs[-1], size=slots, threads=opts.cpu_threads,
                                     cpus=plan),
                gate=gate, memory=memory, pool=pool, screen_for=screen_for, cpus=plan,
                slots=threading.BoundedSemaphore(self.per_device))

    def rebind(self, opts: RunOptions, env: EnvSnapshot, run_id: str, *, problem_paths: list[Path],
               expected_tasks: int, screen_for: Callable[[Any], Callable | None] | None) -> bool:
        """Serve another run with this executor's processes: True when the run's device-level options are the
        ones they were built from and its problems are among those the pre-started workers were sandboxed for
        (then the run's options, seed, environment and id apply from here on); else False, nothing changed."""
        if _kept_key(opts) != self.key or not {Path(p).resolve() for p in problem_paths} <= self.problem_paths:
            return False
        self.o, self.run_id = opts, run_id
        for g, dev in list(self.devices.items()):
            denv = env if g in (None, self.gpus[0]) else _env_for(env, g)
            # the gate, memory, pool, checkers and learned library facts are the same objects
            self.devices[g] = dataclasses.replace(dev, opts=opts, env=denv, run_id=run_id, screen_for=screen_for)
        self.demand.add(expected_tasks)
        for dev in self.devices.values():
            if dev.pool is not None:
                dev.pool.refill()
        return True

    def _run_one(self, task: Task, dev: DeviceContext) -> list[JobResult]:
        # a run beside this one (a kept executor's next batch) shares the device's job slots
        with dev.slots or contextlib.nullcontext():
            return self._run_session(task, dev)

    def _run_session(self, task: Task, dev: DeviceContext) -> list[JobResult]:
        try:
            return Session(task, dev).run()
        except RetryAlone as exc:
            reason = exc.reason
        except DeviceUnhealthy:
            raise
        except Exception as exc:  # noqa: BLE001 - the harness's own failure: never the candidate's, never lost
            reason = f"the harness failed ({type(exc).__name__}: {exc})"
            if task.alone:
                return self._harness_error(task, dev, exc)
        again = dataclasses.replace(task, alone=True, attempt=task.attempt + 1, reason=reason)
        self.demand.add(1)
        try:
            return Session(again, dev).run()
        except DeviceUnhealthy:
            raise
        except Exception as exc:  # noqa: BLE001
            return self._harness_error(again, dev, exc)

    def _harness_error(self, task: Task, dev: DeviceContext, exc: Exception) -> list[JobResult]:
        """HARNESS_ERROR records for every workload of a task whose session raised (a slot thread must never die
        with its task: the task would be lost and the device's locks held)."""
        import traceback

        error = ErrorInfo(type(exc).__name__, f"the harness failed while evaluating this candidate (not the "
                                               f"candidate's fault; run it again with --rerun): {exc}",
                          traceback.format_exc()[-3000:])
        return [static_record(task.candidate, task.problem, w, Status.HARNESS_ERROR, error, dev.env, dev.run_id,
                              task.diagnostics, mode=task.mode, baseline=dev.opts.baseline, base_seed=dev.opts.base_seed)
                for w in task.workloads]

    def run(self, tasks: list[Task], emit: Callable[[Task, list[JobResult]], None], stop: Any = None,
            on_drained: Callable[[], None] | None = None) -> ScheduleReport:
        """Run ``tasks``; ``emit(task, records)`` is called once per task, in completion order; ``on_drained()``
        once every task has started (:func:`harness.execute.parent.scheduler.run_pull`).

        The devices' contexts (options, run id, seed, environment) are this run's, taken now: a run of a kept
        executor started beside this one (:meth:`rebind`) changes the executor's, never this run's."""
        devices = dict(self.devices)

        def recheck(g: int | None) -> bool:
            return g is None or gpu_probe(g).healthy

        return run_pull(tasks, self.gpus, self.per_device, lambda task, g: self._run_one(task, devices[g]), emit,
                        recheck=recheck, stop=stop, on_drained=on_drained)

    def close(self) -> None:
        for dev in self.devices.values():
            if dev.pool is not None:
                dev.pool.close()
        for dev in self.devices.values():
            dev.checkers.close()
        if not self.o.keep_scratch:
            import shutil

            for folder in self.checker_dirs:
                shutil.rmtree(folder, ignore_errors=True)


def _kept_key(opts: RunOptions) -> tuple:
    """The options a LocalExecutor's processes, gates and plans are built from (a run with others needs a new one)."""
    return (opts.device, tuple(opts.gpus), opts.jobs, opts.check_slots, opts.isolation_level, opts.max_file_bytes,
            opts.cpu_threads, opts.prestart, opts.spawn, opts.context_starts, str(opts.scratch_root), opts.memory_margin, opts.keep_scratch)


MAX_SHARED_RUNS = 2
"""Runs of one kept executor at once: a run and the next one, started once the first's tasks have all begun
(its tail; :func:`harness.execute.parent.scheduler.run_pull`'s ``on_drained``)."""


class KeptExecutor:
    """One :class:`LocalExecutor` kept between runs by a long-lived caller (a service lane), so that its checkers
    and pre-started workers outlive a batch.

    Why: each run starting its own cost the service's H200 load test 15-22 s between batches of 64, a quarter of
    its time. Its pools keep their pre-started workers ready between runs (``Demand.standing``): with the kept
    executor but pools that emptied as each run's demand ran out, the load test still had 10-13 s between
    batches: the first twelve records of each batch had waited a median 8.2 s for a worker.
    :meth:`acquire` rebinds the kept executor to the next run when it can (:meth:`LocalExecutor.rebind`);
    otherwise it is closed and replaced by one sandboxed for the old and the new problems.

    Two runs may share it at once (:data:`MAX_SHARED_RUNS`), so a lane can start its next batch while the
    last tasks of the current one finish: they share the device's gate (timing stays exclusive across both),
    memory admission and job slots (together never more sessions than ``--jobs``). A later run must acquire
    only after the earlier one's :meth:`LocalExecutor.run` has begun (each run takes its devices' contexts
    when it starts; the lane starts the next once the first's tasks have all begun). A run that cannot share
    it (other device options or problems its workers were not sandboxed for, a third run, a broken one still
    in use) waits until no run uses it: a second executor would bring a second gate to the same GPU, and the
    two runs would time each other's kernels. :meth:`release` after every run; ``broken`` (an interrupted
    run, a retired device) closes it once no run uses it.
    """

    def __init__(self, problem_paths: Iterable[Path] = ()) -> None:
        """``problem_paths``: problems to sandbox the first executor's workers for besides its run's own."""
        self._ex: LocalExecutor | None = None
        self._users = 0
        self._broken = False
        self._lock = threading.Condition()
        self._known = frozenset(Path(p).resolve() for p in problem_paths)

    @property
    def _busy(self) -> bool:
        return self._users > 0

    def acquire(self, opts: RunOptions, env: EnvSnapshot, run_id: str, *, problem_paths: list[Path],
                expected_tasks: int, screen_for: Callable[[Any], Callable | None] | None) -> tuple[LocalExecutor, bool]:
        """(executor, kept): ``kept`` False means the caller owns the executor and closes it."""
        args = dict(expected_tasks=expected_tasks, screen_for=screen_for)
        with self._lock:
            while True:
                old = self._ex
                if (old is not None and not self._broken and self._users < MAX_SHARED_RUNS
                        and old.rebind(opts, env, run_id, problem_paths=problem_paths, **args)):
                    self._users += 1
                    return old, True
                if not self._users:
                    self._ex, self._users, self._broken = None, 1, False
                    break
                self._lock.wait()  # in use and not shareable: after the runs using it (one gate per GPU)
        paths = sorted({Path(p).resolve() for p in problem_paths} | (set(old.problem_paths) if old else set())
                       | self._known)
        try:
            if old is not None:
                old.close()
            ex = LocalExecutor(opts, env, run_id, problem_paths=paths, standing=True, **args)
        except BaseException:
            with self._lock:
                self._users = 0
                self._lock.notify_all()
            raise
        with self._lock:
            self._ex = ex
        return ex, True

    def release(self, ex: LocalExecutor, *, broken: bool = False) -> None:
        with self._lock:
            if ex is not self._ex:
                return
            self._users = max(0, self._users - 1)
            self._broken = self._broken or broken
            close = self._broken and not self._users
            if close:
                self._ex, self._broken = None, False
            self._lock.notify_all()
        if close:
            ex.close()

    def close(self) -> None:
        with self._lock:
            ex, self._ex = self._ex, None
        if ex is not None:
            ex.close()
