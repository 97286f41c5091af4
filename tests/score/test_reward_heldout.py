"""The held-out term of the reward (harness.score.reward.RewardConfig.heldout_weight)."""

from __future__ import annotations

import pytest

from harness.records import EnvSnapshot, HeldoutResult, HeldoutShape, JobResult, Status
from harness.score.reward import REWARD_VERSION, RewardConfig, record_reward, reward_of

ENV = EnvSnapshot(device_kind="cpu", device_name="cpu", device_uuid=None, driver=None, python="3.11", torch="2.13",
                  triton="3.9", tilelang=None, harness="0.1.0")


def _rec(heldout=None, workload="w") -> JobResult:
    return JobResult(job_id=f"j{workload}", run_id="r", candidate="c.py", candidate_sha256="a" * 64, generator="g",
                     generator_version="1", problem_id="p", category="reduction", workload=workload, dtype="float32",
                     dsl="triton", status=Status.PASSED, flops=1, min_bytes=1, env=ENV, created_at="t", heldout=heldout)


FAILED = HeldoutResult((HeldoutShape("w~heldout-1", {"COLS": 255}, "INCORRECT_NUMERICAL", "out"),
                        HeldoutShape("w~heldout-2", {"COLS": 257}, "PASSED")), gated=False)
PASSED = HeldoutResult((HeldoutShape("w~heldout-1", {"COLS": 255}, "PASSED"),), gated=False)
UNJUDGED = HeldoutResult((HeldoutShape("w~heldout-1", {"COLS": 255}, None, "not fair"),), gated=False)


def test_a_failed_heldout_shape_costs_a_share_of_the_reward_above_incorrect():
    c = RewardConfig()
    full = record_reward(_rec(), c).value
    assert record_reward(_rec(PASSED), c).value == full == record_reward(_rec(UNJUDGED), c).value
    cut = record_reward(_rec(FAILED), c)
    assert cut.value == pytest.approx(c.incorrect + (1 - c.heldout_weight) * (full - c.incorrect))
    assert "1/2 held-out shape(s) failed" in cut.reason and "COLS=255" in cut.reason
    assert c.incorrect < cut.value < full


@pytest.mark.parametrize("w, expect", [(0.0, "full"), (1.0, "incorrect")])
def test_the_weight_spans_ignore_to_incorrect(w, expect):
    c = RewardConfig(heldout_weight=w)
    v = record_reward(_rec(FAILED), c).value
    assert v == pytest.approx(c.correct if expect == "full" else c.incorrect)


def test_the_weight_is_checked_and_travels_with_the_reward():
    with pytest.raises(ValueError, match="heldout_weight"):
        RewardConfig(heldout_weight=1.5)
    r = reward_of([_rec(FAILED)], RewardConfig.from_dict({"heldout_weight": 0.25}))
    assert r.to_dict()["config"]["heldout_weight"] == 0.25 and r.version == REWARD_VERSION
