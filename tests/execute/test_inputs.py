"""Inputs made from a seed (harness.execute.shared.inputs): the round's transform and the cast in one pass."""

from __future__ import annotations

import types

import pytest
import torch

from harness.execute.shared.inputs import ROUND_TRANSFORMS, make_inputs


def _module():
    """A transposed (not contiguous) float input, an integer one, a Python scalar and a float64 one."""
    return types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 33).t(), torch.randint(0, 5, (4,)), 3,
                                                     torch.randn(7, dtype=torch.float64)])


def _three_passes(x, mode, round_idx, tdtype):
    """The definition: scale, then shift, then cast (what one fused pass must reproduce)."""
    if not isinstance(x, torch.Tensor):
        return x
    if x.is_floating_point() and mode != "none":
        scale, shift = ROUND_TRANSFORMS[round_idx]
        if mode == "positive":
            x = x.abs() * scale + abs(shift) + 1e-3
        elif mode == "scale":
            x = x * scale
        else:
            x = x * scale + shift
    return (x.to(tdtype) if x.is_floating_point() else x).contiguous()


@pytest.mark.parametrize("mode", ["any", "scale", "positive", "none"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_fused_transform_matches_scale_shift_cast(mode, dtype):
    m = _module()
    tdtype = getattr(torch, dtype)
    for r in range(len(ROUND_TRANSFORMS)):
        got = make_inputs(m, dtype, "cpu", 11, r, mode)
        torch.manual_seed(11)
        want = [_three_passes(x, mode, r, tdtype) for x in m.get_inputs()]
        for g, w in zip(got, want):
            if not isinstance(w, torch.Tensor):
                assert g == w
                continue
            assert g.dtype == w.dtype and g.shape == w.shape and g.is_contiguous()
            if not w.is_floating_point():
                assert torch.equal(g, w)
                continue
            # one rounding apart at most (fp32 fused multiply-add against a multiply then an add)
            ulp = torch.finfo(tdtype).eps * w.float().abs().clamp_min(1.0)
            assert ((g.float() - w.float()).abs() <= ulp).all(), (mode, dtype, r)


def test_a_tensor_returned_twice_is_transformed_once_each():
    """``get_inputs`` may return one tensor twice: the transform never works in place on the raw tensors."""
    shared = torch.ones(8)
    m = types.SimpleNamespace(get_inputs=lambda: [shared, shared])
    a, b = make_inputs(m, "float32", "cpu", 1, 2, "any")  # round 2: scale 4
    assert torch.equal(a, torch.full((8,), 4.0)) and torch.equal(b, a) and torch.equal(shared, torch.ones(8))
