"""Generation prompts for every bundled problem and both DSLs, with and without feedback."""

from __future__ import annotations

import hashlib

import pytest

from harness.problems.registry import load_registry
from harness.prompts.render import DSLS, render_all, render_prompt
from harness.records import CorrectnessStats, EnvSnapshot, ErrorInfo, JobResult, Screening, Status, TimingStats, Verdict

REGISTRY = load_registry()
ENV = EnvSnapshot(device_kind="cuda", device_name="NVIDIA H200", device_uuid="GPU-1", driver="570", python="3.11",
                  torch="2.11", triton="3.5", tilelang="0.1.6", harness="0.1.0")


def _rec(problem: str, workload: str, status: Status, **kw) -> JobResult:
    return JobResult(job_id=hashlib.sha256(f"{problem}{workload}".encode()).hexdigest()[:20], run_id="r1",
                     candidate=f"{problem}.py", candidate_sha256="0" * 64, generator="gen", generator_version="1",
                     problem_id=problem, category="normalization", workload=workload, dtype="float16", dsl="triton",
                     status=status, flops=1, min_bytes=1, env=ENV, created_at="2025-01-01T00:00:00+00:00", **kw)


def test_registry_loaded():
    assert len(REGISTRY) >= 20 and not REGISTRY.errors


@pytest.mark.parametrize("dsl", DSLS)
@pytest.mark.parametrize("pid", sorted(REGISTRY.problems))
def test_prompt_for_every_problem(pid, dsl):
    p = REGISTRY.get(pid)
    text = render_prompt(p, dsl)
    assert f"`{p.id}`" in text and p.library_op in text
    assert p.path.read_text().strip().splitlines()[-1] in text  # the whole source is embedded
    for w in p.workloads:
        assert f"| {w.name} | {w.dtype} |" in text
    for op in p.library_aten:
        assert op in text
    assert "ModelNew" in text and "REWARD_HACK" in text and "5 rounds" in text
    if dsl == "triton":
        assert "@triton.jit" in text and "fp32" in text and "T.prim_func" not in text
    else:
        assert "@tilelang.jit(out_idx=" in text and "T.prim_func" in text and "T.Kernel" in text
        assert "T.reduce_sum" in text and "@triton.jit" not in text
    if p.category == "gemm":
        assert ("tl.dot" in text) if dsl == "triton" else ("T.gemm" in text and "T.Pipelined" in text)
    assert "previous attempt" not in text
    assert "{{" not in text and "{%" not in text


def test_unknown_dsl_is_refused():
    with pytest.raises(ValueError, match="dsl"):
        render_prompt(REGISTRY.get("layernorm"), "cuda")


def test_feedback_failure_and_diagnostics():
    p = REGISTRY.get("layernorm")
    recs = [
        _rec("layernorm", "smoke", Status.INCORRECT_NUMERICAL, error=ErrorInfo("Mismatch", "outputs differ"),
             correctness=CorrectnessStats(5, 2, 0.5, 12.0, 1e-2, 1e-2, failed_round=2, detail="max excess 12x at [3, 7]"),
             diagnostics=({"rule": "sequential-reduction", "severity": "defect", "line": 14,
                           "message": "serial loop over the row", "hint": "reduce with tl.sum over a block"},)),
        _rec("layernorm", "fp16-32768x4096", Status.RUNTIME_ERROR,
             error=ErrorInfo("RuntimeError", "illegal memory access", "Traceback ...\nRuntimeError: illegal memory access")),
    ]
    text = render_prompt(p, "triton", feedback=recs)
    assert "## Your previous attempt (`layernorm.py`, gen@1)" in text
    assert "| smoke | INCORRECT_NUMERICAL | incorrect |" in text
    assert "illegal memory access" in text and "round 2: max excess 12x at [3, 7]" in text
    assert "[sequential-reduction] (defect) line 14: serial loop over the row Fix: reduce with tl.sum" in text
    assert "Fix the failure first" in text


def test_feedback_timed_pass_shows_metrics():
    p = REGISTRY.get("layernorm")
    t = TimingStats(0.4, 0.01, 0.39, 0.4, (0.39, 0.4, 0.41), "cuda_event", True)
    lt = TimingStats(0.2, 0.01, 0.19, 0.2, (0.19, 0.2, 0.21), "cuda_event", True)
    scr = Screening(e_lib=0.5, u_roof=0.3, u_roof_library=0.6, t_floor_ms=0.12, bound="memory", ceiling_name="dram",
                    verdict=Verdict.AUTHORING_DEFECT, borderline=False, tau_lib=0.8, tau_roof=0.5,
                    reason="E_lib=0.5 (< 0.8); U_roof=0.3 (< 0.5, memory-bound)")
    rec = _rec("layernorm", "fp16-32768x4096", Status.PASSED, timing=t, library_timing=lt, screening=scr)
    text = render_prompt(p, "tilelang", feedback=rec)
    assert "| fp16-32768x4096 | PASSED | authoring_defect | 0.4 | 0.2 | 0.5 | 0.3 | memory |" in text
    assert "E_lib=0.5 (< 0.8)" in text and "Make it faster" in text


def test_feedback_for_another_problem_is_refused():
    with pytest.raises(ValueError, match="not 'layernorm'"):
        render_prompt(REGISTRY.get("layernorm"), "triton", feedback=_rec("softmax", "smoke", Status.PASSED))


def test_render_all(tmp_path):
    paths = render_all(REGISTRY, "tilelang", tmp_path)
    assert len(paths) == len(REGISTRY)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{pid}.tilelang.md" for pid in REGISTRY.problems)
