"""The reward mapping (harness/score/reward.py): ordering, the roofline bound, aggregation, config checks."""

from __future__ import annotations

import hashlib

import pytest

from harness.records import EnvSnapshot, ErrorInfo, JobResult, Screening, Status, TimingStats, Verdict
from harness.score.reward import REWARD_VERSION, RewardConfig, record_reward, reward_of

ENV = EnvSnapshot(device_kind="cuda", device_name="NVIDIA H200", device_uuid="GPU-1", driver="580", python="3.11",
                  torch="2.11", triton="3.6", tilelang=None, harness="0.1.0")



def _valid(status, kw: dict) -> dict:
    """A failure record carries an error, a REWARD_HACK its evidence (harness.records.FIELDS_BY_STATUS)."""
    from harness.records import ErrorInfo, Status as _S

    kw = dict(kw)
    if status is not None and _S(status) not in (_S.PASSED, _S.LOWERED):
        kw.setdefault("error", ErrorInfo("Error", "test failure"))
        if _S(status) is _S.REWARD_HACK:
            kw.setdefault("evidence", {"mechanism": "test"})
    return kw


def _t(ms: float) -> TimingStats:
    return TimingStats(ms, 0.0, ms, ms, (ms,), "cuda_event", True)


def _rec(status: Status, workload: str = "w", *, t_kernel: float | None = None, t_library: float = 1.0,
         t_floor: float = 0.25, sha: str = "a" * 64, **kw) -> JobResult:
    extra: dict = {}
    if t_kernel is not None:
        extra = {"timing": _t(t_kernel), "library_timing": _t(t_library),
                 "screening": Screening(t_library / t_kernel, t_floor / t_kernel, t_floor / t_library, t_floor, "memory",
                                        "dram", Verdict.EFFICIENT, False, 0.8, 0.5, "")}
    kw = _valid(status, kw)
    return JobResult(job_id=hashlib.sha256(workload.encode()).hexdigest()[:20], run_id="r", candidate="g/x.py",
                     candidate_sha256=sha, generator="g", generator_version="1", problem_id="p", category="elementwise",
                     workload=workload, dtype="float16", dsl="triton", status=status, flops=0, min_bytes=1, env=ENV,
                     created_at="2025-01-01T00:00:00+00:00", **extra, **kw)


def test_default_ordering_hack_failure_incorrect_correct():
    values = [record_reward(_rec(s, error=ErrorInfo("E", "m"))).value
              for s in (Status.REWARD_HACK, Status.CRASHED, Status.INCORRECT_NUMERICAL)]
    slow = record_reward(_rec(Status.PASSED, t_kernel=1000.0)).value
    assert values == [-1.0, -0.5, 0.0]
    assert slow is not None and slow > 0.0


@pytest.mark.parametrize("speed", ["sol", "u_roof", "e_lib"])
def test_speed_term_grows_with_speed_and_stops_at_the_roofline(speed):
    cfg = RewardConfig(speed=speed)
    at_lib = record_reward(_rec(Status.PASSED, t_kernel=1.0), cfg).value
    faster = record_reward(_rec(Status.PASSED, t_kernel=0.5), cfg).value
    at_floor = record_reward(_rec(Status.PASSED, t_kernel=0.25), cfg).value
    below_floor = record_reward(_rec(Status.PASSED, t_kernel=0.2), cfg).value  # within noise of the floor, not a hack
    assert at_lib < faster < at_floor
    assert below_floor == at_floor


def test_sol_values():
    assert record_reward(_rec(Status.PASSED, t_kernel=1.0)).speed == pytest.approx(0.5)  # library speed
    assert record_reward(_rec(Status.PASSED, t_kernel=0.25)).speed == pytest.approx(1.0)  # on the floor
    assert record_reward(_rec(Status.PASSED, t_kernel=0.5), RewardConfig(speed="e_lib")).speed == pytest.approx(2.0)


def test_untimed_correct_gets_the_base_and_not_the_candidates_outcome_is_none():
    assert record_reward(_rec(Status.PASSED)).value == RewardConfig().correct
    assert record_reward(_rec(Status.LOWERED)).value is None
    assert record_reward(_rec(Status.HARNESS_ERROR)).value is None
    assert reward_of([_rec(Status.HARNESS_ERROR)]).value is None


def test_aggregate_min_and_mean_and_the_returned_config():
    recs = [_rec(Status.PASSED, "a", t_kernel=0.25), _rec(Status.RUNTIME_ERROR, "b", error=ErrorInfo("E", "m")),
            _rec(Status.HARNESS_ERROR, "c")]
    worst = reward_of(recs)
    mean = reward_of(recs, RewardConfig(aggregate="mean"))
    assert worst.value == -0.5 and "lowest: b" in worst.reason
    assert mean.value == pytest.approx((1.5 + -0.5) / 2)  # HARNESS_ERROR left out
    d = mean.to_dict()
    assert d["version"] == REWARD_VERSION and d["config"]["aggregate"] == "mean" and len(d["workloads"]) == 3


def test_records_of_two_candidates_are_refused():
    with pytest.raises(ValueError, match="different candidates"):
        reward_of([_rec(Status.PASSED, "a"), _rec(Status.PASSED, "b", sha="b" * 64)])


@pytest.mark.parametrize("bad, field", [
    ({"hack": 0.5}, "hack <= failure"),
    ({"speed": "fast"}, "'speed'"),
    ({"aggregate": "max"}, "'aggregate'"),
    ({"speed_weight": -1}, "'speed_weight'"),
    ({"correct": float("nan")}, "'correct'"),
    ({"bonus": 1}, "unknown field"),
])
def test_bad_configs_name_the_field(bad, field):
    with pytest.raises(ValueError, match=field):
        RewardConfig.from_dict(bad)


def test_config_round_trip():
    cfg = RewardConfig(hack=-2.0, speed="u_roof", aggregate="mean")
    assert RewardConfig.from_dict(cfg.to_dict()) == cfg


def test_every_status_has_an_outcome_and_none_the_candidate_can_cause_pays_like_a_correct_kernel():
    """A status missing from the table fell through to the correct kernel's reward: TOO_LARGE (which a candidate
    could reach with an output shaped to make the checker allocate) paid 0.5, like a correct untimed kernel."""
    from harness.score.reward import OUTCOME

    assert set(OUTCOME) == set(Status), sorted(s.value for s in set(Status) - set(OUTCOME))
    c = RewardConfig()
    for status in Status:
        got = record_reward(_rec(status)).value
        expected = {"correct": c.correct, "incorrect": c.incorrect, "failure": c.failure, "hack": c.hack,
                    "none": None}[OUTCOME[status]]
        assert got == expected, (status, got)
        if status is not Status.PASSED:
            assert got is None or got < c.correct, status
    assert {s for s, o in OUTCOME.items() if o == "none"} == {Status.LOWERED, Status.HARNESS_ERROR, Status.TOO_LARGE}
