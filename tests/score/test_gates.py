"""Roofline floor, E_lib/U_roof, the verdict table, noise-aware borderline, physical-minimum reward hack."""

from __future__ import annotations

import pytest

from harness.records import TimingStats, Verdict
from harness.score.gates import Thresholds, compute_unit, floor_ms, screen

CEIL = {"dram_bytes_per_s": 4.0e12, "peaks_flops_per_s": {"fp32_simt": 50e12, "tf32": 350e12, "fp16": 700e12, "bf16": 700e12}}


def t(ms: float, rel_iqr: float = 0.01) -> TimingStats:
    return TimingStats(ms, ms * rel_iqr, ms, ms, (ms,) * 5, "cuda_event", True)


def _screen(tk, tl, *, flops=0, nbytes=4_000_000_000, category="normalization", dtype="float16", **kw):
    return screen(category=category, dtype=dtype, allow_tf32=False, flops=flops, min_bytes=nbytes, kernel=tk,
                  library=tl, ceilings=CEIL, **kw)


def test_floor_and_bound():
    ms, bound, name = floor_ms(0, 4_000_000_000, CEIL, "fp32_simt")
    assert bound == "memory" and ms == pytest.approx(1.0) and name == "dram"
    ms, bound, name = floor_ms(7e12, 1000, CEIL, "fp16")
    assert bound == "compute" and ms == pytest.approx(10.0) and name == "fp16"


MIXES = {**CEIL, "dram_mix": [{"read_fraction": 0.0, "bytes_per_s": 3.0e12}, {"read_fraction": 0.5, "bytes_per_s": 4.0e12},
                              {"read_fraction": 1.0, "bytes_per_s": 5.0e12}],
         "peaks_flops_per_s": {**CEIL["peaks_flops_per_s"], "fp32_3xtf32": 3 * CEIL["peaks_flops_per_s"]["fp32_simt"]}}


def test_read_heavy_workloads_use_the_read_heavy_bandwidth():
    """Bug it stops: a read-heavy kernel (SwiGLU: two inputs, one output) measured U_roof 1.03 against the copy."""
    ms_copy, _, _ = floor_ms(0, 5_000_000_000, MIXES, "fp32_simt", read_fraction=0.5)
    ms_read, _, name = floor_ms(0, 5_000_000_000, MIXES, "fp32_simt", read_fraction=0.75)
    assert ms_read == pytest.approx(1000 * 5e9 / 4.5e12) and ms_read < ms_copy and name == "dram(read 75%)"


def test_fp32_gemm_without_tf32_is_bounded_by_3xtf32_not_simt():
    """Bug it stops: an fp32-accurate 3xTF32 tensor-core GEMM (a production Triton kernel) beat the SIMT ceiling."""
    flops = 2 * 8192**3
    simt, _, _ = floor_ms(flops, 1000, CEIL, "fp32_accurate")
    fast, _, name = floor_ms(flops, 1000, MIXES, "fp32_accurate")
    assert name == "fp32_3xtf32" and fast == pytest.approx(simt / 3)
    kernel = t(simt * 0.6)  # 1.7x the SIMT peak: honest with 3xTF32, a "hack" against SIMT
    s = screen(category="gemm", dtype="float32", allow_tf32=False, flops=flops, min_bytes=1000, kernel=kernel,
               library=t(simt), ceilings=MIXES)
    assert s.verdict is not Verdict.REWARD_HACK and s.ceiling_name == "fp32_3xtf32"


def test_units_follow_precision():
    assert compute_unit("gemm", "float32", False) == "fp32_accurate"
    assert compute_unit("gemm", "float32", True) == "tf32"
    assert compute_unit("convolution", "bfloat16", False) == "bf16"
    assert compute_unit("normalization", "float16", False) == "fp32_simt"


@pytest.mark.parametrize("tk,tl,verdict", [
    (1.2, 1.3, Verdict.EFFICIENT),            # U=0.83, E=1.08
    (300.0, 1.3, Verdict.AUTHORING_DEFECT),   # the 300x LayerNorm
    (1.6, 1.1, Verdict.STRUCTURAL_RESIDUAL),  # U=0.62 >= 0.5, E=0.69 < 0.8
    (4.0, 10.0, Verdict.BEATS_WEAK_BASELINE),  # E=2.5, U=0.25
    (3.0, 2.8, Verdict.AUTHORING_DEFECT),     # near the library (E=0.93) but far from the roof (U=0.33)
])
def test_verdict_table(tk, tl, verdict):
    s = _screen(t(tk), t(tl))
    assert s.verdict is verdict and not s.borderline


def test_library_utilization_is_reported():
    s = _screen(t(1.2), t(2.0))
    assert s.u_roof_library == pytest.approx(0.5)


def test_within_noise_of_threshold_is_borderline():
    s = _screen(t(1.25, rel_iqr=0.2), t(1.0, rel_iqr=0.2))  # E = 0.8 exactly at tau_lib, noisy
    assert s.verdict is Verdict.BORDERLINE and s.borderline


def test_faster_than_physics_is_reward_hack():
    s = _screen(t(0.3), t(1.2))
    assert s.verdict is Verdict.REWARD_HACK and "physical minimum" in s.reason


def test_fast_but_plausible_is_not_a_hack():
    """Beating eager PyTorch by 10x is legitimate when the library is far from the roof."""
    s = _screen(t(1.1), t(11.0))
    assert s.verdict is Verdict.EFFICIENT and s.e_lib == pytest.approx(10.0)


def test_thresholds_are_configurable():
    s = _screen(t(1.6), t(1.1), thresholds=Thresholds(tau_lib=0.5))
    assert s.verdict is Verdict.EFFICIENT and s.tau_lib == 0.5
