"""Run the candidates of one evaluation as Ray tasks, possibly on many machines.

The same shape as :class:`harness.execute.parent.local.LocalExecutor`: build a
:class:`RayExecutor`, :meth:`RayExecutor.run` tasks, :meth:`RayExecutor.close`.
The driver (the process that planned the run) does everything it does in a
local run -- discovery, static scans, resume bookkeeping, writing
``results.jsonl`` -- and each task becomes one Ray task::

    driver                                   node (one Ray worker process per task)
    ------                                   --------------------------------------
    candidate bytes (as scanned) + problem   write them to a task folder
    RayTask (frozen, picklable)       ─────> rebuild Candidate/Problem on those copies
                                             a checker pool and a device context for this task
    ray.wait: as each task finishes  <────── Session(...).run() -> records as dicts
    emit() -> results.jsonl (driver only)

Why these choices:

* **One GPU per task** (``num_gpus=1``; ``num_cpus=1`` on the CPU path), so Ray
  does the device bookkeeping the local runner does with its per-device lock.
  Ray sets ``CUDA_VISIBLE_DEVICES`` for the task; the Session is given the
  physical id from ``ray.get_gpu_ids()``, because the runner builds the
  worker's ``CUDA_VISIBLE_DEVICES`` from that index (``scrubbed_env``).
* **A fresh Ray worker process per task** (``max_calls=1``): nothing a task
  did (a wedged CUDA context in the checker, leaked threads) reaches the next.
  The price is a checker per task, so reference outputs are not shared
  between candidates of one problem as they are in a local run.
* **Retries for infrastructure failures only** (``max_retries``,
  ``retry_exceptions=False``). A candidate that crashes or hangs is already a
  status inside the Session (CRASHED, TIMEOUT), not an exception, so it is
  never run twice. Ray retries a task whose worker process or node died; when
  the retries are spent, or the harness itself raised on the node, every
  workload of that candidate is recorded as HARNESS_ERROR -- a task is never
  dropped silently. (A candidate that kills its own Ray worker from outside
  its sandbox looks like an infrastructure failure: it is retried and then
  recorded as HARNESS_ERROR.)
* **Niceness 0.** Ray starts its workers at niceness 15 (``RAY_worker_niceness``)
  and the candidate's worker and the checker inherit it; a Ray instance
  started by :func:`run_on_ray` gets 0, and the README's ``ray start`` lines
  set it, so timings stay comparable with a local run.
* **Sources travel with the task.** The candidate's and the problem's file
  contents are shipped in the task and written into a task folder on the node,
  so submission folders and ``--problems`` paths need to exist on the driver
  only. The *harness* must be installed on every node, at the same version and
  with the same torch/triton/tilelang as the driver (the same container image,
  or the same checkout installed with ``pip install -e .``): the node checks
  this and records HARNESS_ERROR, naming the difference, when it does not
  hold, because records carry the driver's environment snapshot and are
  screened against ceilings measured on the driver.

``ray`` is imported only inside the functions that use it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from harness.candidates.discover import Candidate
from harness.execute.parent.options import RunOptions
from harness.execute.parent.scheduler import DeviceUnhealthy, ScheduleReport
from harness.execute.parent.task import Task
from harness.problems.loader import Problem, Workload
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status
from harness.results.ids import static_record

DEFAULT_MAX_RETRIES = 2
"""Times Ray re-runs a task whose worker process or node died (not a candidate's own crash)."""

TRACEBACK_TAIL_CHARS = 3000


class NodeSetupError(Exception):
    """The node cannot produce results comparable with the driver's (harness or library versions, device)."""


@dataclass(frozen=True, slots=True)
class RayTask:
    """Everything one candidate's evaluation needs on a node; plain picklable values only."""

    candidate: Candidate
    """As discovered on the driver; its ``path`` is a driver path and is replaced on the node."""
    candidate_source: bytes
    """The candidate's bytes as scanned on the driver; their sha256 must equal ``candidate.sha256``."""
    problem: Problem
    """As loaded on the driver (``--set`` overrides included); ``path`` is replaced on the node."""
    problem_source: bytes
    """The problem file's bytes; their sha256 must equal ``problem.source_sha256``."""
    workloads: tuple[Workload, ...]
    diagnostics: tuple[dict, ...]
    """Static findings from the driver's scan, copied into every record."""
    mode: str
    options: RunOptions
    env: EnvSnapshot
    """The driver's snapshot: job ids (and so ``--resume``) depend on it."""
    run_id: str
    ceilings: dict | None
    """Device ceilings measured on the driver; None: no screening."""
    thresholds: Any
    """:class:`harness.score.gates.Thresholds` for the screening."""


def _check_node(task: RayTask, gpu: int | str | None) -> None:
    """Raise NodeSetupError, naming what differs, unless this node matches the driver."""
    from harness.version import __version__
    from harness import env as envmod

    host = socket.gethostname()
    if __version__ != task.env.harness:
        raise NodeSetupError(f"node {host} has KernelGate {__version__}, the driver {task.env.harness}; install the "
                             "same version on every node")
    node = envmod.snapshot(task.options.device, gpu if isinstance(gpu, int) else 0)
    fields = ("device_kind", "device_name", "driver", "torch", "triton", "tilelang")
    diff = [f"{f}: node {getattr(node, f)!r} vs driver {getattr(task.env, f)!r}" for f in fields
            if getattr(node, f) != getattr(task.env, f)]
    if diff:
        raise NodeSetupError(f"node {host} differs from the driver ({'; '.join(diff)}); results would not be "
                             "comparable. Use nodes with the same device and software as the driver, or run one "
                             "'kernelgate run --shard K/N' per kind of node")


def _write(folder: Path, name: str, data: bytes, expected_sha256: str, what: str) -> Path:
    if hashlib.sha256(data).hexdigest() != expected_sha256:
        raise NodeSetupError(f"{what} {name}: the shipped bytes do not match the sha256 recorded when it was "
                             "scanned (was the file edited during the run?)")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def run_task(task: RayTask) -> list[dict]:
    """Evaluate one candidate on this node; runs inside a Ray worker process.

    Returns one :meth:`JobResult.to_dict` per workload, in workload order.
    Writes only into a private task folder under the node's temp dir (or
    ``options.scratch_root`` when the user set one; it must then exist or be
    creatable on every node), removed afterwards unless ``keep_scratch``.
    Raises NodeSetupError when the node does not match the driver, and
    DeviceUnhealthy when the GPU fails its health probe after a crash (the
    Session's RuntimeError; the driver then stops the run, as a local run does).
    """
    from harness.execute.parent.checker_client import CheckerPool
    from harness.execute.parent.gate import DeviceGate
    from harness.execute.parent.memory import DeviceMemory, device_capacity
    from harness.execute.parent.process import run_tag
    from harness.execute.parent.session import RetryAlone, Session
    from harness.execute.parent.task import DeviceContext
    from harness.score.gates import screen

    gpu: int | str | None = None
    if task.options.device == "cuda":
        import ray

        ids = ray.get_gpu_ids()
        if not ids:
            raise NodeSetupError(f"Ray gave this task no GPU on node {socket.gethostname()}")
        gpu = int(ids[0]) if str(ids[0]).isdigit() else str(ids[0])
    _check_node(task, gpu)

    base = Path(task.options.scratch_root) if task.options.scratch_root else Path(tempfile.gettempdir())
    base.mkdir(parents=True, exist_ok=True)
    task_dir = Path(tempfile.mkdtemp(prefix=f"kg-ray-{run_tag(task.run_id)}-{task.candidate.sha256[:12]}-", dir=base))
    checkers = None
    try:
        c, p = task.candidate, task.problem
        _write(task_dir / "candidate", c.path.name, task.candidate_source, c.sha256, "candidate")
        cand = dataclasses.replace(c, path=task_dir / "candidate" / c.path.name)
        prob = dataclasses.replace(p, path=_write(task_dir / "problem", p.path.name, task.problem_source,
                                                  p.source_sha256, "problem"))
        opts = dataclasses.replace(task.options, scratch_root=task_dir / "scratch", jobs=1,
                                   gpus=(gpu,) if gpu is not None else task.options.gpus)
        checkers = CheckerPool(opts.device, gpu, task_dir / "checker", threads=opts.cpu_threads)

        def screen_for(problem: Any):
            if not task.ceilings:
                return None
            return lambda w, kt, lt: screen(category=problem.category, dtype=w.dtype, allow_tf32=w.allow_tf32,
                                            flops=w.flops, min_bytes=w.min_bytes, kernel=kt, library=lt,
                                            ceilings=task.ceilings, thresholds=task.thresholds,
                                            read_bytes=getattr(w, "read_bytes", None),
                                            write_bytes=getattr(w, "write_bytes", None))

        dev = DeviceContext(opts=opts, env=task.env, run_id=task.run_id, gpu=gpu if isinstance(gpu, int) else None,
                            checkers=checkers, gate=DeviceGate(1),
                            memory=DeviceMemory(device_capacity(gpu if isinstance(gpu, int) else 0)
                                                if opts.device == "cuda" else None, opts.memory_margin),
                            screen_for=screen_for)
        one = Task(candidate=cand, problem=prob, workloads=task.workloads, diagnostics=task.diagnostics,
                   source=task.candidate_source, mode=task.mode, alone=True)
        try:
            records = Session(one, dev).run()
        except RetryAlone as exc:  # a task has its GPU alone already: the failure stands as the candidate's
            raise NodeSetupError(f"the candidate failed alone on its GPU: {exc}") from None
        except DeviceUnhealthy as exc:
            raise DeviceUnhealthy(f"node {socket.gethostname()}: {exc}") from None
        return [r.to_dict() for r in records]
    finally:
        if checkers is not None:
            checkers.close()
        if not task.options.keep_scratch:
            shutil.rmtree(task_dir, ignore_errors=True)


def _failure(exc: BaseException, max_retries: int) -> ErrorInfo:
    """A Ray exception as text for the HARNESS_ERROR records of the task it ended."""
    import ray

    if isinstance(exc, ray.exceptions.RayTaskError):
        cause = exc.cause
        return ErrorInfo(type(cause).__name__ if cause is not None else "RayTaskError",
                         f"the harness failed on the Ray node (not retried): {cause if cause is not None else exc}",
                         str(exc)[-TRACEBACK_TAIL_CHARS:])
    return ErrorInfo(type(exc).__name__,
                     f"Ray lost this task {max_retries + 1} time(s): its worker process or node died (infrastructure "
                     f"failures are retried {max_retries} time(s), a candidate's own crash never is): {exc}",
                     str(exc)[-TRACEBACK_TAIL_CHARS:])


class RayExecutor:
    """Each task as one Ray task (one GPU, a fresh Ray worker process); the driver emits every record."""

    def __init__(self, options: RunOptions, env: EnvSnapshot, run_id: str, *, ceilings: dict | None = None,
                 thresholds: Any = None, address: str | None = None, progress: bool = True,
                 max_retries: int = DEFAULT_MAX_RETRIES):
        self.options, self.env, self.run_id = options, env, run_id
        self.ceilings, self.thresholds, self.address = ceilings, thresholds, address
        self.progress, self.max_retries = progress, max_retries
        self._started_here = False

    def run(self, tasks: Sequence[Task], emit: Callable[[Task, list[JobResult]], None], stop: Any = None,
            on_drained: Callable[[], None] | None = None) -> ScheduleReport:
        """Run ``tasks`` on the cluster; ``emit(task, records)`` once per task, in completion order;
        ``on_drained()`` once every task has been submitted to Ray (Ray schedules them as GPUs free up).

        ``address`` is passed to ``ray.init``: None connects to ``RAY_ADDRESS`` or
        the cluster started on this machine with ``ray start``, else starts a
        private local instance; ``"auto"`` insists on an existing cluster. If Ray
        is already initialised in this process (a test, a notebook), that
        connection is used and left open; otherwise it is shut down at close.

        Every task ends in exactly one batch of records per workload: the
        session's records, or HARNESS_ERROR records built here when the task
        could not produce them. A GPU that fails its health probe on a node
        cancels the tasks not yet finished and raises RuntimeError, as in a
        local run; ``--resume`` continues with them. Any other error raised on
        a node (a node that differs from the driver, a node without KernelGate
        installed) becomes HARNESS_ERROR records for that task; ``--resume``
        counts those as done (``--rerun`` evaluates them again).
        """
        report = ScheduleReport()
        if not tasks:
            return report
        try:
            import ray
        except ModuleNotFoundError:
            raise ModuleNotFoundError("the Ray executor needs the 'ray' package: pip install 'kernelgate[ray]'") from None
        options, env, run_id = self.options, self.env, self.run_id

        def fail(task: Task, error: ErrorInfo) -> None:
            emit(task, [static_record(task.candidate, task.problem, w, Status.HARNESS_ERROR, error, env, run_id,
                                      task.diagnostics, mode=task.mode, baseline=options.baseline,
                                      base_seed=options.base_seed) for w in task.workloads])

        if not ray.is_initialized():
            self._started_here = True
            # Ray runs its workers at niceness 15 unless told otherwise, and the candidate's worker and the
            # checker inherit it; 0 keeps timings comparable with a local run. Affects only a Ray instance
            # started here.
            os.environ.setdefault("RAY_worker_niceness", "0")
            try:
                ray.init(address=self.address)
            except ConnectionError as exc:
                raise ConnectionError(f"cannot reach a Ray cluster at --ray-address {self.address!r}: {exc}. Start "
                                      "one with 'ray start --head' (and 'ray start --address HEAD:6379' on the other "
                                      "nodes)") from None
        resources = {"num_gpus": 1} if options.device == "cuda" else {"num_cpus": 1}
        remote = ray.remote(max_calls=1, max_retries=self.max_retries, retry_exceptions=False, **resources)(run_task)
        pending: dict[Any, Task] = {}
        bar = None
        if self.progress:
            from tqdm import tqdm

            bar = tqdm(total=len(tasks), desc="candidates (ray)", unit="cand", dynamic_ncols=True)
        try:
            for task in tasks:
                try:
                    spec = RayTask(task.candidate, task.source, task.problem, task.problem.path.read_bytes(),
                                   tuple(task.workloads), task.diagnostics, task.mode, options, env, run_id,
                                   self.ceilings, self.thresholds)
                except OSError as exc:
                    fail(task, ErrorInfo(type(exc).__name__, f"cannot read a file to ship to Ray: {exc}"))
                    if bar is not None:
                        bar.update(1)
                    continue
                pending[remote.remote(spec)] = task
            if on_drained is not None:
                on_drained()
            while pending:
                if stop is not None and stop.is_set():
                    break
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                task = pending.pop(ref)
                try:
                    rows = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    if isinstance(exc.cause, DeviceUnhealthy):  # stop scheduling, as the local run does
                        raise RuntimeError(str(exc.cause)) from None
                    fail(task, _failure(exc, self.max_retries))
                except ray.exceptions.RayError as exc:
                    fail(task, _failure(exc, self.max_retries))
                else:
                    emit(task, [JobResult.from_dict(row) for row in rows])
                report.done += 1
                if bar is not None:
                    bar.set_postfix_str(task.candidate.rel_path[-40:], refresh=False)
                    bar.update(1)
        finally:
            for ref in pending:
                ray.cancel(ref)
            if bar is not None:
                bar.close()
        return report

    def close(self) -> None:
        if self._started_here:
            import ray

            ray.shutdown()
            self._started_here = False
