"""Synthetic results records for the report, compare and CLI tests (no GPU, no runs).

Timings are deterministic pseudo-random samples around a chosen median;
screenings come from the real gates (:func:`harness.score.gates.screen`) with
the fixed :data:`CEILINGS`, so verdicts are what a run would have recorded.
"""

from __future__ import annotations

import hashlib
import random
import statistics

from harness.records import CorrectnessStats, EnvSnapshot, ErrorInfo, JobResult, Status, TimingStats

CEILINGS = {"dram_bytes_per_s": 4.0e12,
            "peaks_flops_per_s": {"fp32_simt": 5.0e13, "tf32": 4.0e14, "fp16": 7.0e14, "bf16": 7.0e14}}

ENV_H200 = EnvSnapshot(device_kind="cuda", device_name="NVIDIA H200", device_uuid="GPU-1111", driver="570.86",
                       python="3.11.9", torch="2.11.0", triton="3.5.0", tilelang="0.1.6", harness="0.1.0")
ENV_OTHER = EnvSnapshot(device_kind="cuda", device_name="NVIDIA H100 80GB HBM3", device_uuid="GPU-2222",
                        driver="575.51", python="3.11.9", torch="2.11.0", triton="3.5.0", tilelang="0.1.6",
                        harness="0.1.0")

ENV_CPU = EnvSnapshot(device_kind="cpu", device_name="AMD EPYC", device_uuid=None, driver=None, python="3.11.7",
                      torch="2.13.0+cpu", triton="3.9.0", tilelang="0.1.15", harness="0.1.0")

# problem -> (category, {workload: (flops, min_bytes)})
PROBLEMS = {
    "layernorm": ("normalization", {"fp16-32768x4096": (8 * 32768 * 4096, (2 * 32768 * 4096 + 2 * 4096) * 2),
                                    "bf16-65536x2560": (8 * 65536 * 2560, (2 * 65536 * 2560 + 2 * 2560) * 2)}),
    "softmax": ("reduction", {"fp16-16384x8192": (5 * 16384 * 8192, 2 * 16384 * 8192 * 2)}),
    "gemm_square": ("gemm", {"fp16-8192": (2 * 8192**3, 3 * 8192 * 8192 * 2)}),
}


def floor_ms(problem: str, workload: str) -> float:
    from harness.score.gates import compute_unit
    from harness.score.gates import floor_ms as gfloor

    cat, wls = PROBLEMS[problem]
    flops, nbytes = wls[workload]
    return gfloor(flops, nbytes, CEILINGS, compute_unit(cat, "float16", False))[0]


def timing(median_ms: float, *, rel_spread: float = 0.02, n: int = 41, seed: int = 0) -> TimingStats:
    """``n`` (odd) samples within +-rel_spread of ``median_ms``, whose median is exactly ``median_ms``."""
    rng = random.Random(f"{median_ms}-{seed}")
    k = (n - 1) // 2  # k samples below, k above: the median is exactly median_ms
    lows = [median_ms * (1 - rel_spread * rng.uniform(0.001, 1)) for _ in range(k)]
    highs = [median_ms * (1 + rel_spread * rng.uniform(0.001, 1)) for _ in range(k)]
    samples = tuple(lows + [median_ms] + highs)
    q = statistics.quantiles(samples, n=4)
    return TimingStats(median_ms=statistics.median(samples), iqr_ms=q[2] - q[0], min_ms=min(samples),
                       mean_ms=statistics.fmean(samples), samples_ms=samples, timer="cuda_event", l2_flush=True)


def record(generator: str, version: str, problem: str, workload: str, *, status: str = "PASSED",
           t_kernel: float | None = None, t_library: float | None = None, candidate: str | None = None,
           run_id: str = "run-1", env: EnvSnapshot = ENV_H200, created_at: str = "2025-01-01T00:00:00+00:00",
           dsl: str = "triton", diagnostics: tuple[dict, ...] = (), screen: bool = True, rel_spread: float = 0.02,
           seed: int = 0, error: str | None = None) -> JobResult:
    """One record; timing/screening only when status is PASSED and both times are given.

    ``env=ENV_CPU`` gives a CPU-path record that still carries a screening,
    as harnesses before the CPU-path change wrote them. ``error``: the error
    message of a failed record (default ``synthetic STATUS``).
    """
    from harness.score.gates import screen as gscreen

    cat, wls = PROBLEMS[problem]
    flops, nbytes = wls[workload]
    candidate = candidate or f"{problem}.py"
    st = Status(status)
    kt = lt = scr = None
    err = None
    corr = CorrectnessStats(rounds_run=5, rounds_passed=5, max_abs_err=1e-3, max_excess=0.1, atol=1e-2, rtol=1e-2)
    if st is Status.PASSED and t_kernel is not None and t_library is not None:
        kt = timing(t_kernel, rel_spread=rel_spread, seed=seed)
        lt = timing(t_library, rel_spread=rel_spread, seed=seed + 1)
        if screen:
            scr = gscreen(category=cat, dtype="float16", allow_tf32=False, flops=flops, min_bytes=nbytes, kernel=kt,
                          library=lt, ceilings=CEILINGS)
            if scr.verdict.value == "reward_hack":
                st = Status.REWARD_HACK
                err = ErrorInfo("BelowPhysicalMinimum", scr.reason)
    elif st.is_failure:
        err = ErrorInfo("Synthetic", error or f"synthetic {status}")
        if st is Status.INCORRECT_NUMERICAL:
            corr = CorrectnessStats(5, 2, 0.5, 12.0, 1e-2, 1e-2, failed_round=2, detail="max excess 12x")
    jid = hashlib.sha256(f"{generator}|{version}|{candidate}|{problem}|{workload}".encode()).hexdigest()[:20]
    return JobResult(
        job_id=jid, run_id=run_id, candidate=candidate,
        candidate_sha256=hashlib.sha256(f"{generator}|{version}|{candidate}".encode()).hexdigest(),  # each its own code
        generator=generator, generator_version=version, problem_id=problem, category=cat, workload=workload,
        dtype="float16", dsl=dsl, status=st, flops=flops, min_bytes=nbytes, env=env, created_at=created_at, error=err,
        correctness=corr if st is not Status.LOWERED else None, timing=kt, library_timing=lt, screening=scr,
        diagnostics=diagnostics, problem_version="abc123",
    )


LN1, LN2 = "fp16-32768x4096", "bf16-65536x2560"
SM, GM = "fp16-16384x8192", "fp16-8192"


def suite() -> list[JobResult]:
    """Four generators/versions, two runs on one GPU plus one on another, a superseded record."""
    f = floor_ms
    defect = ({"rule": "sequential-reduction", "severity": "defect", "line": 12, "message": "serial loop", "hint": "use tl.sum"},)
    out = [
        # gen-a@1, run-1: slower than the library on layernorm, fast softmax, wrong gemm
        record("gen-a", "1", "layernorm", LN1, t_kernel=f("layernorm", LN1) * 3.0, t_library=f("layernorm", LN1) * 1.25),
        record("gen-a", "1", "layernorm", LN2, t_kernel=f("layernorm", LN2) * 2.8, t_library=f("layernorm", LN2) * 1.3),
        record("gen-a", "1", "softmax", SM, t_kernel=f("softmax", SM) * 1.2, t_library=f("softmax", SM) * 1.5),
        record("gen-a", "1", "gemm_square", GM, status="INCORRECT_NUMERICAL"),
        # gen-a@2, run-2: better everywhere
        record("gen-a", "2", "layernorm", LN1, t_kernel=f("layernorm", LN1) * 1.15, t_library=f("layernorm", LN1) * 1.25,
               run_id="run-2", created_at="2025-01-02T00:00:00+00:00"),
        record("gen-a", "2", "layernorm", LN2, t_kernel=f("layernorm", LN2) * 1.2, t_library=f("layernorm", LN2) * 1.3,
               run_id="run-2", created_at="2025-01-02T00:00:00+00:00"),
        record("gen-a", "2", "softmax", SM, t_kernel=f("softmax", SM) * 1.1, t_library=f("softmax", SM) * 1.5,
               run_id="run-2", created_at="2025-01-02T00:00:00+00:00"),
        record("gen-a", "2", "gemm_square", GM, t_kernel=f("gemm_square", GM) * 1.6, t_library=f("gemm_square", GM) * 1.4,
               run_id="run-2", created_at="2025-01-02T00:00:00+00:00"),
        # gen-b@1, run-1 (same session as gen-a@1): two layernorm candidates, one broken
        record("gen-b", "1", "layernorm", LN1, candidate="layernorm__v2.py", status="RUNTIME_ERROR"),
        record("gen-b", "1", "layernorm", LN1, candidate="layernorm.py", t_kernel=f("layernorm", LN1) * 6.0,
               t_library=f("layernorm", LN1) * 1.25, diagnostics=defect),
        record("gen-b", "1", "layernorm", LN2, candidate="layernorm.py", t_kernel=f("layernorm", LN2) * 5.5,
               t_library=f("layernorm", LN2) * 1.3, diagnostics=defect),
        record("gen-b", "1", "softmax", SM, status="COMPILE_ERROR"),
        record("gen-b", "1", "gemm_square", GM, t_kernel=f("gemm_square", GM) * 1.5, t_library=f("gemm_square", GM) * 1.4),
        # gen-c@1 on another GPU: TileLang lowered only, plus one reward hack
        record("gen-c", "1", "layernorm", LN1, status="LOWERED", dsl="tilelang", env=ENV_OTHER, run_id="run-3"),
        record("gen-c", "1", "softmax", SM, t_kernel=f("softmax", SM) * 0.3, t_library=f("softmax", SM) * 1.5,
               dsl="tilelang", env=ENV_OTHER, run_id="run-3"),
    ]
    # an older record of gen-a@2's gemm job (same job_id, earlier): must be superseded by the PASSED one
    old = record("gen-a", "2", "gemm_square", GM, status="TIMEOUT", run_id="run-0", created_at="2024-12-31T00:00:00+00:00")
    return [old] + out
