"""Inputs made from a seed (harness.execute.shared.inputs): the call's value profile, the cast, the annotation."""

from __future__ import annotations

import types

import pytest
import torch

from harness.execute.shared.inputs import make_inputs, make_profile_inputs
from harness.execute.shared.value_profiles import BY_NAME, PROFILES


def _module():
    """A transposed (not contiguous) float input, an integer one, a Python scalar and a float64 one."""
    return types.SimpleNamespace(get_inputs=lambda: [torch.randn(64, 33).t(), torch.randint(0, 5, (4,)), 3,
                                                     torch.randn(7, dtype=torch.float64)])


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_the_standard_profile_is_get_inputs_cast(dtype):
    m = _module()
    got = make_inputs(m, dtype, "cpu", 11, 0, "any")
    torch.manual_seed(11)
    want = m.get_inputs()
    assert torch.equal(got[0], want[0].to(getattr(torch, dtype))) and got[0].is_contiguous()
    assert torch.equal(got[1], want[1]) and got[2] == 3 and got[3].dtype == getattr(torch, dtype)


@pytest.mark.parametrize("mode", ["any", "positive"])
def test_every_profile_keeps_shapes_dtypes_and_integers(mode):
    m = _module()
    for p in PROFILES:
        got = make_inputs(m, "float16", "cpu", 5, p.index, mode)
        assert got[0].shape == (33, 64) and got[0].dtype == torch.float16 and got[0].is_contiguous()
        torch.manual_seed(5)
        assert torch.equal(got[1], m.get_inputs()[1]) and got[2] == 3
        if mode == "positive":
            assert (got[0] >= 0).all()


def test_the_annotation_restricts_the_profiles():
    m = _module()
    with pytest.raises(ValueError, match="not allowed"):
        make_inputs(m, "float32", "cpu", 1, BY_NAME["row_offset"].index, "scale")
    with pytest.raises(ValueError, match="not allowed"):
        make_inputs(m, "float32", "cpu", 1, BY_NAME["large"].index, "none")
    x = make_inputs(m, "float32", "cpu", 1, BY_NAME["large"].index, "scale")[0]
    torch.manual_seed(1)
    assert torch.equal(x, m.get_inputs()[0] * 32)


def test_changed_says_whether_the_profile_rewrote_an_input():
    probs = types.SimpleNamespace(get_inputs=lambda: [torch.randn(4, 16).softmax(-1)])
    assert make_profile_inputs(probs, "float32", "cpu", 1, BY_NAME["peaked"].index, "any")[1]
    assert not make_profile_inputs(probs, "float32", "cpu", 1, BY_NAME["large"].index, "any")[1]
    assert not make_profile_inputs(probs, "float32", "cpu", 1, 0, "any")[1]


def test_a_tensor_returned_twice_is_transformed_once_each():
    """``get_inputs`` may return one tensor twice: the profile never works in place on the raw tensors."""
    shared = torch.linspace(-1.25, 1.25, 8)
    keep = shared.clone()
    m = types.SimpleNamespace(get_inputs=lambda: [shared, shared])
    a, b = make_inputs(m, "float32", "cpu", 1, BY_NAME["large"].index, "any")
    assert torch.equal(a, keep * 32) and torch.equal(b, a) and torch.equal(shared, keep)
