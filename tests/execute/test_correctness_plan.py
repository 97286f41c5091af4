"""The parent's correctness plan (harness.execute.parent.correctness_plan): rounds cover the fair profiles, held-out
records fold into their public workload's record, and the gate."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent import correctness_plan as C
from harness.problems.loader import load_problem
from harness.records import CorrectnessStats, ErrorInfo, JobResult, Status, TimingStats, WorstElement

ROOT = Path(__file__).resolve().parents[2]
ENV = envmod.snapshot("cpu")
T = TimingStats(1.0, 0.1, 0.9, 1.0, (1.0, 0.9, 1.1), "host_perf_counter", True)


def test_public_rounds_start_with_the_standard_profile_and_heldout_shapes_take_the_rest():
    fair = (0, 1, 2, 3, 5, 6, 4)  # a real-valued input: 6 profiles besides the standard one
    for seed in range(5):
        public, held = C.split_profiles(fair, 5, 2, 1, random.Random(seed))
        assert public[0] == 0 and len(public) == 5 and len(set(public)) == 5
        assert len(held) == 2 and all(len(h) == 1 for h in held)
        assert set(public) | {h[0] for h in held} == set(fair)  # every fair profile once in the run
    orders = {C.split_profiles(fair, 5, 2, 1, random.Random(s))[0] for s in range(20)}
    assert len(orders) > 1  # the order is drawn


def test_more_rounds_than_profiles_cycle_and_shapes_start_again_from_the_standard_one():
    public, held = C.split_profiles((0, 1, 2), 7, 3, 1, random.Random(1))
    assert len(public) == 7 and public[0] == 0 and set(public[:3]) == {0, 1, 2} and public[3:6] == public[:3]
    assert [h[0] for h in held] == list(public[:3])  # nothing left: the shapes take the sequence from its start
    only_normal, held = C.split_profiles((0,), 5, 2, 2, random.Random(0))
    assert only_normal == (0,) * 5 and held == ((0, 0), (0, 0))


def test_timed_calls_draw_every_fair_profile():
    rng = random.Random(0)
    counts = Counter(C.timed_profile((0, 2, 4), rng) for _ in range(3000))
    assert set(counts) == {0, 2, 4} and min(counts.values()) > 800


def _rec(workload, status=Status.PASSED, **kw):
    base = dict(job_id=f"j-{workload}", run_id="r", candidate="s/c.py", candidate_sha256="0" * 64, generator="g",
                generator_version="1", problem_id="softmax", category="reduction", workload=workload,
                dtype="float32", dsl="triton", status=status, flops=1, min_bytes=2, env=ENV,
                created_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return JobResult(**base)


@pytest.fixture(scope="module")
def shapes():
    p = load_problem(ROOT / "problems" / "reduction" / "softmax.py")
    smoke = p.workload("smoke")
    held = C.heldout_workloads(p, [smoke], base_seed=7, count=2)
    assert len(held) == 2
    return smoke, held


def test_heldout_workloads_run_before_their_public_workload(shapes):
    smoke, held = shapes
    other = smoke.__class__(**{**{f: getattr(smoke, f) for f in smoke.__dataclass_fields__}, "name": "other"})
    assert C.with_heldout([smoke, other], held) == (*held, smoke, other)


def test_a_profile_that_failed_at_a_heldout_shape_is_named_for_the_public_rounds(shapes):
    smoke, held = shapes
    bad = _rec(held[0].name, Status.INCORRECT_NUMERICAL, error=ErrorInfo("E", "m"),
               correctness=CorrectnessStats(1, 0, 1.0, 9.0, 1e-4, 1e-4, 0, "out", failed_profile="row_offset"))
    ok = _rec(held[1].name, correctness=CorrectnessStats(1, 1, 0.0, 0.0, 1e-4, 1e-4))
    assert C.failed_profiles({bad.workload: bad, ok.workload: ok}, [*held, smoke], "smoke") == (2,)
    assert C.failed_profiles({ok.workload: ok}, [*held, smoke], "smoke") == ()


def test_heldout_records_fold_into_the_public_record(shapes):
    smoke, held = shapes
    worst = WorstElement(0, (3, 254), 9.0, 0.01, 1e-4)
    bad = _rec(held[0].name, Status.INCORRECT_NUMERICAL, error=ErrorInfo("E", "value profile 'normal': 3 elements out"),
               correctness=CorrectnessStats(1, 0, 1.0, 9.0, 1e-4, 1e-4, 0, "out", round_profiles=("normal",),
                                            failed_profile="normal", worst=worst))
    unfair = _rec(held[1].name, Status.HARNESS_ERROR, error=ErrorInfo("NotFair", "the library fails here"))
    pub = _rec("smoke", timing=T, library_timing=T)
    out = C.merge_heldout([pub, bad, unfair], [smoke, *held], gate=False)
    assert [r.workload for r in out] == ["smoke"]
    r = out[0]
    assert r.status is Status.PASSED and r.timing is not None
    assert r.heldout.judged == 1 and r.heldout.generalizes is False and not r.heldout.gated
    s0, s1 = r.heldout.shapes
    assert s0.status == "INCORRECT_NUMERICAL" and s0.worst == worst and s0.failed_profile == "normal" and s0.sizes
    assert s1.status is None and "library fails" in s1.detail


def test_the_gate_turns_a_heldout_failure_into_the_workloads_status(shapes):
    smoke, held = shapes
    bad = _rec(held[0].name, Status.RUNTIME_ERROR, error=ErrorInfo("AssertionError", "shape (17, 255) unsupported"))
    ok = _rec(held[1].name, correctness=CorrectnessStats(2, 2, 0.0, 0.0, 1e-4, 1e-4))
    pub = _rec("smoke", timing=T, library_timing=T, correctness=CorrectnessStats(7, 7, 0.0, 0.0, 1e-4, 1e-4))
    r = C.merge_heldout([pub, bad, ok], [smoke, *held], gate=True)[0]
    assert r.status is Status.RUNTIME_ERROR and r.timing is None and r.heldout.gated
    assert "held-out shape" in r.error.message and "unsupported" in r.error.message
    assert all(f"{k}=" in r.error.message for k in r.heldout.shapes[0].sizes)
    passing = C.merge_heldout([pub, ok], [smoke, *held], gate=True)[0]
    assert passing.status is Status.PASSED and passing.heldout.generalizes is True


def test_a_public_failure_keeps_no_heldout_field(shapes):
    smoke, held = shapes
    pub = _rec("smoke", Status.INCORRECT_NUMERICAL, error=ErrorInfo("E", "m"))
    skipped = [_rec(h.name, Status.HARNESS_ERROR, error=ErrorInfo("NotRun", "public failed")) for h in held]
    out = C.merge_heldout([pub, *skipped], [smoke, *held], gate=True)
    assert len(out) == 1 and out[0].heldout is None and out[0].status is Status.INCORRECT_NUMERICAL


def test_messages_name_the_profile_and_the_shape(shapes):
    smoke, held = shapes
    text = C.with_profile("round 3: 3/4352 out of tolerance", "row_offset", held[0], smoke)
    assert text.startswith("round 3, value profile 'row_offset', held-out shape ") and ("COLS=" in text or "ROWS=" in text)
    assert text.endswith(": 3/4352 out of tolerance")
    assert C.with_profile("x", "large") == "value profile 'large': x"


def test_the_profiles_a_heldout_shape_ran_are_covered(shapes):
    smoke, held = shapes
    ran = _rec(held[0].name, correctness=CorrectnessStats(1, 1, 0.0, 0.0, 1e-4, 1e-4, round_profiles=("near_one",)))
    unjudged = _rec(held[1].name, Status.HARNESS_ERROR, error=ErrorInfo("NotFair", "library fails"))
    assert C.heldout_covered({ran.workload: ran, unjudged.workload: unjudged}, [*held, smoke], "smoke") == {5}
