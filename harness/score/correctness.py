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
"""

from __future__ import annotations

import math
from typing import Any


def _rms(t: Any) -> float:
    return float(t.double().pow(2).mean().sqrt()) if t.numel() else 0.0


def compare_outputs(outs: list, refs64: list, libs: list, *, atol: float, rtol: float,
                    reduction_length: int | None) -> dict:
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
        o = out.to(dev).double()
        finite_ref = torch.isfinite(ref)
        bad = ~torch.isfinite(o) & finite_ref
        if bool(bad.any()):
            return fail("INCORRECT_NUMERICAL", f"{tag}: {int(bad.sum())} NaN/Inf value(s) where the reference is finite")
        scale = max(1.0, _rms(ref[finite_ref]))
        allowed = atol * scale * growth + rtol * ref.abs()
        lib_err = (lib.to(dev).double() - ref).abs()
        lib_excess = float((lib_err / allowed)[finite_ref].max()) if ref.numel() else 0.0
        lib_excess = lib_excess if math.isfinite(lib_excess) else 0.0
        if lib_excess > 1.0:
            allowed = allowed * (1.5 * lib_excess)
        err = (o - ref).abs()
        excess = err / allowed
        excess = torch.where(finite_ref, excess, torch.zeros_like(excess))
        max_excess = float(excess.max()) if excess.numel() else 0.0
        res["max_abs_err"] = max(res["max_abs_err"], float(err[finite_ref].max()) if ref.numel() else 0.0)
        res["max_excess"] = max(res["max_excess"], max_excess)
        res["library_max_excess"] = max(res["library_max_excess"], lib_excess)
        if max_excess > 1.0:
            n_bad = int((excess > 1.0).sum())
            idx = int(excess.flatten().argmax())
            return fail("INCORRECT_NUMERICAL",
                        f"{tag}: {n_bad}/{ref.numel()} element(s) out of tolerance; worst at flat index {idx}: "
                        f"got {float(o.flatten()[idx]):.6g}, expected {float(ref.flatten()[idx]):.6g} "
                        f"(atol={atol:g} x scale {scale:.3g} x growth {growth:.3g}, rtol={rtol:g})")
        if o.numel() > 1 and float(o.max() - o.min()) == 0.0:
            # the reference varies by more than two ulps of the output dtype: a
            # constant output cannot be the same function, whatever the tolerance
            ulp = torch.finfo(out.dtype).eps * float(ref.abs().max())
            if float(ref.max() - ref.min()) > 2 * ulp:
                return fail("INCORRECT_NUMERICAL", f"{tag} is constant ({float(o.flatten()[0]):.6g}) but the reference is not")
        ref_norm = float(ref[finite_ref].norm()) if ref.numel() else 0.0
        if ref_norm > 0:
            rel_l2 = float((o - ref)[finite_ref].norm()) / ref_norm
            lib_l2 = float((lib.to(dev).double() - ref)[finite_ref].norm()) / ref_norm
            bound = max(max(atol, rtol) * growth, 1.5 * lib_l2)
            res["relative_l2"] = max(res.get("relative_l2", 0.0), rel_l2)
            if rel_l2 > bound:
                return fail("INCORRECT_NUMERICAL",
                            f"{tag}: relative L2 error {rel_l2:.3g} exceeds {bound:.3g} (max(atol, rtol) x growth "
                            f"{growth:.3g}; the library's own is {lib_l2:.3g}) although every element is within "
                            "its tolerance: the output does not follow the reference")
    return res
