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
(fp16/bf16 tensor cores; TF32 only when the workload permits it); fp32 GEMM
and convolution without TF32 use the fastest measured method that keeps fp32
accuracy, which on tensor-core GPUs is 3xTF32 emulation (three TF32
products of split operands), not fp32 SIMT: a kernel that uses it is honest,
and with a SIMT ceiling it would look faster than the floor. Other
categories do their arithmetic in fp32 SIMT.

Which bandwidth: the measured DRAM bandwidth for the workload's mix of bytes
read and written (interpolated between the measured mixes: read-only,
2 reads : 1 write, copy, write-only); a read-heavy kernel streams faster
than a copy. The reward-hack gate uses the best ceilings measured (the
fastest mix, the fastest method), so a floor it compares with is really a floor.
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
        return "tf32" if allow_tf32 else "fp32_accurate"
    return "fp32_simt"


def peak_for(unit: str, ceilings: dict) -> tuple[float | None, str]:
    """(FLOP/s, name) of ``unit``; ``fp32_accurate`` is the faster of fp32 SIMT and 3xTF32 emulation."""
    peaks = ceilings.get("peaks_flops_per_s", {})
    if unit == "fp32_accurate":
        options = [(peaks[k], k) for k in ("fp32_simt", "fp32_3xtf32") if peaks.get(k)]
        return max(options) if options else (None, "fp32_simt")
    if peaks.get(unit):
        return peaks[unit], unit
    return peaks.get("fp32_simt"), "fp32_simt"


def bandwidth_for(read_fraction: float | None, ceilings: dict) -> tuple[float, str]:
    """(bytes/s, name) of DRAM for a mix with ``read_fraction`` of its bytes read (linear between measured mixes)."""
    mixes = sorted((float(m["read_fraction"]), float(m["bytes_per_s"])) for m in ceilings.get("dram_mix", ()))
    if not mixes or read_fraction is None:
        return ceilings["dram_bytes_per_s"], "dram"
    rf = min(1.0, max(0.0, read_fraction))
    if rf <= mixes[0][0]:
        return mixes[0][1], f"dram(read {rf:.0%})"
    for (x0, y0), (x1, y1) in zip(mixes, mixes[1:]):
        if x0 <= rf <= x1:
            y = y0 if x1 == x0 else y0 + (y1 - y0) * (rf - x0) / (x1 - x0)
            return y, f"dram(read {rf:.0%})"
    return mixes[-1][1], f"dram(read {rf:.0%})"


def best_bandwidth(ceilings: dict) -> float:
    return max([ceilings["dram_bytes_per_s"]] + [float(m["bytes_per_s"]) for m in ceilings.get("dram_mix", ())])


def floor_ms(flops: int, min_bytes: int, ceilings: dict, unit: str,
             read_fraction: float | None = None) -> tuple[float, str, str]:
    """(t_floor in ms, bound, ceiling name) from the measured ceilings."""
    peak, peak_name = peak_for(unit, ceilings)
    bw, bw_name = bandwidth_for(read_fraction, ceilings)
    t_mem = min_bytes / bw
    t_cmp = flops / peak if peak and flops else 0.0
    if t_mem >= t_cmp:
        return t_mem * 1e3, "memory", bw_name
    return t_cmp * 1e3, "compute", peak_name


def hack_floor_ms(flops: int, min_bytes: int, ceilings: dict, unit: str) -> float:
    """The floor with the best ceilings measured (any mix, the fastest accurate method): the reward-hack gate's."""
    peak, _ = peak_for(unit, ceilings)
    t_mem = min_bytes / best_bandwidth(ceilings)
    t_cmp = flops / peak if peak and flops else 0.0
    return max(t_mem, t_cmp) * 1e3


def classify(e_lib: float, u_roof: float, tau_lib: float, tau_roof: float) -> Verdict:
    """The verdict table of this module's docstring, for point values."""
    if u_roof >= tau_roof:
        return Verdict.EFFICIENT if e_lib >= tau_lib else Verdict.STRUCTURAL_RESIDUAL
    return Verdict.BEATS_WEAK_BASELINE if e_lib > 1.0 else Verdict.AUTHORING_DEFECT


def screen(*, category: str, dtype: str, allow_tf32: bool, flops: int, min_bytes: int, kernel: TimingStats,
           library: TimingStats, ceilings: dict, thresholds: Thresholds = Thresholds(), read_bytes: int | None = None,
           write_bytes: int | None = None) -> Screening:
    unit = compute_unit(category, dtype, allow_tf32)
    rf = read_bytes / (read_bytes + write_bytes) if read_bytes is not None and write_bytes and read_bytes + write_bytes else None
    t_floor, bound, ceiling_name = floor_ms(flops, min_bytes, ceilings, unit, rf)
    t_hack = hack_floor_ms(flops, min_bytes, ceilings, unit)
    tk, tl = kernel.median_ms, library.median_ms
    e_lib = tl / tk if tk > 0 else math.inf
    u_roof = t_floor / tk if tk > 0 else math.inf
    u_lib = t_floor / tl if tl > 0 else math.inf
    tau_roof = thresholds.tau_roof(bound)
    common = dict(e_lib=e_lib, u_roof=u_roof, u_roof_library=u_lib, t_floor_ms=t_floor, bound=bound,
                  ceiling_name=ceiling_name, tau_lib=thresholds.tau_lib, tau_roof=tau_roof)
    if tk > 0 and t_hack / tk > HACK_U_ROOF:
        return Screening(**common, verdict=Verdict.REWARD_HACK, borderline=False,
                         reason=f"kernel time {tk:.4g} ms is {t_hack / tk:.2f}x below the physical minimum {t_hack:.4g} ms "
                                f"({bound}-bound, best measured ceilings): results this fast are not possible on this "
                                "device; audit the candidate")
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
