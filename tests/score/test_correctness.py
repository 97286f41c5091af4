"""The tolerance rule: fp64 reference, library-error widening, reduction growth, shape/dtype/NaN/constant."""

from __future__ import annotations

import pytest
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


def test_the_streamed_comparison_judges_exactly_as_one_pass_whatever_the_chunk():
    """The comparison runs in chunks so its float64 temporaries stay small at KernelBench's sizes; a chunk
    boundary must never change a verdict, a reported number or the worst element named."""
    import random

    import torch

    random.seed(1)
    torch.manual_seed(1)
    kinds = ("ok", "noise", "one_bad", "constant", "nan", "scaled", "library_worse")
    for trial in range(120):
        kind = kinds[trial % len(kinds)]
        shape = (random.randint(2, 30), random.randint(1, 20))
        ref = torch.randn(shape, dtype=torch.float64) * random.choice([1e-3, 1.0, 100.0])
        dt = random.choice([torch.float32, torch.float16])
        lib, out = ref.to(dt), ref.to(dt).clone()
        if kind == "noise":
            out = (ref + torch.randn(shape, dtype=torch.float64) * random.choice([1e-5, 1e-3, 1e-1])).to(dt)
        elif kind == "one_bad":
            out.view(-1)[random.randrange(out.numel())] += 5
        elif kind == "constant":
            out = torch.full(shape, float(ref.mean()), dtype=dt)
        elif kind == "nan":
            out.view(-1)[random.randrange(out.numel())] = float("nan")
        elif kind == "scaled":
            out = (ref * 1.02).to(dt)
        elif kind == "library_worse":
            lib = (ref + torch.randn(shape, dtype=torch.float64) * 0.05).to(dt)
        kw = dict(atol=random.choice([1e-4, 1e-2]), rtol=1e-2, reduction_length=random.choice([None, 5000]))
        whole = compare_outputs([out], [ref], [lib], chunk=10**9, **kw)
        for chunk in (1, 7, 64):
            part = compare_outputs([out], [ref], [lib], chunk=chunk, **kw)
            assert (part["status"], part["detail"]) == (whole["status"], whole["detail"]), (kind, chunk)
            for key in ("max_abs_err", "max_excess", "library_max_excess", "relative_l2"):
                if whole.get(key) is None:  # absent in one pass, absent in every chunking
                    assert part.get(key) is None, (kind, chunk, key)
                else:
                    assert part.get(key) == pytest.approx(whole[key], rel=1e-9, abs=1e-12), (kind, chunk, key)


def test_a_verification_against_the_library_output_judges_as_against_its_float64_copy():
    """A timed call is verified against the library's kept output: the comparison then reads it as float32,
    chunk by chunk, instead of a float64 copy of the whole output (a ~5x cheaper check on the timing
    phase's exclusive GPU). The verdict and the element it names must not change."""
    import random

    import torch

    random.seed(2)
    torch.manual_seed(2)
    for trial in range(80):
        shape = (random.randint(2, 40), random.randint(1, 25))
        dt = random.choice([torch.float32, torch.float16, torch.bfloat16])
        lib = (torch.randn(shape) * random.choice([1e-3, 1.0, 300.0])).to(dt)
        out = lib.clone()
        kind = trial % 4
        if kind == 1:
            out = (lib.double() + torch.randn(shape, dtype=torch.float64) * random.choice([1e-6, 1e-3, 1e-1])).to(dt)
        elif kind == 2:
            out.view(-1)[random.randrange(out.numel())] += 7
        elif kind == 3:
            out.view(-1)[random.randrange(out.numel())] = float("inf")
        kw = dict(atol=2e-2, rtol=2e-2, reduction_length=None)
        as64 = compare_outputs([out], [lib.double()], [lib], **kw)
        for chunk in (3, 10**9):
            own = compare_outputs([out], [lib], [lib], chunk=chunk, **kw)
            assert (own["status"], own["detail"]) == (as64["status"], as64["detail"]), (trial, chunk)
            assert own["max_excess"] == pytest.approx(as64["max_excess"], rel=1e-5, abs=1e-9)
