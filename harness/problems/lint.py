"""Problem lint: reject degenerate problems that let a trivial kernel pass.

A known KernelBench flaw is problems whose outputs are (nearly) constant or
(nearly) zero, so ``return torch.zeros_like(x)`` passes the tolerance check.
For each problem's smoke workload (run on the CPU in float32) this checks:

* the output is finite and not (nearly) constant;
* an all-zero output would FAIL the harness's own comparison;
* a constant output equal to the reference mean would FAIL it;
* the output changes with the input seed (and fails the comparison when the
  seeds are swapped), so a kernel cannot return a memorized answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.problems.loader import Problem, load_module


@dataclass(frozen=True, slots=True)
class LintIssue:
    problem: str
    workload: str
    check: str
    message: str

    def __str__(self) -> str:
        return f"{self.problem}/{self.workload}: [{self.check}] {self.message}"


def lint_problem(problem: Problem, *, workload: str | None = None) -> list[LintIssue]:
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
