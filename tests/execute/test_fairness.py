"""Which value profiles are fair (harness.execute.checker.fairness): probed on the library, cached on disk."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from harness.execute.checker import fairness as F
from harness.execute.shared.value_profiles import BY_NAME, candidate_profiles

ROOT = Path(__file__).resolve().parents[2]


def _fake(errors: dict[int, float], nonfinite: set[int] = frozenset(), unchanged: set[int] = frozenset()):
    """A reference whose library is off by ``errors[profile]`` (absolute) on a unit-scale output."""
    calls = []

    def ref(seed: int, profile: int):
        calls.append((seed, profile))
        r = torch.linspace(-1, 1, 64, dtype=torch.float64)
        if profile in nonfinite:
            r = r.clone()
            r[3] = float("inf")
        lib = (r + errors.get(profile, 0.0)).float()
        return [r], [lib], [None], profile not in unchanged

    return ref, calls


def test_verdicts_follow_the_rules():
    ref, calls = _fake({0: 5e-4, 1: 1e-5, 2: 1.4e-4, 3: 0.2e-4}, nonfinite={4}, unchanged={5})
    got = {v.name: v for v in F.judge(ref, (0, 1, 2, 3, 4, 5), atol=1e-4, rtol=1e-4, reduction_length=None)}
    assert not got["normal"].fair and "more than 0.5" in got["normal"].reason  # judged like the others
    assert got["large"].fair and got["large"].library_excess < 0.2
    assert not got["row_offset"].fair and "more than 0.5 of the tolerance" in got["row_offset"].reason
    assert got["heavy_tail"].fair  # 0.2 to 0.4 of the tolerance: within the headroom
    assert not got["uniform"].fair and "NaN/Inf" in got["uniform"].reason
    assert not got["near_one"].fair and "changes no input" in got["near_one"].reason
    assert sum(1 for _, p in calls if p == 5) == 1  # a profile that changes nothing is not probed twice
    assert {s for s, p in calls if p == 1} == {F.probe_seed(1, 0), F.probe_seed(1, 1)}


def test_verdicts_are_cached_by_what_they_depend_on(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELGATE_CACHE", str(tmp_path))
    prob = ROOT / "problems" / "reduction" / "softmax.py"
    kw = dict(problem_path=str(prob), params={"ROWS": 16, "COLS": 256}, dtype="float32", allow_tf32=False,
              mode="eval", baseline="eager", input_transform="any", atol=1e-4, rtol=1e-4, reduction_length=256,
              device="cpu", folder=F.cache_dir())
    ref, calls = _fake({})
    first, cached = F.verdicts(ref, **kw)
    assert not cached and calls and len(first) == len(candidate_profiles("any"))
    n = len(calls)
    again, cached = F.verdicts(ref, **kw)
    assert cached and again == first and len(calls) == n
    _, cached = F.verdicts(ref, **{**kw, "dtype": "float16"})
    assert not cached


@pytest.mark.parametrize("problem, workload, fair, unfair", [
    ("reduction/softmax.py", "smoke", {"normal", "large", "row_offset", "heavy_tail", "uniform", "near_one",
                                       "many_zeros"}, {"peaked", "flat"}),
    ("gemm/gemm_large_k.py", "smoke", {"normal", "large"}, set()),  # annotated "scale": only rescaling
])
def test_bundled_problems_on_the_cpu(problem, workload, fair, unfair):
    from harness.problems.loader import load_problem

    p = load_problem(ROOT / "problems" / problem)
    w = p.workload(workload)
    ref = F.local_reference(p.path, dict(w.params), w.dtype, input_transform=p.input_transform)
    got = F.judge(ref, candidate_profiles(p.input_transform), atol=w.atol, rtol=w.rtol,
                  reduction_length=w.reduction_length)
    assert {v.name for v in got if v.fair} == fair
    assert {v.name for v in got if not v.fair} == unfair
    assert all(BY_NAME[v.name].index == v.profile for v in got)
