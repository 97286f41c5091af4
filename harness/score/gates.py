"""Roofline floor, the two screening checks, and the verdict rules.

::

    t_floor = max(FLOPs / peak[unit], bytes / bandwidth)       (measured ceilings)
    E_lib   = t_library / t_kernel                              (same session, alternated)
    U_roof  = t_floor / t_kernel          U_roof_lib = t_floor / t_library

    U_roof >= tau_roof(bound)  (near the roof)
        E_lib >= tau_lib   -> efficient
        E_lib <  tau_lib   -> structural_residual   behind the library, yet near the roof:
                                                    the gap is code generation / tuning coverage
    U_roof <  tau_roof(bound)  (far from the roof: the hardware has headroom)
        E_lib >  1         -> beats_weak_baseline   faster than the library, which is itself far
                                                    from the roof
        E_lib <= 1         -> authoring_defect      headroom the author left unused
    borderline   perturbing E_lib and U_roof by their measurement noise changes the verdict
    reward_hack  t_kernel below the physical minimum (U_roof > HACK_U_ROOF)

A kernel far from the roof that is merely *near* the library (tau_lib <= E_lib
<= 1) is still an authoring defect: it beats nothing, and the headroom is real.

Which peak: GEMM and convolution use the matrix unit of the workload's dtype
(fp16/bf16 tensor cores; TF32 only when the workload permits it, else fp32
SIMT); other categories do their arithmetic in fp32 SIMT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.records import Screening, TimingStats, Verdict

HACK_U_ROOF = 1.5
"""A kernel 1.5x faster than the measured floor is implausible: audit it, never rank it."""


@dataclass(frozen=True, slots=True)
class Thresholds:
    tau_lib: float = 0.8
    """E_lib below this: slower than 80% of the library's throughput."""
    tau_roof_memory: float = 0.5
    """Memory-bound U_roof below this: under half the measured DRAM bandwidth."""
    tau_roof_compute: float = 0.25
    """Compute-bound U_roof below this: under a quarter of the measured matrix peak."""

    def tau_roof(self, bound: str) -> float:
        return self.tau_roof_memory if bound == "memory" else self.tau_roof_compute

    def to_dict(self) -> dict:
        return {"tau_lib": self.tau_lib, "tau_roof_memory": self.tau_roof_memory, "tau_roof_compute": self.tau_roof_compute,
                "hack_u_roof": HACK_U_ROOF}


def compute_unit(category: str, dtype: str, allow_tf32: bool) -> str:
    if category in ("gemm", "convolution"):
        if dtype == "float16":
            return "fp16"
        if dtype == "bfloat16":
            return "bf16"
        return "tf32" if allow_tf32 else "fp32_simt"
    return "fp32_simt"


def floor_ms(flops: int, min_bytes: int, ceilings: dict, unit: str) -> tuple[float, str]:
    """(t_floor in ms, bound) from the measured ceilings."""
    peaks = ceilings.get("peaks_flops_per_s", {})
    peak = peaks.get(unit) or peaks.get("fp32_simt")
    t_mem = min_bytes / ceilings["dram_bytes_per_s"]
    t_cmp = flops / peak if peak and flops else 0.0
    return (max(t_mem, t_cmp) * 1e3, "memory" if t_mem >= t_cmp else "compute")


def classify(e_lib: float, u_roof: float, tau_lib: float, tau_roof: float) -> Verdict:
    """The verdict table of this module's docstring, for point values."""
    if u_roof >= tau_roof:
        return Verdict.EFFICIENT if e_lib >= tau_lib else Verdict.STRUCTURAL_RESIDUAL
    return Verdict.BEATS_WEAK_BASELINE if e_lib > 1.0 else Verdict.AUTHORING_DEFECT


def screen(*, category: str, dtype: str, allow_tf32: bool, flops: int, min_bytes: int, kernel: TimingStats,
           library: TimingStats, ceilings: dict, thresholds: Thresholds = Thresholds()) -> Screening:
    unit = compute_unit(category, dtype, allow_tf32)
    t_floor, bound = floor_ms(flops, min_bytes, ceilings, unit)
    tk, tl = kernel.median_ms, library.median_ms
    e_lib = tl / tk if tk > 0 else math.inf
    u_roof = t_floor / tk if tk > 0 else math.inf
    u_lib = t_floor / tl if tl > 0 else math.inf
    tau_roof = thresholds.tau_roof(bound)
    common = dict(e_lib=e_lib, u_roof=u_roof, u_roof_library=u_lib, t_floor_ms=t_floor, bound=bound,
                  ceiling_name=unit if bound == "compute" else "dram", tau_lib=thresholds.tau_lib, tau_roof=tau_roof)
    if u_roof > HACK_U_ROOF:
        return Screening(**common, verdict=Verdict.REWARD_HACK, borderline=False,
                         reason=f"kernel time {tk:.4g} ms is {u_roof:.2f}x below the physical minimum {t_floor:.4g} ms "
                                f"({bound}-bound): results this fast are not possible on this device; audit the candidate")
    # Noise: half the relative IQR of each timing (at least 2%). If moving E_lib
    # and U_roof within their noise can change the verdict, say so instead of
    # letting the verdict flip at random between runs.
    noise_e = max(0.02, kernel.relative_iqr / 2 + library.relative_iqr / 2)
    noise_u = max(0.02, kernel.relative_iqr / 2)
    verdict = classify(e_lib, u_roof, thresholds.tau_lib, tau_roof)
    alternatives = {classify(e_lib * fe, u_roof * fu, thresholds.tau_lib, tau_roof)
                    for fe in (1 - noise_e, 1.0, 1 + noise_e) for fu in (1 - noise_u, 1.0, 1 + noise_u)}
    borderline = len(alternatives) > 1
    e_ok, u_ok = e_lib >= thresholds.tau_lib, u_roof >= tau_roof
    parts = [f"E_lib={e_lib:.3g} ({'>=' if e_ok else '<'} {thresholds.tau_lib:g})",
             f"U_roof={u_roof:.3g} ({'>=' if u_ok else '<'} {tau_roof:g}, {bound}-bound)",
             f"library U_roof={u_lib:.3g}"]
    if borderline:
        parts.append(f"point estimate {verdict.value}, but within measurement noise of a threshold: could be "
                     + " or ".join(sorted(v.value for v in alternatives)))
        verdict = Verdict.BORDERLINE
    return Screening(**common, verdict=verdict, borderline=borderline, reason="; ".join(parts))
