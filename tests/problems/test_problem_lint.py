"""The problem lint passes on every shipped problem and catches degenerate ones."""

from __future__ import annotations

import textwrap

import pytest

from harness.problems.lint import lint_problem
from harness.problems.loader import load_problem
from harness.problems.registry import load_registry

REGISTRY = load_registry()


def test_suite_loads_cleanly():
    assert not REGISTRY.errors, [str(e) for e in REGISTRY.errors]
    assert len(REGISTRY) >= 20
    cats = {p.category for p in REGISTRY}
    assert cats == {"normalization", "reduction", "convolution", "gemm", "elementwise"}
    for cat in cats:
        assert sum(p.category == cat for p in REGISTRY) >= 4


@pytest.mark.parametrize("pid", sorted(REGISTRY.problems))
def test_shipped_problem_is_not_degenerate(pid):
    assert lint_problem(REGISTRY.get(pid)) == []


@pytest.mark.parametrize("pid", sorted(REGISTRY.problems))
def test_every_problem_has_smoke_and_gpu_workloads(pid):
    p = REGISTRY.get(pid)
    assert any(w.is_smoke for w in p.workloads) and any(w.is_gpu for w in p.workloads)
    assert any(w.dtype in ("float16", "bfloat16") for w in p.workloads)
    for w in p.workloads:
        assert w.flops > 0 and w.min_bytes > 0
        if w.is_gpu:
            assert w.min_bytes >= 3 * 60e6, f"{pid}/{w.name}: GPU workloads must be several times a 60 MB L2"


DEGENERATE = {
    "tiny_outputs": """
        import torch
        N = 64
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 1e-7
        def get_inputs(): return [torch.randn(N, N)]
        def get_init_inputs(): return []
    """,
    "constant": """
        import torch
        N = 64
        class Model(torch.nn.Module):
            def forward(self, x):
                return torch.ones_like(x) * 3.0
        def get_inputs(): return [torch.randn(N, N)]
        def get_init_inputs(): return []
    """,
    "seed_independent": """
        import torch
        N = 64
        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(N, N))
            def forward(self, x):
                return self.w * 1.0 + 0 * x
        def get_inputs(): return [torch.randn(N, N)]
        def get_init_inputs(): return []
    """,
}


@pytest.mark.parametrize("name,expected", [("tiny_outputs", {"zeros-pass", "constant"}), ("constant", {"constant"}),
                                           ("seed_independent", {"seed-independent"})])
def test_lint_catches_degenerate_problem(tmp_path, name, expected):
    f = tmp_path / f"{name}.py"
    f.write_text(textwrap.dedent(DEGENERATE[name]))
    issues = lint_problem(load_problem(f))
    assert expected & {i.check for i in issues}, issues
