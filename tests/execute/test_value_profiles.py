"""Value profiles (harness.execute.shared.value_profiles): deterministic, within each input's domain."""

from __future__ import annotations

import pytest
import torch

from harness.execute.shared import value_profiles as V


def _apply(x, name, seed=7, position=0, positive=False, tdtype=torch.float32):
    return V.apply(x, V.BY_NAME[name].index, seed=seed, position=position, tdtype=tdtype, positive=positive)


def test_indices_are_positions_and_unknown_ones_are_refused():
    assert [p.index for p in V.PROFILES] == list(range(len(V.PROFILES)))
    assert V.PROFILES[V.NORMAL].name == "normal"
    for bad in (-1, len(V.PROFILES), True, 1.0):
        with pytest.raises(ValueError, match="value profile"):
            V.profile(bad)


@pytest.mark.parametrize("name", [p.name for p in V.PROFILES])
def test_same_seed_same_values_other_seed_other_values(name):
    torch.manual_seed(0)
    x = torch.randn(33, 70)
    a, changed = _apply(x, name)
    b, _ = _apply(x, name)
    assert torch.equal(a, b)
    if changed and name not in ("large", "near_one"):  # those two are deterministic in x
        c, _ = _apply(x, name, seed=8)
        assert not torch.equal(a, c)


def test_domains_are_read_from_the_draw():
    torch.manual_seed(1)
    assert V.domain_of(torch.randn(8, 16)) == "real"
    assert V.domain_of(torch.randn(8, 16).abs() + 2) == "positive"
    assert V.domain_of(torch.rand(8, 16)) == "unit"
    assert V.domain_of(torch.randn(8, 16).softmax(-1)) == "prob"
    assert V.domain_of(torch.randint(0, 2, (8, 1)).float() * 2 - 1) == "integral"  # hinge labels
    assert V.domain_of(torch.zeros(4)) == "integral"


@pytest.mark.parametrize("name", [p.name for p in V.PROFILES])
def test_probability_rows_stay_distributions(name):
    torch.manual_seed(2)
    p = torch.randn(16, 300).softmax(-1)
    out, changed = _apply(p, name)
    assert changed == (name in V.CHANGES["prob"])
    assert (out >= 0).all() and torch.allclose(out.sum(-1), torch.ones(16), atol=1e-5)


@pytest.mark.parametrize("name", [p.name for p in V.PROFILES])
def test_unit_values_stay_in_unit_interval_and_positive_ones_positive(name):
    torch.manual_seed(3)
    u, _ = _apply(torch.rand(64, 64), name)
    assert (u >= 0).all() and (u <= 1).all()
    pos, _ = _apply(torch.randn(64, 64).abs() + 0.5, name)
    assert (pos >= 0).all()
    ann, _ = _apply(torch.randn(64, 64), name, positive=True)  # input_transform = "positive"
    assert (ann > 0).all() if name != "many_zeros" else (ann >= 0).all()


def test_integers_and_integral_floats_are_never_changed():
    labels = torch.randint(0, 2, (32, 1)).float() * 2 - 1
    for p in V.PROFILES:
        out, changed = V.apply(labels, p.index, seed=1, position=1, tdtype=torch.float32, positive=False)
        assert torch.equal(out, labels) and not changed


def test_row_offset_is_one_offset_per_row():
    torch.manual_seed(4)
    x = torch.randn(40, 256)
    out, _ = _apply(x, "row_offset")
    off = (out - x).double()
    assert torch.allclose(off, off[:, :1].expand_as(off), atol=1e-4)
    mag = off[:, 0].abs()
    assert (mag >= 64 - 1e-3).all() and (mag < 128).all()
    assert (off[:, 0] > 0).any() and (off[:, 0] < 0).any()


def test_blocks_cover_every_row_of_a_large_input(monkeypatch):
    monkeypatch.setattr(V, "BLOCK_ELEMENTS", 256)  # 4 rows of 64 per block
    torch.manual_seed(5)
    x = torch.randn(3, 5, 64)
    out, _ = _apply(x, "large")
    assert out.shape == x.shape and torch.equal(out, x * 32)
    z, _ = _apply(x, "many_zeros")
    share = float((z == 0).float().mean())
    assert 0.8 < share < 0.97


def test_the_raw_draw_is_never_changed_in_place():
    x = torch.randn(8, 8)
    keep = x.clone()
    for p in V.PROFILES:
        V.apply(x, p.index, seed=3, position=0, tdtype=torch.float16, positive=False)
        V.apply(x, p.index, seed=3, position=0, tdtype=torch.float32, positive=True)
    assert torch.equal(x, keep)


def test_output_is_contiguous_and_of_the_workload_dtype():
    x = torch.randn(64, 33).t()  # not contiguous
    for p in V.PROFILES:
        out, _ = V.apply(x, p.index, seed=3, position=0, tdtype=torch.bfloat16, positive=False)
        assert out.dtype == torch.bfloat16 and out.is_contiguous() and out.shape == x.shape


def test_annotations_restrict_the_candidates():
    assert V.candidate_profiles("none") == (V.NORMAL,)
    assert {V.PROFILES[i].name for i in V.candidate_profiles("scale")} == {"normal", "large"}
    assert len(V.candidate_profiles("any")) == len(V.PROFILES)
