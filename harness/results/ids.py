"""Job ids and the records made without running anything: the one place for both.

A job id is the content hash of everything a result depends on, so
``--resume`` and the leaderboard's "latest record per job" key on it: the
candidate's bytes *and* who submitted them (generator and version: the same
file in ``mymodel@1`` and ``mymodel@2`` is two jobs), the problem and its
version, the workload with its effective sizes and dtype, the mode and
baseline, the environment (device model, driver, library versions: not which
physical GPU of that model) and the harness version.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from typing import Any

from harness.version import __version__
from harness.records import EnvSnapshot, ErrorInfo, JobResult, Status


def job_id(cand: Any, problem: Any, workload: Any, env: EnvSnapshot, *, mode: str = "eval",
           baseline: str = "eager") -> str:
    key = "|".join(map(str, (
        cand.sha256, cand.generator, cand.generator_version, cand.problem_id,
        problem.id if problem is not None else "-", problem.version if problem is not None else "-",
        workload.name if workload is not None else "*", workload.dtype if workload is not None else "-",
        sorted(workload.params.items()) if workload is not None else (), mode, baseline,
        env.comparable_key(), __version__,
    )))
    return hashlib.sha256(key.encode()).hexdigest()[:20]


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def static_record(cand: Any, problem: Any, workload: Any, status: Status, error: ErrorInfo, env: EnvSnapshot,
                  run_id: str, diagnostics: tuple[dict, ...] = (), *, mode: str = "eval", baseline: str = "eager",
                  base_seed: int | None = None, evidence: dict | None = None) -> JobResult:
    """A record decided before (or instead of) running: a static scan, an unknown problem, a harness failure."""
    w = workload
    return JobResult(
        job_id=job_id(cand, problem, w, env, mode=mode, baseline=baseline), run_id=run_id, candidate=cand.rel_path,
        candidate_sha256=cand.sha256, generator=cand.generator, generator_version=cand.generator_version,
        problem_id=cand.problem_id, category=problem.category if problem is not None else "unknown",
        workload=w.name if w is not None else "*", dtype=w.dtype if w is not None else "-", dsl=cand.dsl,
        status=status, flops=w.flops if w is not None else 0, min_bytes=w.min_bytes if w is not None else 0, env=env,
        created_at=now(), error=error, diagnostics=diagnostics,
        problem_version=problem.version if problem is not None else "",
        allow_tf32=bool(w.allow_tf32) if w is not None else False, base_seed=base_seed,
        params=dict(w.params) if w is not None else None, secret=bool(getattr(w, "secret", False)),
        mode=mode, baseline=baseline, evidence=evidence if status is Status.REWARD_HACK else None,
    )
