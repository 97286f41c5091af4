"""The tolerance rule: fp64 reference, library-error widening, reduction growth, shape/dtype/NaN/constant."""

from __future__ import annotations

import torch

from harness.score.correctness import compare_outputs


def _cmp(out, ref, lib=None, **kw):
    kw.setdefault("atol", 1e-4)
    kw.setdefault("rtol", 1e-4)
    kw.setdefault("reduction_length", None)
    return compare_outputs([out], [ref.double()], [lib if lib is not None else ref.float()], **kw)


def test_exact_passes():
    x = torch.randn(64, 64)
    assert _cmp(x.clone(), x)["ok"]


def test_broadcastable_shape_fails():
    x = torch.randn(64, 64)
    r = _cmp(x.clone().unsqueeze(0), x)
    assert r["status"] == "INCORRECT_SHAPE" and "no broadcasting" in r["detail"]


def test_dtype_must_match_library_output():
    x = torch.randn(8, 8)
    assert _cmp(x.double(), x)["status"] == "INCORRECT_DTYPE"


def test_nan_fails_even_if_elsewhere_exact():
    x = torch.randn(8, 8)
    y = x.clone()
    y[3, 3] = float("nan")
    r = _cmp(y, x)
    assert r["status"] == "INCORRECT_NUMERICAL" and "NaN/Inf" in r["detail"]


def test_constant_output_fails():
    x = torch.randn(8, 8) * 1e-3  # within atol of its mean everywhere, but clearly not constant
    r = _cmp(torch.full((8, 8), float(x.mean())), x, atol=1e-2, rtol=0.0)
    assert not r["ok"] and "constant" in r["detail"]


def test_fp32_library_rounding_is_not_held_against_candidate():
    """A long fp32 sum on scaled inputs misses 1e-4 by itself; a candidate as accurate as the library passes."""
    torch.manual_seed(0)
    x = torch.randn(64, 1 << 16, dtype=torch.float64) * 4 + 1.5
    ref = x.sum(-1)
    lib = x.float().sum(-1)
    cand = x.float().flip(-1).sum(-1)  # different order, same accuracy class
    r = compare_outputs([cand], [ref], [lib], atol=1e-4, rtol=1e-4, reduction_length=1 << 16)
    assert r["ok"], r


def test_real_error_still_fails_after_widening():
    x = torch.randn(32, 4096, dtype=torch.float64)
    ref = x.sum(-1)
    lib = x.float().sum(-1)
    cand = lib * 1.01
    assert not compare_outputs([cand], [ref], [lib], atol=1e-4, rtol=1e-4, reduction_length=4096)["ok"]


def test_half_precision_tolerance():
    x = torch.randn(128, 128, dtype=torch.float64)
    out = x.half()
    assert compare_outputs([out], [x], [x.half()], atol=1e-2, rtol=1e-2, reduction_length=None)["ok"]


def test_integer_outputs_are_exact():
    idx = torch.arange(10)
    assert compare_outputs([idx.clone()], [idx.double()], [idx], atol=1, rtol=1, reduction_length=None)["ok"]
    assert not compare_outputs([idx.flip(0)], [idx.double()], [idx], atol=1, rtol=1, reduction_length=None)["ok"]
