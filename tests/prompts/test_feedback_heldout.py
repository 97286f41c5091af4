"""Feedback names the held-out shape, the value profile and the worst element where a kernel failed."""

from __future__ import annotations

from harness import env as envmod
from harness.prompts.feedback import feedback_text
from harness.records import HeldoutResult, HeldoutShape, JobResult, Status, WorstElement


def test_feedback_shows_a_failed_heldout_shape():
    held = HeldoutResult((HeldoutShape("smoke~heldout-1", {"COLS": 255, "ROWS": 17}, "INCORRECT_NUMERICAL",
                                       "value profile 'normal': output: 17/4335 element(s) out of tolerance",
                                       "normal", WorstElement(0, (3, 254), 9.5, 0.0125, 1e-4)),
                          HeldoutShape("smoke~heldout-2", {"COLS": 257}, "PASSED")), gated=False)
    r = JobResult(job_id="j", run_id="r", candidate="softmax.py", candidate_sha256="a" * 64, generator="g",
                  generator_version="1", problem_id="softmax", category="reduction", workload="smoke", dtype="float32",
                  dsl="triton", status=Status.PASSED, flops=1, min_bytes=1, env=envmod.snapshot("cpu"), created_at="t",
                  heldout=held)
    text = feedback_text(r)
    assert "Held-out shapes" in text and "COLS=255, ROWS=17" in text and "INCORRECT_NUMERICAL" in text
    assert "value profile 'normal'" in text and "[3, 254" in text and "got 9.5, expected 0.0125" in text
    assert "COLS=257" not in text and "mask every tail" in text
