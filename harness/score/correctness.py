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

Memory and time: the comparison streams over chunks of ``chunk`` elements (two passes: the reference's scale,
then the library's and the candidate's errors), so its float64 temporaries are a few chunks, not a few copies
of the output (a KernelBench softmax of 4096 x 393216 asked for 24 GiB more on top of 87 GiB on the H200), and
each pass reduces on the device and reads back once (per-chunk reads cost ~30 ms for a 256 MB output on the
H200: the verification of one timed call).
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
    """The float comparison of one output, streamed; a dict of what :func:`compare_outputs` reports and judges.

    Two passes over the chunks (the reference's scale; then the library's and the candidate's errors together),
    each reducing on the device and reading its sums back once; a third pass counts the elements out of
    tolerance only when some are. Chunks are read at the precision of the most precise operand, at least
    float32: float64 against a float64 reference; float32 when the reference is the library's own output (a
    timed call's verification), where it is exact enough and moves half the bytes. ``lib is ref`` skips the
    library's errors (zero).
    """
    import torch

    dev = ref.device
    wide = torch.float64 if torch.float64 in (out.dtype, ref.dtype, lib.dtype) else torch.float32
    o_all, r_all, l_all = out.reshape(-1), ref.reshape(-1), lib.reshape(-1)
    same = lib is ref
    n = r_all.numel()
    zero = torch.zeros((), dtype=wide, device=dev)
    acc = torch.float64  # sums accumulate in float64 whatever the chunks' precision

    def piece(t: Any, a: int, b: int) -> Any:
        return t[a:b].to(device=dev, dtype=wide)

    # pass 1: NaN/Inf where the reference is finite; the reference's scale and norm
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    sq, n_finite = torch.zeros((), dtype=acc, device=dev), torch.zeros((), dtype=torch.int64, device=dev)
    for a, b in _chunks(n, chunk):
        r = piece(r_all, a, b)
        fin = torch.isfinite(r)
        bad += (~torch.isfinite(piece(o_all, a, b)) & fin).sum()
        sq += torch.where(fin, r, zero).pow(2).sum(dtype=acc)
        n_finite += fin.sum()
    bad_n, sq_v, nf = torch.stack((bad.to(acc), sq, n_finite.to(acc))).tolist()
    if bad_n:
        return {"nonfinite": int(bad_n)}
    scale = max(1.0, math.sqrt(sq_v / nf)) if nf else 1.0
    ref_norm = math.sqrt(sq_v)
    floor = atol * scale * growth

    # pass 2: the library's own excess (it widens the bound) and L2 error; the candidate's excess before
    # widening (a scalar factor: the worst element and the maximum divide by it afterwards), error and ranges
    neg = torch.tensor(-math.inf, dtype=wide, device=dev)
    lib_ex, lib_sq, err_sq = neg.clone(), torch.zeros((), dtype=acc, device=dev), torch.zeros((), dtype=acc, device=dev)
    max_err = zero.clone()
    worst_v, worst_i, o_ext, r_ext = [], [], [], []
    for a, b in _chunks(n, chunk):
        r = piece(r_all, a, b)
        fin = torch.isfinite(r)
        allowed = r.abs().mul_(rtol).add_(floor)
        if not same:
            lib_err = (piece(l_all, a, b) - r).abs_()
            lib_sq += torch.where(fin, lib_err, zero).pow(2).sum(dtype=acc)
            lib_ex = torch.maximum(lib_ex, torch.where(fin, lib_err.div_(allowed), neg).max())
            del lib_err
        o = piece(o_all, a, b)
        err = torch.where(fin, (o - r).abs_(), zero)
        m, i = torch.where(fin, err / allowed, zero).max(0)
        worst_v.append(m)
        worst_i.append(i + a)
        max_err = torch.maximum(max_err, err.max())
        err_sq += err.pow(2).sum(dtype=acc)
        o_ext.append(torch.stack(torch.aminmax(o)))  # NaN propagates: a NaN anywhere makes the range NaN
        r_ext.append(torch.stack(torch.aminmax(r)))
    wv = torch.stack(worst_v).to(acc)
    k = torch.argmax(torch.nan_to_num(wv, nan=-1.0))  # the first chunk holding the largest value
    oe, re_ = torch.stack(o_ext).to(acc), torch.stack(r_ext).to(acc)
    o_lo, o_hi = oe[:, 0].min(), oe[:, 1].max()
    r_lo, r_hi = re_[:, 0].min(), re_[:, 1].max()
    vals = torch.stack((lib_ex.to(acc), lib_sq, err_sq, max_err.to(acc), o_lo, o_hi, r_lo, r_hi, wv[k],
                        torch.stack(worst_i)[k].to(acc))).tolist()
    lib_excess, lib_sq_v, err_sq_v, max_err_v, omin, omax, rmin, rmax, raw_max, worst_idx = vals
    nan_o, nan_r = math.isnan(omin) or math.isnan(omax), math.isnan(rmin) or math.isnan(rmax)
    lib_excess = lib_excess if math.isfinite(lib_excess) and lib_excess > 0 else 0.0
    widen = 1.5 * lib_excess if lib_excess > 1.0 else 1.0
    max_excess = raw_max / widen if raw_max > 0 else 0.0
    n_bad = 0
    if max_excess > 1.0:  # only a failure names how many elements are out: a third pass
        for a, b in _chunks(n, chunk):
            r = piece(r_all, a, b)
            raw = torch.where(torch.isfinite(r), (piece(o_all, a, b) - r).abs() / (r.abs() * rtol + floor), zero)
            n_bad += int((raw > widen).sum())
    nan = float("nan")
    return {"scale": scale, "lib_excess": lib_excess, "max_excess": max_excess, "max_err": max_err_v, "n_bad": n_bad,
            "worst": int(worst_idx), "o_range": nan if nan_o else omax - omin, "r_range": nan if nan_r else rmax - rmin,
            "r_absmax": nan if nan_r else max(abs(rmin), abs(rmax)),
            "ref_norm": ref_norm, "rel_l2": math.sqrt(err_sq_v) / ref_norm if ref_norm > 0 else 0.0,
            "lib_l2": math.sqrt(lib_sq_v) / ref_norm if ref_norm > 0 else 0.0}


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
