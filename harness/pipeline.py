"""``kernelgate run``: problems -> candidates -> static screens -> isolated execution -> results.

The function :func:`evaluate` is what the CLI calls. It does the trusted,
cheap work in this process (loading problems, parsing candidates, static
anti-cheat and defect scans, resume bookkeeping, writing results) and hands
every candidate to a :class:`harness.execute.runner.Session`, which runs it in
its own worker process: on this machine from a thread pool, or, with
``executor="ray"``, as one Ray task per candidate on a cluster
(:mod:`harness.execute.ray_executor`); either way records are written here.
"""

from __future__ import annotations

import ast
import secrets
import sys
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from harness.candidates.discover import Candidate, discover
from harness.execute.gate import DeviceGate
from harness.execute.runner import Checker, Demand, RunOptions, Session, WorkerPool, job_id
from harness.execute.scheduler import run_pull
from harness.problems.loader import Problem, Workload
from harness.problems.registry import Registry
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status
from harness.results.store import ResultStore


@dataclass
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
    skipped: list[str] = field(default_factory=list)
    executor: str = "local"
    """``local``: a thread pool on this machine; ``ray``: one Ray task per candidate
    (:mod:`harness.execute.ray_executor`)."""
    ray_address: str | None = None
    """With ``executor="ray"``, passed to ``ray.init``: None ($RAY_ADDRESS, a cluster started on
    this machine, else a new private one), ``auto`` (an existing cluster only) or HOST:PORT."""


def expected_cost_class(cand: Candidate) -> int:
    """2: TileLang (nvcc compiles), 1: Triton with autotune configs, 0: the rest (an order, not a promise)."""
    if cand.dsl == "tilelang":
        return 2
    try:
        return int("autotune" in cand.path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return 0

def in_shard(cand: Candidate, shard: tuple[int, int] | None) -> bool:
    """Stable assignment by content hash, so any launcher can split a run into n parts."""
    if shard is None:
        return True
    k, n = shard
    import hashlib

    h = int(hashlib.sha256(f"{cand.sha256}|{cand.rel_path}".encode()).hexdigest()[:12], 16)
    return h % n == k - 1


def _static_record(cand: Candidate, problem: Problem | None, w: Workload | None, status: Status, error: ErrorInfo,
                   env: EnvSnapshot, run_id: str, diagnostics: tuple[dict, ...] = ()) -> JobResult:
    wname = w.name if w else "*"
    if problem is not None and w is not None:
        jid = job_id(cand, problem, w, env)
    else:
        import hashlib

        jid = hashlib.sha256(f"{cand.sha256}|{cand.problem_id}|*|{env.comparable_key()}".encode()).hexdigest()[:20]
    return JobResult(
        job_id=jid, run_id=run_id, candidate=cand.rel_path, candidate_sha256=cand.sha256, generator=cand.generator,
        generator_version=cand.generator_version, problem_id=cand.problem_id,
        category=problem.category if problem else "unknown", workload=wname, dtype=w.dtype if w else "-", dsl=cand.dsl,
        status=status, flops=w.flops if w else 0, min_bytes=w.min_bytes if w else 0, env=env,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"), error=error, diagnostics=diagnostics,
        problem_version=problem.version if problem else "",
    )


def _scan(cand: Candidate) -> tuple[ErrorInfo | None, Status | None, tuple[dict, ...]]:
    """Parse + static scans in the trusted process (no candidate code runs)."""
    from harness.diagnose.anticheat import scan_source
    from harness.diagnose.lint import lint_source

    try:
        source = cand.path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return ErrorInfo(type(exc).__name__, f"{cand.path}: cannot be read as UTF-8 text ({exc})"), Status.INVALID_CANDIDATE, ()
    try:
        ast.parse(source, filename=str(cand.path))
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


def screen_for(prob: Problem, ceilings: dict | None, thresholds: Any) -> Callable[..., Any] | None:
    """The Session's screening callback for ``prob``; None when no ceilings were measured (``--no-timing``)."""
    if not ceilings:
        return None
    from harness.score.gates import screen

    def _screen(w: Workload, kt, lt):
        return screen(category=prob.category, dtype=w.dtype, allow_tf32=w.allow_tf32, flops=w.flops,
                      min_bytes=w.min_bytes, kernel=kt, library=lt, ceilings=ceilings, thresholds=thresholds)
    return _screen


def _env_for(env: EnvSnapshot, gpu: int) -> EnvSnapshot:
    """The run's environment snapshot, with this GPU's own identity and clocks."""
    import dataclasses

    from harness import env as envmod

    return dataclasses.replace(envmod.snapshot("cuda", gpu), sandbox=env.sandbox)


def evaluate(req: EvalRequest) -> list[JobResult]:
    from harness.score.gates import Thresholds

    if req.executor not in ("local", "ray"):
        raise ValueError(f"executor {req.executor!r}: expected 'local' or 'ray'")
    opts = req.options
    store = ResultStore(req.out_dir)
    done = store.done_job_ids() if req.resume and not req.rerun else set()
    run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)
    results: list[JobResult] = []
    write_lock = threading.Lock()

    def emit(r: JobResult) -> None:
        with write_lock:
            store.append(r)
            results.append(r)
            if req.on_result:
                req.on_result(r)

    tasks: list[tuple[Candidate, Problem, list[Workload], tuple[dict, ...]]] = []
    for folder in req.submissions:
        _, cands = discover(folder, kernelbench_map=req.kernelbench_map, problem_ids=list(req.registry.problems))
        for cand in cands:
            if req.only_problems and cand.problem_id not in req.only_problems:
                continue
            if not in_shard(cand, req.shard):
                continue
            if cand.problem_id not in req.registry:
                try:
                    req.registry.get(cand.problem_id)
                except KeyError as exc:
                    rec = _static_record(cand, None, None, Status.INVALID_CANDIDATE, ErrorInfo("UnknownProblem", str(exc)),
                                         req.env, run_id)
                if rec.job_id not in done:
                    emit(rec)
                continue
            prob = req.registry.get(cand.problem_id)
            wls = prob.select(req.workload_tags or None, req.workload_names or None)
            wls = [w for w in wls if job_id(cand, prob, w, req.env) not in done]
            if not wls:
                req.skipped.append(cand.rel_path)
                continue
            err, status, diags = _scan(cand)
            if err is not None:
                for w in wls:
                    emit(_static_record(cand, prob, w, status, err, req.env, run_id, diags))
                continue
            tasks.append((cand, prob, wls, diags))

    # Longest first, then problem order: candidates whose compile is slow (TileLang's
    # nvcc, Triton autotuning) start first so they do not end the run alone; within
    # a class the candidates of one problem follow each other (the checker caches a
    # problem's reference outputs).
    tasks.sort(key=lambda t: (-expected_cost_class(t[0]), t[1].category, t[1].id, t[0].rel_path))
    thresholds = req.thresholds or Thresholds()
    if req.executor == "ray":
        from harness.execute.ray_executor import run_on_ray

        run_on_ray(tasks, options=opts, env=req.env, run_id=run_id, emit=emit, ceilings=req.ceilings,
                   thresholds=thresholds, address=req.ray_address, progress=req.progress)
        return results

    gpus = list(opts.gpus) if opts.device == "cuda" else [None]
    # absolute: workers run with their scratch folder as working directory
    scratch_root = Path(opts.scratch_root or (req.out_dir / ".scratch")).resolve()
    opts.scratch_root = scratch_root
    envs = {g: req.env if g in (None, gpus[0]) else _env_for(req.env, g) for g in gpus}
    slots = max(1, opts.check_slots) if opts.device == "cuda" else 1  # on CPU the checks would share the timed cores
    checkers = {g: Checker(opts.device, g, scratch_root / f"checker-{g if g is not None else 'cpu'}", size=slots)
                for g in gpus}
    locks = {g: DeviceGate(slots) for g in gpus}
    per_device = max(1, opts.jobs // len(gpus))
    problem_paths = sorted({t[1].path.resolve() for t in tasks})
    tilelang = any(t[0].dsl == "tilelang" for t in tasks)  # then pooled workers import it while they wait
    # two spare workers per job (up to 8): a worker starts in ~5 s on the H200 host, longer than
    # a fast candidate takes, so one spare per job would still keep the next candidate waiting
    demand = Demand(len(tasks))  # no pool keeps more workers ready than candidates are left
    pools = {g: WorkerPool(opts, g, scratch_root, run_id[:8], problem_paths, min(2 * per_device, 8), tilelang, demand)
             for g in gpus} if opts.prestart and tasks else {}
    bar = None
    if req.progress:
        from tqdm import tqdm

        bar = tqdm(total=len(tasks), desc="candidates", unit="cand", dynamic_ncols=True)

    def run_task(task, g) -> list[JobResult]:
        cand, prob, wls, diags = task
        sess = Session(cand, prob, wls, opts, envs[g], run_id, checkers[g], locks[g], g, diags,
                       screen_for(prob, req.ceilings, thresholds), pool=pools.get(g))
        return sess.run()

    def done(task, recs: list[JobResult]) -> None:
        for r in recs:
            emit(r)
        if bar is not None:
            bar.set_postfix_str(f"{task[0].rel_path[-40:]}", refresh=False)
            bar.update(1)

    try:
        report = run_pull(tasks, gpus, per_device, run_task, done)
    finally:
        for pool in pools.values():
            pool.close()
        if bar is not None:
            bar.close()
        for c in checkers.values():
            c.close()
    for g, why in report.retired.items():
        print(f"warning: device {g} retired: {why}", file=sys.stderr)
    if report.not_run:
        raise RuntimeError(f"{len(report.not_run)} candidate(s) not run: every device failed its health probe "
                           f"({'; '.join(report.retired.values())}); rerun with --resume once the GPU is healthy")
    return results
