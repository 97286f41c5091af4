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

Sums judged by their ingredients: where the checker knows that an output element is a sum (or a linear function
of sums), ``T`` is the scale of the rounding error an evaluation in any order carries, built from the magnitudes
of what the terms are computed from, however much they cancel (:mod:`harness.execute.checker.terms`). Such an
element may be off by ``TERM_ULPS * u * T`` more (``u``: the unit roundoff of the output's dtype), and the
whole-tensor bound grows by ``TERM_ULPS * u * ||T|| / ||ref64||``. Without it a loss that cancels to 1e-4
(KernelBench's KL divergence on shifted rows) fails every honest float32 kernel, PyTorch's own included.

A failure names the worst element: its index in the output's shape, the value the candidate gave, the float64
reference and the error allowed there (``worst`` in the result).

Memory and time: the comparison streams over chunks of ``chunk`` elements (two passes: the reference's scale,
then the library's and the candidate's errors), so its float64 temporaries are a few chunks, not a few copies
of the output (a KernelBench softmax of 4096 x 393216 asked for 24 GiB more on top of 87 GiB on the H200), and
each pass reduces on the device and reads back once (per-chunk reads cost ~30 ms for a 256 MB output on the
H200: the verification of one timed call).
"""

from __future__ import annotations

import math
from typing import Any

TERM_ULPS = 8.0
"""Units of the dtype's roundoff allowed per unit of a sum's error scale ``T``. Measured on KernelBench's KL
divergence with rows shifted by 1.5 (128 x 4096, 10 seeds, CPU): PyTorch's own float32 ``kl_div`` and a kernel
summing the same terms per row reach 0.51 u T; a kernel that takes ``sum q log q`` and ``sum q log p`` first and
subtracts them reaches 116 u T (its two sums of 3e5 cancel to 1e-4: it is two orders less accurate than the
library there, and fails)."""

UNIT_ROUNDOFF = {"float64": 2.0 ** -53, "float32": 2.0 ** -24, "float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def unit_roundoff(dtype: Any) -> float:
    """``u`` of a torch dtype or dtype name (float32's for anything not listed)."""
    return UNIT_ROUNDOFF.get(str(dtype).removeprefix("torch."), UNIT_ROUNDOFF["float32"])


CHUNK = 1 << 25
"""Elements compared at a time (32 Mi: 256 MiB per float64 temporary)."""


def _chunks(n: int, chunk: int):
    for start in range(0, n, chunk):
        yield start, min(n, start + chunk)


def _compare_one(out: Any, ref: Any, lib: Any, *, atol: float, rtol: float, growth: float, chunk: int,
                 terms: Any = None) -> dict:
    """The float comparison of one output, streamed; a dict of what :func:`compare_outputs` reports and judges.

    Two passes over the chunks (the reference's scale; then the library's and the candidate's errors together),
    each reducing on the device and reading its sums back once; a third pass counts the elements out of
    tolerance only when some are. Chunks are read at the precision of the most precise operand, at least
    float32: float64 against a float64 reference; float32 when the reference is the library's own output (a
    timed call's verification), where it is exact enough and moves half the bytes. ``lib is ref`` skips the
    library's errors (zero). ``terms``: ``T`` per element (see the module docstring), or None.
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

    t_all = terms.reshape(-1) if terms is not None else None

    def term(a: int, b: int, fin: Any) -> Any:
        return torch.where(fin, piece(t_all, a, b), zero) if t_all is not None else None

    # pass 1: NaN/Inf where the reference is finite; the reference's scale and norm (with the terms' sizes)
    bad = torch.zeros((), dtype=torch.int64, device=dev)
    sq, n_finite = torch.zeros((), dtype=acc, device=dev), torch.zeros((), dtype=torch.int64, device=dev)
    tsq = torch.zeros((), dtype=acc, device=dev)
    for a, b in _chunks(n, chunk):
        r = piece(r_all, a, b)
        fin = torch.isfinite(r)
        bad += (~torch.isfinite(piece(o_all, a, b)) & fin).sum()
        sq += torch.where(fin, r, zero).pow(2).sum(dtype=acc)
        if t_all is not None:
            tsq += term(a, b, fin).pow(2).sum(dtype=acc)
        n_finite += fin.sum()
    bad_n, sq_v, nf, tsq_v = torch.stack((bad.to(acc), sq, n_finite.to(acc), tsq)).tolist()
    if bad_n:
        first = 0
        for a, b in _chunks(n, chunk):  # the first such element, for the failure's text
            hit = (~torch.isfinite(piece(o_all, a, b)) & torch.isfinite(piece(r_all, a, b))).nonzero()
            if hit.numel():
                first = a + int(hit[0, 0])
                break
        return {"nonfinite": int(bad_n), "worst": first}
    scale = max(1.0, math.sqrt(sq_v / nf)) if nf else 1.0
    ref_norm = math.sqrt(sq_v)
    floor = atol * scale * growth
    ku = TERM_ULPS * unit_roundoff(out.dtype)

    def allowed_of(r: Any, a: int, b: int, fin: Any) -> Any:
        allowed = r.abs().mul_(rtol).add_(floor)
        return allowed.add_(term(a, b, fin), alpha=ku) if t_all is not None else allowed

    # pass 2: the library's own excess (it widens the bound) and L2 error; the candidate's excess before
    # widening (a scalar factor: the worst element and the maximum divide by it afterwards), error and ranges
    neg = torch.tensor(-math.inf, dtype=wide, device=dev)
    lib_ex, lib_sq, err_sq = neg.clone(), torch.zeros((), dtype=acc, device=dev), torch.zeros((), dtype=acc, device=dev)
    max_err = zero.clone()
    worst_v, worst_i, o_ext, r_ext = [], [], [], []
    for a, b in _chunks(n, chunk):
        r = piece(r_all, a, b)
        fin = torch.isfinite(r)
        allowed = allowed_of(r, a, b, fin)
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
            fin = torch.isfinite(r)
            raw = torch.where(fin, (piece(o_all, a, b) - r).abs() / allowed_of(r, a, b, fin), zero)
            n_bad += int((raw > widen).sum())
    nan = float("nan")
    return {"scale": scale, "floor": floor, "widen": widen, "term_bound": ku * math.sqrt(tsq_v),
            "lib_excess": lib_excess, "max_excess": max_excess, "max_err": max_err_v, "n_bad": n_bad,
            "worst": int(worst_idx), "o_range": nan if nan_o else omax - omin, "r_range": nan if nan_r else rmax - rmin,
            "r_absmax": nan if nan_r else max(abs(rmin), abs(rmax)),
            "ref_norm": ref_norm, "rel_l2": math.sqrt(err_sq_v) / ref_norm if ref_norm > 0 else 0.0,
            "lib_l2": math.sqrt(lib_sq_v) / ref_norm if ref_norm > 0 else 0.0}


def _index(flat: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The index in ``shape`` of flat (row-major) position ``flat``."""
    out = []
    for n in reversed(shape):
        out.append(flat % n if n else 0)
        flat = flat // n if n else 0
    return tuple(reversed(out))


def worst_element(out: Any, ref: Any, flat: int, *, output: int, allowed: float | None) -> dict:
    """The worst element of a failed comparison, for the record and the feedback: which output, its index in the
    output's shape, the candidate's value, the float64 reference's and the error allowed there (None: no finite
    error is allowed, e.g. a NaN where the reference is finite)."""
    return {"output": output, "index": list(_index(int(flat), tuple(ref.shape))),
            "got": float(out.reshape(-1)[flat]), "expected": float(ref.reshape(-1)[flat]), "allowed": allowed}


def _where(w: dict) -> str:
    return f"[{', '.join(str(i) for i in w['index'])}]" if w["index"] else "[]"


def compare_outputs(outs: list, refs64: list, libs: list, *, atol: float, rtol: float,
                    reduction_length: int | None, chunk: int = CHUNK, terms: list | None = None,
                    library_widens: bool = True) -> dict:
    """Return {ok, status, max_abs_err, max_excess, library_max_excess, detail}, and on a numerical failure
    ``worst`` (:func:`worst_element`).

    ``terms``: per output, ``T`` of each element (a float64 tensor of the output's shape) or None; see the
    module docstring. None: no output is known to be a sum. ``library_widens=False``: the bound is not widened
    to the library's own error (``libs`` then only give the expected dtypes): the fairness probe judges the
    library itself so.
    """
    import torch

    res: dict[str, Any] = {"ok": True, "status": "PASSED", "max_abs_err": 0.0, "max_excess": 0.0,
                           "library_max_excess": 0.0, "detail": ""}

    def fail(status: str, detail: str, worst: dict | None = None) -> dict:
        res.update(ok=False, status=status, detail=detail)
        if worst is not None:
            res["worst"] = worst
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
        term = terms[i] if terms is not None and i < len(terms) else None
        if term is not None and tuple(term.shape) != tuple(ref.shape):
            term = None
        c = _compare_one(out, ref, lib if library_widens else ref, atol=atol, rtol=rtol, growth=growth,
                         chunk=max(1, int(chunk)), terms=term)
        if "nonfinite" in c:
            w = worst_element(out, ref, c["worst"], output=i, allowed=None)
            return fail("INCORRECT_NUMERICAL", f"{tag}: {c['nonfinite']} NaN/Inf value(s) where the reference is "
                        f"finite; the first at {_where(w)}: got {w['got']:.6g}, expected {w['expected']:.6g}", w)
        res["max_abs_err"] = max(res["max_abs_err"], c["max_err"])
        res["max_excess"] = max(res["max_excess"], c["max_excess"])
        res["library_max_excess"] = max(res["library_max_excess"], c["lib_excess"])

        def worst() -> dict:
            idx = c["worst"]
            t = TERM_ULPS * unit_roundoff(out.dtype) * float(term.reshape(-1)[idx]) if term is not None else 0.0
            allowed = c["widen"] * (rtol * abs(float(ref.reshape(-1)[idx])) + c["floor"] + t)
            return worst_element(out, ref, idx, output=i, allowed=allowed)

        if c["max_excess"] > 1.0:
            w = worst()
            sums = f" + {TERM_ULPS:g} u x the sum's error scale" if term is not None else ""
            return fail("INCORRECT_NUMERICAL",
                        f"{tag}: {c['n_bad']}/{ref.numel()} element(s) out of tolerance; worst at {_where(w)}: "
                        f"got {w['got']:.6g}, expected {w['expected']:.6g}, allowed error {w['allowed']:.3g} "
                        f"(atol={atol:g} x scale {c['scale']:.3g} x growth {growth:.3g}, rtol={rtol:g}{sums})", w)
        if out.numel() > 1 and c["o_range"] == 0.0:
            # the reference varies by more than two ulps of the output dtype: a
            # constant output cannot be the same function, whatever the tolerance
            ulp = torch.finfo(out.dtype).eps * c["r_absmax"]
            if c["r_range"] > 2 * ulp:
                return fail("INCORRECT_NUMERICAL",
                            f"{tag} is constant ({float(out.reshape(-1)[0]):.6g}) but the reference is not", worst())
        if c["ref_norm"] > 0:
            rel_l2, lib_l2 = c["rel_l2"], c["lib_l2"]
            bound = max(max(atol, rtol) * growth + c["term_bound"] / c["ref_norm"], 1.5 * lib_l2)
            res["relative_l2"] = max(res.get("relative_l2", 0.0), rel_l2)
            if rel_l2 > bound:
                w = worst()
                return fail("INCORRECT_NUMERICAL",
                            f"{tag}: relative L2 error {rel_l2:.3g} exceeds {bound:.3g} (max(atol, rtol) x growth "
                            f"{growth:.3g}; the library's own is {lib_l2:.3g}) although every element is within "
                            f"its tolerance: the output does not follow the reference (largest error relative to "
                            f"its bound at {_where(w)}: got {w['got']:.6g}, expected {w['expected']:.6g})", w)
    return res
