"""The shipped problems are not degenerate: a trivial kernel cannot pass them.

A known KernelBench flaw is problems whose outputs are (nearly) constant or
(nearly) zero, so ``return torch.zeros_like(x)`` passes the tolerance check.
For each problem's smoke workload (run on the CPU in float32) :func:`lint_problem` checks:

* the output is finite and not (nearly) constant;
* an all-zero output would FAIL the harness's own comparison;
* a constant output equal to the reference mean would FAIL it;
* the output changes with the input seed (and fails the comparison when the
  seeds are swapped), so a kernel cannot return a memorized answer.

It is a check on the problem suite, so it lives with the suite's tests; it is shown to catch each kind of
degenerate problem below.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import pytest

from harness.problems.loader import Problem, load_module, load_problem
from harness.problems.registry import load_registry

@dataclass(frozen=True, slots=True)
class LintIssue:
    problem: str
    workload: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.problem}/{self.workload}: [{self.check}] {self.message}"


def lint_problem(problem: Problem, *, workload: str | None = None) -> list[LintIssue]:
    """What makes ``problem`` degenerate at its smoke workloads (or ``workload``): see the module docstring."""
    import torch

    from harness.execute.shared.inputs import flatten_outputs, make_inputs, make_reference_model
    from harness.score.correctness import compare_outputs

    issues: list[LintIssue] = []
    wls = [problem.workload(workload)] if workload else [w for w in problem.workloads if w.is_smoke] or [problem.workloads[0]]
    for w in wls:
        module = load_module(problem.path, w.params)
        dtype = "float32"

        def run(seed: int, r: int = 0) -> list:
            model = make_reference_model(module, "float64", "cpu", 1)
            xs = make_inputs(module, dtype, "cpu", seed, r, problem.input_transform)
            xs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
            with torch.no_grad():
                return [t.detach() for t in flatten_outputs(model(*xs))]

        def fails(cand: list, ref: list) -> bool:
            libs = [t.to(torch.float32) for t in ref]
            return not compare_outputs([c.to(torch.float32) for c in cand], ref, libs, atol=w.atol, rtol=w.rtol,
                                       reduction_length=w.reduction_length)["ok"]

        def add(check: str, msg: str) -> None:
            issues.append(LintIssue(problem.id, w.name, check, msg))

        ref_a, ref_b = run(11), run(12)
        for i, t in enumerate(ref_a):
            if not t.is_floating_point():
                continue
            if not bool(torch.isfinite(t).all()):
                add("finite", f"output {i} has NaN/Inf on ordinary inputs")
                continue
            spread = float(t.max() - t.min()) if t.numel() > 1 else 0.0
            if t.numel() > 1 and spread <= 1e-6 * max(1.0, float(t.abs().max())):
                add("constant", f"output {i} is (nearly) constant: max-min = {spread:.3g}")
        floats = [i for i, t in enumerate(ref_a) if t.is_floating_point()]
        if floats:
            if not fails([torch.zeros_like(t) for t in ref_a], ref_a):
                add("zeros-pass", "an all-zero output passes the tolerance check; make the outputs larger than atol")
            if not fails([torch.full_like(t, float(t.mean())) for t in ref_a], ref_a):
                add("mean-pass", "a constant output equal to the mean passes the tolerance check")
            if not fails(ref_b, ref_a):
                add("seed-independent", "the output for one input seed passes as the output for another seed")
    return issues


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
