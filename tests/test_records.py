"""Records validate on construction: which fields may be present under which status (harness.records)."""

from __future__ import annotations

import pytest

from harness import env as envmod
from harness.records import FIELDS_BY_STATUS, ErrorInfo, JobResult, Screening, Status, TimingStats, Verdict

ENV = envmod.snapshot("cpu")
T = TimingStats(1.0, 0.1, 0.9, 1.0, (1.0, 0.9, 1.1), "cuda_event", True)
S = Screening(1.0, 0.9, 0.8, 0.9, "memory", "dram", Verdict.EFFICIENT, False, 0.8, 0.5, "ok")


def rec(status: Status, **kw) -> JobResult:
    base = dict(job_id="j", run_id="r", candidate="s/c.py", candidate_sha256="0" * 64, generator="g",
                generator_version="1", problem_id="gelu", category="elementwise", workload="w", dtype="float16",
                dsl="triton", status=status, flops=1, min_bytes=2, env=ENV, created_at="2026-01-01T00:00:00+00:00")
    base.update(kw)
    return JobResult(**base)


def test_a_failure_carries_an_error_and_no_measurements():
    with pytest.raises(ValueError, match="needs \\['error'\\]"):
        rec(Status.INCORRECT_NUMERICAL)
    with pytest.raises(ValueError, match="must not carry \\['library_timing', 'timing'\\]"):
        rec(Status.RUNTIME_ERROR, error=ErrorInfo("E", "m"), timing=T, library_timing=T)
    rec(Status.RUNTIME_ERROR, error=ErrorInfo("E", "m"))


def test_passed_has_no_error_and_screening_needs_timing():
    with pytest.raises(ValueError, match="must not carry \\['error'\\]"):
        rec(Status.PASSED, error=ErrorInfo("E", "m"))
    with pytest.raises(ValueError, match="screening without timing"):
        rec(Status.PASSED, screening=S)
    with pytest.raises(ValueError, match="come together"):
        rec(Status.PASSED, timing=T)
    rec(Status.PASSED, timing=T, library_timing=T, screening=S)


def test_a_reward_hack_keeps_what_it_was_caught_with():
    r = rec(Status.REWARD_HACK, error=ErrorInfo("ClockMismatch", "m"), timing=T, library_timing=T,
            evidence={"mechanism": "trusted_clock"})
    assert r.evidence["mechanism"] == "trusted_clock"
    with pytest.raises(ValueError, match="evidence"):
        rec(Status.PASSED, evidence={"mechanism": "x"})


def test_harness_faults_are_never_the_candidates():
    assert Status.HARNESS_ERROR.is_harness_fault and Status.TOO_LARGE.is_harness_fault
    assert not Status.CRASHED.is_harness_fault
    assert set(FIELDS_BY_STATUS) <= {s.value for s in Status}


def test_schema_1_records_still_load():
    v1 = rec(Status.PASSED, timing=T, library_timing=T, screening=S).to_dict()
    v1["schema_version"] = 1
    for k in ("params", "secret", "mode", "baseline", "trusted_timing", "kernels", "verification", "evidence",
              "attempts"):
        v1.pop(k)
    v1["screening"]["verdict"] = "not_timed"  # a verdict schema 1 declared and never produced
    back = JobResult.from_dict(v1)
    assert back.status is Status.PASSED and back.screening is None and back.mode == "eval"
