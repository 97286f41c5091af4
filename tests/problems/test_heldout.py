"""Held-out shapes (harness.problems.heldout): which constants are sizes, which values, drawn per run."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.problems import heldout as H
from harness.problems.loader import load_problem

ROOT = Path(__file__).resolve().parents[2]
KB1 = ROOT / "tests" / "fixtures" / "kernelbench" / "levels" / "level1"


def _smoke(problem):
    return next(w for w in problem.workloads if "smoke" in w.tags)


def test_extents_are_sizes_not_structure():
    """A reduction axis, a kernel size: constants that change no dimension by one are kept."""
    p = load_problem(KB1 / "47_Sum_reduction_over_a_dimension.py")
    assert [e.label() for e in H.extents(p, _smoke(p))] == ["batch_size", "dim1", "dim2"]  # not reduce_dim
    c = load_problem(KB1 / "50_conv_tiny_2D__square_input__square_kernel.py")
    labels = {e.label() for e in H.extents(c, _smoke(c))}
    assert labels == {"batch_size", "in_channels", "out_channels", "width", "height"}  # not kernel_size


def test_derived_constants_follow_their_roots(tmp_path):
    f = tmp_path / "derived.py"
    f.write_text("import torch\nimport torch.nn as nn\nN = 8\nM = 2 * N\nshape = (3, 5)\n\n"
                 "class Model(nn.Module):\n    def forward(self, x, y):\n        return x.sum() + y.sum()\n\n"
                 "def get_inputs():\n    return [torch.randn(M, 3), torch.randn(*shape)]\n\n"
                 "def get_init_inputs():\n    return []\n")
    p = load_problem(f)
    w = p.workloads[0]
    assert {e.label() for e in H.extents(p, w)} == {"N", "shape[0]", "shape[1]"}  # M is computed from N
    for h in H.heldout_workloads(p, w, base_seed=3, count=2):
        assert h.params["M"] == 2 * h.params["N"]


def test_boundary_values_avoid_tile_multiples():
    vals = H.boundary_values(256)
    assert {255, 257, 251, 129, 385} <= set(vals) and 256 not in vals
    assert all(v % 16 for v in vals)
    assert H.boundary_values(1) == [2]
    assert all(v >= 1 for v in H.boundary_values(2))


def test_drawn_per_run_from_the_secret_seed():
    p = load_problem(ROOT / "problems" / "reduction" / "softmax.py")
    w = _smoke(p)
    a = [h.params for h in H.heldout_workloads(p, w, base_seed=11, count=2)]
    b = [h.params for h in H.heldout_workloads(p, w, base_seed=11, count=2)]
    c = [h.params for h in H.heldout_workloads(p, w, base_seed=12, count=2)]
    assert a == b and a != c
    assert len({tuple(sorted(x.items())) for x in a}) == 2 and all(x != w.params for x in a)


def test_heldout_workloads_are_named_tagged_and_keep_the_tolerance():
    p = load_problem(ROOT / "problems" / "normalization" / "layernorm.py")
    w = _smoke(p)
    hs = H.heldout_workloads(p, w, base_seed=5, count=2)
    assert len(hs) == 2
    for i, h in enumerate(hs, 1):
        assert h.name == f"smoke~heldout-{i}" and H.is_heldout(h) and H.public_of(h) == "smoke"
        assert (h.atol, h.rtol, h.dtype, h.allow_tf32) == (w.atol, w.rtol, w.dtype, w.allow_tf32) and h.secret
        assert H.moved_sizes(w, h)
    assert not H.is_heldout(w) and H.public_of(w) is None and H.heldout_workloads(p, hs[0], 5) == []


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_a_heldout_shape_stays_within_the_byte_budget(seed, device):
    p = load_problem(ROOT / "problems" / "gemm" / "gemm_large_k.py")
    w = _smoke(p)
    public = H._input_bytes(Path(p.path), dict(w.overrides), w.dtype)
    shapes = H.heldout_workloads(p, w, base_seed=seed, count=2, device=device)
    assert shapes
    for h in shapes:
        assert H._input_bytes(Path(p.path), dict(h.overrides), h.dtype) <= H.MAX_GROWTH[device] * public
        assert H.index_of(h) in (1, 2)


def test_a_problem_without_sizes_has_no_heldout_shape(tmp_path):
    f = tmp_path / "fixed.py"
    f.write_text("import torch\nimport torch.nn as nn\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
                 "        return x * 2\n\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\n"
                 "def get_init_inputs():\n    return []\n")
    p = load_problem(f)
    assert H.extents(p, p.workloads[0]) == [] and H.heldout_workloads(p, p.workloads[0], 1) == []
