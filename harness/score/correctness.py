"""Compare a candidate's outputs with the float64 reference (runs in a trusted process).

Tolerance rule, per element::

    allowed = atol * scale * growth + rtol * |ref64|
    scale   = max(1, rms(ref64))                      # outputs far from unit scale
    growth  = max(1, sqrt(reduction_length / 1024))   # fp32 accumulation error grows ~sqrt(n)

The library's own output (same dtype as the candidate's) is held to the same
rule; if the library itself exceeds it -- fp32 rounding in a long sum on
scaled inputs does -- ``allowed`` is widened to 1.5x the library's own worst
excess, so a candidate as accurate as the library is never failed for the
library's rounding. Beyond the tolerance: exact shape and dtype, ``type(out)
is torch.Tensor`` (checked in the worker), no NaN/Inf where the reference is
finite, and a constant output where the reference is not constant fails.

A second, whole-tensor bound catches what an absolute floor lets through
(outputs far below unit scale, e.g. a softmax over 10,000 columns, whose every
element is within ``atol`` of 1/N)::

    ||out - ref64||_2 / ||ref64||_2  <=  max(atol, rtol) * growth, widened to 1.5x the library's own

Memory: the comparison streams over chunks of ``chunk`` elements (three passes: the reference's scale, the
library's excess, the candidate's), so its float64 temporaries are a few chunks, not a few copies of the
output (a KernelBench softmax of 4096 x 393216 asked for 24 GiB more on top of 87 GiB on the H200).
"""

from __future__ import annotations

import math
from typing import Any

CHUNK = 1 << 25
"""Elements compared at a time (32 Mi: 256 MiB per float64 temporary)."""


def _chunks(n: int, chunk: int):
    for start in range(0, n, chunk):
        yield start, min(n, start + chunk)


def _compare_one(out: Any, ref: Any, lib: Any, *, atol: float, rtol: float, growth: float, chunk: int) -> dict:
    """The float comparison of one output, streamed; a dict of what :func:`compare_outputs` reports and judges."""
    import torch

    dev = ref.device
    o_all, r_all, l_all = out.reshape(-1), ref.reshape(-1), lib.reshape(-1)
    n = r_all.numel()
    # pass 1: NaN/Inf where the reference is finite; the reference's scale and norm
    sq, n_finite, bad = 0.0, 0, 0
    for a, b in _chunks(n, chunk):
        r = r_all[a:b]
        fin = torch.isfinite(r)
        o = o_all[a:b].to(dev).double()
        bad += int((~torch.isfinite(o) & fin).sum())
        rf = r[fin]
        sq += float(rf.double().pow(2).sum())
        n_finite += int(rf.numel())
    if bad:
        return {"nonfinite": bad}
    scale = max(1.0, math.sqrt(sq / n_finite)) if n_finite else 1.0
    ref_norm = math.sqrt(sq)

    def allowed_for(r: Any) -> Any:
        return atol * scale * growth + rtol * r.abs()

    # pass 2: the library's own excess (it widens the bound) and its L2 error
    lib_excess, lib_sq = 0.0, 0.0
    for a, b in _chunks(n, chunk):
        r = r_all[a:b]
        fin = torch.isfinite(r)
        lib_err = (l_all[a:b].to(dev).double() - r).abs()
        if fin.any():
            lib_excess = max(lib_excess, float((lib_err / allowed_for(r))[fin].max()))
            lib_sq += float(lib_err[fin].pow(2).sum())
    lib_excess = lib_excess if math.isfinite(lib_excess) else 0.0
    widen = 1.5 * lib_excess if lib_excess > 1.0 else 1.0
    # pass 3: the candidate's excess, worst element, range and L2 error
    max_excess, max_err, n_bad, worst, err_sq = 0.0, 0.0, 0, (-1.0, 0), 0.0
    o_min, o_max, r_min, r_max, r_absmax = math.inf, -math.inf, math.inf, -math.inf, 0.0
    nan_o = nan_r = False  # a NaN anywhere makes the range NaN, as one reduction over the whole tensor would
    for a, b in _chunks(n, chunk):
        r = r_all[a:b]
        fin = torch.isfinite(r)
        o = o_all[a:b].to(dev).double()
        err = (o - r).abs()
        excess = torch.where(fin, err / (allowed_for(r) * widen), torch.zeros((), dtype=err.dtype, device=err.device))
        m = float(excess.max())
        if m > worst[0]:
            worst = (m, a + int(excess.argmax()))
        max_excess = max(max_excess, m)
        n_bad += int((excess > 1.0).sum())
        if fin.any():
            ef = err[fin]
            max_err = max(max_err, float(ef.max()))
            err_sq += float(ef.pow(2).sum())
        nan_o = nan_o or bool(torch.isnan(o).any())
        nan_r = nan_r or bool(torch.isnan(r).any())
        o_min, o_max = min(o_min, float(o.min())), max(o_max, float(o.max()))
        r_min, r_max = min(r_min, float(r.min())), max(r_max, float(r.max()))
        r_absmax = max(r_absmax, float(r.abs().max()))
    nan = float("nan")
    return {"scale": scale, "lib_excess": lib_excess, "max_excess": max_excess, "max_err": max_err, "n_bad": n_bad,
            "worst": worst[1], "o_range": nan if nan_o else o_max - o_min, "r_range": nan if nan_r else r_max - r_min,
            "r_absmax": nan if nan_r else r_absmax,
            "ref_norm": ref_norm, "rel_l2": math.sqrt(err_sq) / ref_norm if ref_norm > 0 else 0.0,
            "lib_l2": math.sqrt(lib_sq) / ref_norm if ref_norm > 0 else 0.0}


def compare_outputs(outs: list, refs64: list, libs: list, *, atol: float, rtol: float,
                    reduction_length: int | None, chunk: int = CHUNK) -> dict:
    """Return {ok, status, max_abs_err, max_excess, library_max_excess, detail}."""
    import torch

    res: dict[str, Any] = {"ok": True, "status": "PASSED", "max_abs_err": 0.0, "max_excess": 0.0,
                           "library_max_excess": 0.0, "detail": ""}

    def fail(status: str, detail: str) -> dict:
        res.update(ok=False, status=status, detail=detail)
        return res

    if len(outs) != len(refs64):
        return fail("INCORRECT_SHAPE", f"forward returned {len(outs)} tensor(s); the reference returns {len(refs64)}")
    growth = max(1.0, math.sqrt((reduction_length or 1) / 1024))
    for i, (out, ref, lib) in enumerate(zip(outs, refs64, libs)):
        tag = f"output {i}" if len(outs) > 1 else "output"
        if tuple(out.shape) != tuple(ref.shape):
            return fail("INCORRECT_SHAPE", f"{tag} has shape {tuple(out.shape)}; expected {tuple(ref.shape)} (no broadcasting)")
        if out.dtype != lib.dtype:
            return fail("INCORRECT_DTYPE", f"{tag} has dtype {out.dtype}; expected {lib.dtype}")
        dev = ref.device
        if not out.is_floating_point():
            if not torch.equal(out.to(dev), lib.to(dev)):
                return fail("INCORRECT_NUMERICAL", f"{tag}: integer output differs from the reference")
            continue
        if not ref.numel():
            continue
        c = _compare_one(out, ref, lib, atol=atol, rtol=rtol, growth=growth, chunk=max(1, int(chunk)))
        if "nonfinite" in c:
            return fail("INCORRECT_NUMERICAL", f"{tag}: {c['nonfinite']} NaN/Inf value(s) where the reference is finite")
        res["max_abs_err"] = max(res["max_abs_err"], c["max_err"])
        res["max_excess"] = max(res["max_excess"], c["max_excess"])
        res["library_max_excess"] = max(res["library_max_excess"], c["lib_excess"])
        if c["max_excess"] > 1.0:
            idx = c["worst"]
            return fail("INCORRECT_NUMERICAL",
                        f"{tag}: {c['n_bad']}/{ref.numel()} element(s) out of tolerance; worst at flat index {idx}: "
                        f"got {float(out.reshape(-1)[idx]):.6g}, expected {float(ref.reshape(-1)[idx]):.6g} "
                        f"(atol={atol:g} x scale {c['scale']:.3g} x growth {growth:.3g}, rtol={rtol:g})")
        if out.numel() > 1 and c["o_range"] == 0.0:
            # the reference varies by more than two ulps of the output dtype: a
            # constant output cannot be the same function, whatever the tolerance
            ulp = torch.finfo(out.dtype).eps * c["r_absmax"]
            if c["r_range"] > 2 * ulp:
                return fail("INCORRECT_NUMERICAL",
                            f"{tag} is constant ({float(out.reshape(-1)[0]):.6g}) but the reference is not")
        if c["ref_norm"] > 0:
            rel_l2, lib_l2 = c["rel_l2"], c["lib_l2"]
            bound = max(max(atol, rtol) * growth, 1.5 * lib_l2)
            res["relative_l2"] = max(res.get("relative_l2", 0.0), rel_l2)
            if rel_l2 > bound:
                return fail("INCORRECT_NUMERICAL",
                            f"{tag}: relative L2 error {rel_l2:.3g} exceeds {bound:.3g} (max(atol, rtol) x growth "
                            f"{growth:.3g}; the library's own is {lib_l2:.3g}) although every element is within "
                            "its tolerance: the output does not follow the reference")
    return res
