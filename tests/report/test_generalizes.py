"""Held-out correctness in the leaderboard (a column and a rate) and in a comparison (a metric per side)."""

from __future__ import annotations

from harness import env as envmod
from harness.records import HeldoutResult, HeldoutShape, JobResult, Status
from harness.report.compare import compare_generators, format_comparison
from harness.report.leaderboard import build_leaderboard, format_leaderboard

ENV = envmod.snapshot("cpu")


def _rec(gen, problem, generalizes: bool | None, status=Status.PASSED):
    held = None
    if generalizes is not None:
        held = HeldoutResult((HeldoutShape(f"smoke~heldout-1", {"COLS": 255},
                                           "PASSED" if generalizes else "INCORRECT_NUMERICAL"),), gated=False)
    return JobResult(job_id=f"{gen}-{problem}", run_id="r", candidate=f"{problem}.py", candidate_sha256=gen * 64,
                     generator=gen, generator_version="1", problem_id=problem, category="reduction", workload="smoke",
                     dtype="float32", dsl="triton", status=status, flops=1, min_bytes=1, env=ENV, created_at="t",
                     heldout=held)


RECORDS = [_rec("a", "softmax", True), _rec("a", "sum_dim", False), _rec("a", "max_dim", None),
           _rec("b", "softmax", True), _rec("b", "sum_dim", True), _rec("b", "max_dim", True)]


def test_leaderboard_rows_and_rate():
    lb = build_leaderboard(RECORDS)
    rows = {(e["generator"], e["problem"]): e for e in lb["entries"]}
    assert rows[("a", "sum_dim")]["generalizes"] is False and rows[("a", "sum_dim")]["heldout_passed"] == "0/1"
    assert rows[("a", "max_dim")]["generalizes"] is None
    assert rows[("a", "sum_dim")]["heldout_failures"] == ["COLS=255: INCORRECT_NUMERICAL"]
    assert rows[("a", "softmax")]["heldout_failures"] == []
    agg = {g["label"]: g["overall"] for g in lb["generators"]}
    assert agg["a@1"]["generalization_rate"] == 0.5 and agg["a@1"]["n_heldout_judged"] == 2
    assert agg["b@1"]["generalization_rate"] == 1.0
    text = format_leaderboard(lb)
    assert "generalizes" in text and "50%" in text


def test_comparison_counts_generalizing_records_per_side():
    d = compare_generators(RECORDS, "a", "b", n_boot=100)
    s = d["summary"]
    assert (s["generalizes_a"], s["heldout_judged_a"], s["generalizes_b"], s["heldout_judged_b"]) == (1, 2, 3, 3)
    pair = next(p for p in d["pairs"] if p["problem"] == "sum_dim")
    assert pair["generalizes_a"] is False and pair["generalizes_b"] is True
    assert "generalizes (PASSED and every judged held-out shape passed): a 1/2, b 3/3" in format_comparison(d)
