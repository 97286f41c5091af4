"""The correctness fields of a record (value profiles, the worst element, held-out shapes) survive a JSON round trip."""

from __future__ import annotations

import json

from harness import env as envmod
from harness.jsonio import dumps
from harness.records import (CorrectnessStats, ErrorInfo, HeldoutResult, HeldoutShape, JobResult, ProfileCheck, Status,
                             WorstElement)

ENV = envmod.snapshot("cpu")


def _rec(**kw) -> JobResult:
    base = dict(job_id="j", run_id="r", candidate="s/c.py", candidate_sha256="0" * 64, generator="g",
                generator_version="1", problem_id="softmax", category="reduction", workload="smoke", dtype="float32",
                dsl="triton", status=Status.PASSED, flops=1, min_bytes=2, env=ENV, created_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return JobResult(**base)


def test_round_trip_of_profiles_worst_element_and_heldout_shapes():
    worst = WorstElement(output=0, index=(3, 17), got=float("nan"), expected=0.25, allowed=None)
    corr = CorrectnessStats(7, 7, 1e-6, 0.2, 1e-4, 1e-4, round_profiles=("normal", "large", "row_offset"),
                            profiles=(ProfileCheck("normal", True, "public"), ProfileCheck("peaked", False, "no input")))
    held = HeldoutResult(shapes=(
        HeldoutShape("smoke~heldout-1", {"COLS": 255}, "INCORRECT_NUMERICAL", "out of tolerance", "normal", worst,
                     ("normal",)),
        HeldoutShape("smoke~heldout-2", {"COLS": 257}, None, "not fair: the library fails"),
    ), gated=False)
    r = _rec(correctness=corr, heldout=held)
    back = JobResult.from_dict(json.loads(dumps(r.to_dict())))
    assert back.correctness.round_profiles == corr.round_profiles and back.correctness.profiles == corr.profiles
    shape = back.heldout.shapes[0]
    assert shape.status == "INCORRECT_NUMERICAL" and shape.worst.index == (3, 17) and shape.worst.got != shape.worst.got
    assert back.heldout.judged == 1 and back.heldout.passed == 0 and back.heldout.generalizes is False
    assert back.heldout.shapes[1].status is None


def test_generalizes_is_none_when_nothing_was_judged_and_records_without_the_fields_load():
    assert HeldoutResult(shapes=(), gated=True).generalizes is None
    assert HeldoutResult((HeldoutShape("w~heldout-1", {"N": 7}, "PASSED"),), False).generalizes is True
    old = _rec(status=Status.INCORRECT_NUMERICAL, error=ErrorInfo("E", "m"),
               correctness=CorrectnessStats(1, 0, 1.0, 2.0, 1e-4, 1e-4, 0, "bad")).to_dict()
    for k in ("round_profiles", "failed_profile", "worst", "profiles"):
        old["correctness"].pop(k)
    old.pop("heldout")
    back = JobResult.from_dict(old)
    assert back.heldout is None and back.correctness.worst is None and back.correctness.round_profiles == ()
