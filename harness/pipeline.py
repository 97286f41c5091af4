"""``kernelgate run``'s planner: problems -> candidates -> static screens -> tasks -> an executor -> results.

:func:`run_evaluation` does the trusted, cheap work in this process (reading
each candidate's bytes once, static anti-cheat and defect scans on those
bytes, resume bookkeeping, ordering) and hands the tasks to an executor
(:class:`harness.execute.parent.local.LocalExecutor`, or the Ray executor), which
runs every candidate in its own worker process. Records are written here, by
this process only, as tasks finish. Nothing under ``harness/execute/``
imports this module.
"""

from __future__ import annotations

import dataclasses
import hashlib
import secrets
import signal
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from harness import astparse
from harness.candidates.discover import Candidate, discover
from harness.execute.parent.options import RunOptions
from harness.execute.parent.task import Task
from harness.problems.loader import Problem, Workload
from harness.problems.registry import Registry
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status
from harness.results.ids import job_id, static_record
from harness.results.store import ResultStore


@dataclass(frozen=True)
class EvalRequest:
    submissions: list[Path]
    registry: Registry
    out_dir: Path
    options: RunOptions
    env: EnvSnapshot
    workload_tags: tuple[str, ...] = ()
    workload_names: tuple[str, ...] = ()
    only_problems: tuple[str, ...] = ()
    kernelbench_map: str | None = None
    resume: bool = False
    rerun: bool = False
    ceilings: dict | None = None
    thresholds: Any = None
    progress: bool = True
    on_result: Callable[[JobResult], None] | None = None
    shard: tuple[int, int] | None = None
    """(k, n): take only the k-th of n stable shares of the candidates (1-based k)."""
    executor: str = "local"
    """``local``: this machine's devices; ``ray``: one Ray task per candidate (:mod:`harness.execute.parent.ray_executor`)."""
    ray_address: str | None = None
    """With ``executor="ray"``, passed to ``ray.init``: None ($RAY_ADDRESS, a cluster started on
    this machine, else a new private one), ``auto`` (an existing cluster only) or HOST:PORT."""
    keeper: Any = None
    """With ``executor="local"``: a :class:`harness.execute.parent.local.KeptExecutor` whose executor serves this run
    and stays up after it (a service lane's); None: the run starts and stops its own."""
    extra_workloads: dict = field(default_factory=dict)
    """Problem id -> extra (secret) workloads to evaluate beside the selected public ones."""
    secret_count: int = 0
    """Secret workloads per problem drawn from its ``secret`` ranges with the run's secret base seed."""
    recursive: bool = False
    """Also take candidate files in subfolders of a submission folder."""
    on_drained: Callable[[], None] | None = None
    """Called (at most once) when every candidate of the run has started: its tail begins, and a service lane
    starts its next batch beside it. A run with nothing to execute may never call it."""


@dataclass
class RunOutcome:
    results: list[JobResult]
    skipped: list[str]
    """Candidates all of whose jobs were already recorded (``--resume``)."""
    run_id: str
    not_run: int = 0


def expected_cost_class(source: str, dsl: str) -> int:
    """2: TileLang (nvcc compiles), 1: Triton with autotune configs, 0: the rest (an order, not a promise)."""
    if dsl == "tilelang":
        return 2
    return int("autotune" in source)


def in_shard(cand: Candidate, shard: tuple[int, int] | None) -> bool:
    """Stable assignment by content hash, so any launcher can split a run into n parts."""
    if shard is None:
        return True
    k, n = shard
    h = int(hashlib.sha256(f"{cand.sha256}|{cand.rel_path}".encode()).hexdigest()[:12], 16)
    return h % n == k - 1


def scan(cand: Candidate, source: str) -> tuple[ErrorInfo | None, Status | None, tuple[dict, ...]]:
    """Parse + static scans of the bytes that will run (no candidate code runs here)."""
    from harness.diagnose.anticheat import scan_source
    from harness.diagnose.lint import lint_source

    try:
        astparse.parse(source, filename=str(cand.path))
    except SyntaxError as exc:
        return (ErrorInfo("SyntaxError", f"{cand.path}:{exc.lineno}:{exc.offset}: {exc.msg}", (exc.text or "").rstrip()),
                Status.COMPILE_ERROR, ())
    dsl = cand.dsl if cand.dsl in ("triton", "tilelang", "torch") else None
    diags = tuple(f.to_dict() for f in lint_source(source, filename=str(cand.path), dsl=dsl))
    cheats = scan_source(source, filename=str(cand.path))
    diags += tuple(f.to_dict() for f in cheats)
    fails = [f for f in cheats if f.severity == "fail"]
    if fails:
        msg = "; ".join(f"line {f.line}: [{f.rule}] {f.message}" for f in fails)
        return ErrorInfo("StaticAntiCheat", f"not executed: {msg}"), Status.REWARD_HACK, diags
    return None, None, diags


def screen_for(ceilings: dict | None, thresholds: Any) -> Callable[[Problem], Callable | None]:
    """Problem -> the session's screening callback; None everywhere when no ceilings were measured."""
    from harness.score.gates import screen

    def for_problem(prob: Problem) -> Callable | None:
        if not ceilings:
            return None

        def _screen(w: Workload, kt, lt):
            return screen(category=prob.category, dtype=w.dtype, allow_tf32=w.allow_tf32, flops=w.flops,
                          min_bytes=w.min_bytes, kernel=kt, library=lt, ceilings=ceilings, thresholds=thresholds,
                          read_bytes=getattr(w, "read_bytes", None), write_bytes=getattr(w, "write_bytes", None))
        return _screen
    return for_problem


def _source_of(cand: Candidate) -> tuple[bytes | None, str | None]:
    """The bytes that will run (read once, at discovery), or an error naming the file and what is wrong."""
    if cand.source_error:
        return None, cand.source_error
    if cand.source:
        data = cand.source.encode("utf-8")
        if hashlib.sha256(data).hexdigest() != cand.sha256:
            return None, f"{cand.path}: the code to run does not match its recorded hash; rerun"
        return data, None
    try:
        data = cand.path.read_bytes()
    except OSError as exc:
        return None, f"{cand.path}: cannot be read ({exc.strerror})"
    if hashlib.sha256(data).hexdigest() != cand.sha256:
        return None, f"{cand.path}: changed since it was discovered; rerun"
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, f"{cand.path}: is not UTF-8 text ({exc})"
    return data, None


SOURCES_DIR = "sources"
"""``OUT/sources/<sha256>.py``: the code each candidate ran, kept beside its records (see :func:`keep_source`)."""


def kept_source_path(out_dir: Path, sha256: str) -> Path:
    """Where :func:`keep_source` keeps the code whose sha256 is ``sha256`` for the results folder (or file) ``out_dir``."""
    from harness.results.store import results_path

    return results_path(out_dir).parent / SOURCES_DIR / f"{sha256}.py"


def keep_source(out_dir: Path, data: bytes) -> Path:
    """Keep ``data`` (the code a candidate ran, as hashed into its records' ``candidate_sha256``) in ``out_dir``.

    Content-addressed and written once (atomically), so ``kernelgate prompt --feedback OUT`` finds the previous
    code from any working directory, and a submission folder moved or edited after the run does not matter.
    """
    from harness.jsonio import atomic_write_text

    path = kept_source_path(out_dir, hashlib.sha256(data).hexdigest())
    if not path.exists():
        atomic_write_text(path, data.decode("utf-8"))
    return path


def unloaded_problem(registry: Registry, *names: str) -> str | None:
    """Why the problem file named like one of ``names`` (its stem) did not load, or None when none failed.

    A candidate named after a problem whose file fails at import (or is
    malformed) matches no loaded problem; without this it would be blamed as
    an invalid candidate ("matches no loaded problem"). The text names the
    problem file, the field, the error and the fix.
    """
    for err in getattr(registry, "errors", ()):
        path = getattr(err, "path", "")
        if path and path != "--set" and Path(path).stem in names:
            return (f"problem file {path} did not load, so this candidate was not evaluated: {err.field!r}: {err.why}; "
                    f"fix the problem file ('kernelgate problems list --problems {Path(path).parent}' shows the "
                    "error) and run again")
    return None


def plan(req: EvalRequest, run_id: str, emit: Callable[[JobResult], None], done: set[str],
         skipped: list[str]) -> list[Task]:
    """The tasks to run; records decided without running (unknown problem, static scan) go to ``emit``."""
    opts = req.options
    tasks: list[Task] = []
    from harness.problems.secret import secret_workloads

    levels = req.registry.levels() if hasattr(req.registry, "levels") else None
    for folder in req.submissions:
        _, cands = discover(folder, kernelbench_map=req.kernelbench_map, problem_ids=list(req.registry.problems),
                            levels=levels, recursive=req.recursive)
        for cand in cands:
            if req.only_problems and cand.problem_id not in req.only_problems:
                continue
            if not in_shard(cand, req.shard):
                continue
            if cand.mapping_error or cand.problem_id not in req.registry:
                broken = unloaded_problem(req.registry, Path(cand.path).stem.split("__")[0], cand.problem_id)
                if broken is not None:  # the problem's file is at fault, not the candidate
                    rec = static_record(cand, None, None, Status.HARNESS_ERROR, ErrorInfo("ProblemNotLoaded", broken),
                                        req.env, run_id, base_seed=opts.base_seed)
                    if rec.job_id not in done:
                        emit(rec)
                    continue
                message = cand.mapping_error
                if message is None:
                    try:
                        req.registry.get(cand.problem_id)
                    except KeyError as exc:
                        message = str(exc)
                rec = static_record(cand, None, None, Status.INVALID_CANDIDATE, ErrorInfo("UnknownProblem", message),
                                    req.env, run_id, base_seed=opts.base_seed)
                if rec.job_id not in done:
                    emit(rec)
                continue
            prob = req.registry.get(cand.problem_id)
            mode = opts.mode or getattr(prob, "default_mode", "eval")
            wls = prob.select(req.workload_tags or None, req.workload_names or None)
            wls = list(wls) + list(req.extra_workloads.get(prob.id, ()))
            if req.secret_count:
                wls += secret_workloads(prob, opts.base_seed, req.secret_count)
            wls = [w for w in wls if job_id(cand, prob, w, req.env, mode=mode, baseline=opts.baseline) not in done]
            if not wls:
                skipped.append(cand.rel_path)
                continue
            data, problem = _source_of(cand)
            if data is not None:
                keep_source(req.out_dir, data)
            if data is None:
                code = Status.COMPILE_ERROR if problem.startswith(("not valid Python", "a Markdown reply")) \
                    else Status.INVALID_CANDIDATE
                for w in wls:
                    emit(static_record(cand, prob, w, code, ErrorInfo("UnreadableCandidate", problem),
                                       req.env, run_id, mode=mode, baseline=opts.baseline, base_seed=opts.base_seed))
                continue
            err, status, diags = scan(cand, data.decode("utf-8"))
            if err is not None:
                evidence = {"mechanism": "static_scan", "rules": sorted({d["rule"] for d in diags
                                                                        if d.get("severity") == "fail"})}
                for w in wls:
                    emit(static_record(cand, prob, w, status, err, req.env, run_id, diags, mode=mode,
                                       baseline=opts.baseline, base_seed=opts.base_seed, evidence=evidence))
                continue
            tasks.append(Task(candidate=cand, problem=prob, workloads=tuple(wls), diagnostics=diags, source=data,
                              mode=mode, notes=(cand.extraction,) if cand.extraction else ()))
    # Longest first, then problem order: candidates whose compile is slow (TileLang's nvcc, Triton
    # autotuning) start first so they do not end the run alone; within a class the candidates of one
    # problem follow each other (the checker caches a problem's reference outputs).
    tasks.sort(key=lambda t: (-expected_cost_class(t.source.decode("utf-8", "replace"), t.candidate.dsl),
                              t.problem.category, t.problem.id, t.candidate.rel_path))
    return tasks


def run_evaluation(req: EvalRequest) -> RunOutcome:
    """Plan, run on the chosen executor, write every record to ``OUT/results.jsonl`` as it arrives."""
    from harness.score.gates import Thresholds

    if req.executor not in ("local", "ray"):
        raise ValueError(f"executor {req.executor!r}: expected 'local' or 'ray'")
    store = ResultStore(req.out_dir)
    done = _done_job_ids(store) if req.resume and not req.rerun else set()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    results: list[JobResult] = []
    write_lock = threading.Lock()

    def emit(r: JobResult) -> None:
        with write_lock:
            store.append(r)
            results.append(r)
            if req.on_result:
                req.on_result(r)

    skipped: list[str] = []
    tasks = plan(req, run_id, emit, done, skipped)
    # absolute: workers run with their scratch folder as working directory
    opts = dataclasses.replace(req.options, scratch_root=Path(req.options.scratch_root or
                                                              (req.out_dir / ".scratch")).resolve())
    thresholds = req.thresholds or Thresholds()
    outcome = RunOutcome(results, skipped, run_id)
    if not tasks:
        return outcome
    kept = False
    canary = canary_task()
    if req.executor == "ray":
        from harness.execute.parent.ray_executor import RayExecutor

        executor: Any = RayExecutor(opts, req.env, run_id, ceilings=req.ceilings, thresholds=thresholds,
                                    address=req.ray_address, progress=req.progress)
    else:
        from harness.execute.parent.local import LocalExecutor

        paths = {t.problem.path.resolve() for t in tasks} | ({canary.problem.path.resolve()} if canary else set())
        local = dict(problem_paths=sorted(paths), expected_tasks=len(tasks), screen_for=screen_for(req.ceilings, thresholds))
        if req.keeper is not None:
            executor, kept = req.keeper.acquire(opts, req.env, run_id, **local)
        else:
            executor = LocalExecutor(opts, req.env, run_id, **local)
    bar = None
    if req.progress and req.executor == "local":
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="candidates", unit="cand", dynamic_ncols=True)

    from harness.score.environment import InterpreterPaths, Watch

    stop = threading.Event()  # pull no more tasks (an interrupt, or the environment watch)
    interrupted = threading.Event()
    watch = Watch(InterpreterPaths.of_this_interpreter(str(PROJECT_ROOT)))

    def done_task(task: Task, recs: list[JobResult]) -> None:
        if interrupted.is_set():  # the harness killed this candidate's worker, it did not crash
            return
        if watch.see(recs):
            for r in recs:
                emit(r)
        elif watch.stop:
            stop.set()
        if bar is not None:
            bar.set_postfix_str(task.candidate.rel_path[-40:], refresh=False)
            bar.update(1)

    broken = True
    fault = None
    with _sigterm_interrupts():
        try:
            report = executor.run(tasks, done_task, stop=stop, on_drained=req.on_drained)
            broken = bool(report.retired)
            if watch.held:  # suspects: the canary decides whether the environment or the candidates failed
                stopped = list(report.not_run) if stop.is_set() else []
                fault = _settle(watch, executor, canary, emit)
                if fault is None and stopped:  # the environment works: carry on with the candidates not yet run
                    watch.cleared = True
                    stop.clear()
                    rest = executor.run(stopped, done_task, stop=stop)
                    report.not_run, broken = rest.not_run, broken or bool(rest.retired)
                    report.retired.update(rest.retired)
                    _settle(watch, None, None, emit)  # the canary spoke already: any new suspects are the candidates'

        except KeyboardInterrupt:
            _interrupted(stop, interrupted, opts.scratch_root, run_id)
            raise
        finally:
            if kept:
                req.keeper.release(executor, broken=broken)  # a retired device or an interrupt: not kept
            else:
                executor.close()
            if bar is not None:
                bar.close()
    for g, why in report.retired.items():
        print(f"warning: device {g} retired: {why}", file=sys.stderr)
    outcome.not_run = len(report.not_run)
    if fault is not None:
        from harness.score.environment import is_environment_fault

        n_env = sum(is_environment_fault(r) for r in results)
        what = (f"{n_env} record(s) failed because of the environment (a known-good bundled kernel failed the same "
                f"way): {fault.explain(str(PROJECT_ROOT))}")
        if not watch.cleared:  # no candidate got through: every other one would fail the same way
            raise EnvironmentBroken(f"stopped early: {what}; {len(report.not_run)} candidate(s) not run")
        print(f"warning: {what}", file=sys.stderr)
    if report.not_run:
        raise RuntimeError(f"{len(report.not_run)} candidate(s) not run: every device failed its health probe "
                           f"({'; '.join(report.retired.values())}); rerun with --resume once the GPU is healthy")
    return outcome


def _done_job_ids(store: ResultStore) -> set[str]:
    """The job ids ``--resume`` skips: every recorded one but environment faults (evaluated again once fixed)."""
    from harness.jsonio import read_jsonl
    from harness.score.environment import ENVIRONMENT_FAULT

    if not store.path.exists():
        return set()

    def bad_line(path: Path, lineno: int, message: str) -> None:
        print(f"warning: {message}", file=sys.stderr)

    return {d["job_id"] for d in read_jsonl(store.path, on_bad_line=bad_line) if "job_id" in d
            and not (d.get("status") == "HARNESS_ERROR" and (d.get("error") or {}).get("type") == ENVIRONMENT_FAULT)}


class EnvironmentBroken(RuntimeError):
    """The run stopped early: its first candidates and the canary failed on the interpreter's own files."""


PROJECT_ROOT = Path(__file__).resolve().parents[1]
"""The checkout (the folder holding ``harness/``, ``problems/`` and ``submissions/``): hidden from candidates."""
CANARY = ("submissions/triton-reference/gelu.py", "problems/elementwise/gelu.py", "smoke")
"""The known-good bundled kernel that confirms an environment fault: (candidate, problem, workload) under
:data:`PROJECT_ROOT`. Triton, so it runs wherever KernelGate runs (interpreted on the CPU path)."""


def canary_task() -> Task | None:
    """The canary as a task (:data:`CANARY`), or None when the bundled files are not there (an installed wheel)."""
    from harness.candidates.discover import Candidate
    from harness.problems.loader import load_problem

    cand_path, prob_path, workload = (PROJECT_ROOT / CANARY[0], PROJECT_ROOT / CANARY[1], CANARY[2])
    if not (cand_path.is_file() and prob_path.is_file()):
        return None
    problem = load_problem(prob_path)
    data = cand_path.read_bytes()
    cand = Candidate(path=cand_path, rel_path="kernelgate-canary/gelu.py", problem_id=problem.id, variant="",
                     dsl="triton", sha256=hashlib.sha256(data).hexdigest(), generator="kernelgate-canary",
                     generator_version="0", source=data.decode("utf-8"))
    return Task(candidate=cand, problem=problem, workloads=tuple(problem.select(None, (workload,))), diagnostics=(),
                source=data, mode=problem.default_mode)


def _settle(watch: Any, executor: Any, canary: Task | None, emit: Callable[[JobResult], None]) -> Any:
    """Run the canary (when there is one and an executor), write the held records as :meth:`Watch.resolve` says;
    the confirmed environment fault, or None."""
    got: list[JobResult] = []
    if executor is not None and canary is not None:
        executor.run([canary], lambda task, recs: got.extend(recs))
    records, fault = watch.resolve(got if (executor is not None and canary is not None) else None)
    for r in records:
        emit(r)
    return fault


def evaluate(req: EvalRequest) -> list[JobResult]:
    """The records of one evaluation (:func:`run_evaluation` without the bookkeeping)."""
    return run_evaluation(req).results


def _interrupted(stop: threading.Event, interrupted: threading.Event, scratch_root: Path | None, run_id: str) -> None:
    """Ctrl-C or SIGTERM: pull no more tasks, drop what the killed workers report, kill every process this run
    started, remove its scratch."""
    import shutil

    from harness.execute.parent.children import kill_all
    from harness.execute.parent.process import run_tag

    interrupted.set()
    stop.set()
    kill_all()
    if scratch_root is not None and scratch_root.is_dir():
        for d in scratch_root.glob(f"kg-{run_tag(run_id)}-*"):
            shutil.rmtree(d, ignore_errors=True)


class _sigterm_interrupts:
    """Turn SIGTERM (``timeout``, a batch system) into KeyboardInterrupt while the run is on, so both end it
    the same way: records written so far stay, every process started ends, ``--resume`` continues."""

    def __init__(self) -> None:
        self._old: Any = None

    def __enter__(self) -> "_sigterm_interrupts":
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGTERM, self._term)
        return self

    @staticmethod
    def _term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    def __exit__(self, *exc: Any) -> None:
        if self._old is not None:
            signal.signal(signal.SIGTERM, self._old)
