"""The trusted checker's reference cache: one problem's references are computed once per run.

Every candidate of a run gets the same round seeds for a workload, so the
float64 reference of (problem, workload, round) is the same for all of them;
the runner sends a workload's compares to the checker process that computed
it. On the H200 the reference was the largest part of the harness's own time
per candidate (up to 0.76 s per workload for a convolution).
"""

from __future__ import annotations

import torch

from harness.execute.checker import _reference
from harness.execute.runner import Checker
from harness.problems.registry import load_registry


def _request(tmp_path, name: str) -> dict:
    prob = load_registry().get("gelu")
    w = [w for w in prob.workloads if w.is_smoke][0]
    req = {"op": "compare", "problem_path": str(prob.path), "params": w.params, "dtype": w.dtype, "device": "cpu",
           "model_seed": 11, "seed": 12, "round": 0, "input_transform": prob.input_transform, "atol": w.atol,
           "rtol": w.rtol, "reduction_length": w.reduction_length, "allow_tf32": False}
    _, libs = _reference(req)  # the library's own output: a correct candidate
    path = tmp_path / f"{name}.pt"
    torch.save([t.clone() for t in libs], path)
    return {**req, "output_path": str(path)}


def test_second_compare_of_a_workload_reuses_its_references(tmp_path):
    checker = Checker("cpu", None, tmp_path / "checker", size=2)
    try:
        first = checker.compare(_request(tmp_path, "a"))
        second = checker.compare(_request(tmp_path, "b"))  # another candidate, same workload and round
    finally:
        checker.close()
    assert first["ok"] and second["ok"], (first, second)
    assert first["ref_s"] > 0
    # without the affinity the second compare would go to the other (idle) process and recompute
    assert second["ref_s"] < first["ref_s"] / 5, (first["ref_s"], second["ref_s"])
    assert "queue_s" in first and first["queue_s"] >= 0


def test_checker_close_ends_every_process(tmp_path):
    checker = Checker("cpu", None, tmp_path / "checker", size=3)
    checker.close(timeout_s=20)
    assert all(p.poll() is not None for p in checker.procs)
