"""Per-record metrics: S, E_lib, verdict buckets, latest-record and best-candidate rules."""

from __future__ import annotations

import math

import pytest
from synth_results import LN1, LN2, floor_ms, record

from harness.report import metrics as M


def test_sol_score_anchor_points():
    assert M.sol_score(1.0, 2.0, 1.0) == 1.0  # at the floor
    assert M.sol_score(2.0, 2.0, 1.0) == pytest.approx(0.5)  # at library speed
    assert M.sol_score(3.0, 2.0, 1.0) == pytest.approx(1 / 3)  # 1 / (1 + 2/1)
    assert M.sol_score(0.5, 2.0, 1.0) == 1.0  # below the floor: clamped
    assert M.sol_score(1e9, 2.0, 1.0) == pytest.approx(0.0, abs=1e-8)


def test_sol_score_library_at_or_below_floor_uses_library_ratio():
    # t_library <= t_floor: 0.5 * t_library / t_kernel, clamped
    assert M.sol_score(2.0, 1.0, 1.0) == pytest.approx(0.25)
    assert M.sol_score(1.0, 0.9, 0.95) == pytest.approx(0.45)


def test_score_of_by_status():
    f = floor_ms("layernorm", LN1)
    ok = record("g", "1", "layernorm", LN1, t_kernel=2 * f, t_library=2 * f)
    assert M.score_of(ok) == pytest.approx(0.5)
    assert M.e_lib_of(ok) == pytest.approx(1.0)
    assert M.u_roof_of(ok) == pytest.approx(0.5)
    assert M.score_of(record("g", "1", "layernorm", LN1, status="COMPILE_ERROR")) == 0.0
    assert M.score_of(record("g", "1", "layernorm", LN1, status="LOWERED")) is None
    assert M.score_of(record("g", "1", "layernorm", LN1, status="HARNESS_ERROR")) is None
    untimed = record("g", "1", "layernorm", LN1)  # PASSED, no timing (--no-timing)
    assert M.score_of(untimed) is None and M.e_lib_of(untimed) is None and M.verdict_of(untimed) == "not_timed"


def test_reward_hack_with_timing_scores_zero():
    f = floor_ms("softmax", "fp16-16384x8192")
    hack = record("g", "1", "softmax", "fp16-16384x8192", t_kernel=0.3 * f, t_library=1.5 * f)
    assert hack.status.value == "REWARD_HACK" and hack.timing is not None
    assert M.score_of(hack) == 0.0 and M.e_lib_of(hack) is None and M.verdict_of(hack) == "reward_hack"


def test_e_lib_without_screening_comes_from_timings():
    r = record("g", "1", "layernorm", LN1, t_kernel=2.0, t_library=1.0, screen=False)
    assert r.screening is None
    assert M.e_lib_of(r) == pytest.approx(0.5)
    assert M.u_roof_of(r) is None and M.score_of(r) is None


def test_verdict_buckets():
    assert M.verdict_of(record("g", "1", "layernorm", LN1, status="INCORRECT_SHAPE")) == "incorrect"
    assert M.verdict_of(record("g", "1", "layernorm", LN1, status="TIMEOUT")) == "failed"
    assert M.verdict_of(record("g", "1", "layernorm", LN1, status="LOWERED")) == "lowered"


def test_latest_records_keeps_latest_per_job_and_counts_superseded():
    old = record("g", "1", "layernorm", LN1, status="TIMEOUT", created_at="2025-01-01T00:00:00+00:00")
    new = record("g", "1", "layernorm", LN1, created_at="2025-01-02T00:00:00+00:00")
    other = record("g", "1", "layernorm", LN2)
    for order in ([old, new, other], [new, other, old]):
        kept, n = M.latest_records(order)
        assert n == 1
        assert {r.status.value for r in kept} == {"PASSED"}
    tie = new.replace(run_id="later-in-file")
    kept, _ = M.latest_records([new, tie])
    assert kept[0].run_id == "later-in-file"


def test_geomean_and_mean_skip_absent_values():
    assert M.geomean([1.0, 4.0, None]) == pytest.approx(2.0)
    assert M.geomean([None, math.inf]) is None
    assert M.mean([None, 1.0, 0.0]) == pytest.approx(0.5)
    assert M.num("inf") == math.inf and M.num(None) is None


def test_best_candidate_prefers_correct_then_slowest_workload_speed():
    f1, f2 = floor_ms("layernorm", LN1), floor_ms("layernorm", LN2)
    recs = [
        # a: correct, E_lib 2.0 and 0.9 -> e_lib_min 0.9
        record("g", "1", "layernorm", LN1, candidate="a.py", t_kernel=f1, t_library=2 * f1),
        record("g", "1", "layernorm", LN2, candidate="a.py", t_kernel=2 * f2, t_library=1.8 * f2),
        # b: correct, E_lib 1.2 on both -> best
        record("g", "1", "layernorm", LN1, candidate="b.py", t_kernel=1.5 * f1, t_library=1.8 * f1),
        record("g", "1", "layernorm", LN2, candidate="b.py", t_kernel=1.5 * f2, t_library=1.8 * f2),
        # c: very fast on one workload but failed the other
        record("g", "1", "layernorm", LN1, candidate="c.py", t_kernel=1.1 * f1, t_library=3 * f1),
        record("g", "1", "layernorm", LN2, candidate="c.py", status="INCORRECT_NUMERICAL"),
    ]
    best = M.best_candidate(recs)
    assert best.candidate == "b.py" and best.correct
    assert best.e_lib_min == pytest.approx(1.2)
    assert best.fast(1.0) and not best.fast(1.5) and best.fast(0)
    c = M.problem_outcome("c.py", recs[4:])
    assert not c.correct and not c.fast(0) and c.e_lib_min is None
