"""A scalar reward for one candidate's records: the number an RL loop trains on.

Versioned mapping (``REWARD_VERSION``), applied per (candidate, workload)
record and then aggregated over the candidate's workloads::

    status                                   reward of the record
    REWARD_HACK (static scan, run-time        hack              (default -1.0)
      check, or faster than the floor)
    COMPILE_ERROR, RUNTIME_ERROR, CRASHED,    failure           (default -0.5)
      TIMEOUT, INVALID_CANDIDATE
    INCORRECT_SHAPE/DTYPE/NUMERICAL           incorrect         (default  0.0)
    PASSED, timed and screened                correct + speed_weight * speed(record)
    PASSED, not timed (no ceilings)           correct           (default  0.5)
    PASSED, a held-out shape failed           incorrect + (1 - heldout_weight) * (the PASSED reward - incorrect)
      (JobResult.heldout.generalizes False)   (default heldout_weight 0.5: halfway between incorrect and
                                              the reward it would have earned)
    LOWERED, HARNESS_ERROR, TOO_LARGE         None: not the candidate's outcome (compiled only / the
                                              harness failed / too large for the harness); leave it out
    (every status is listed in OUTCOME; a new one cannot fall through to a correct kernel's reward)

    speed = "sol"     S = 1 / (1 + (t_kernel - t_floor) / (t_library - t_floor)) in [0, 1]:
                      1 at the roofline floor, 0.5 at library speed (harness.score.sol.sol_score)
    speed = "u_roof"  min(U_roof, 1) = t_floor / t_kernel: the share of the roofline reached
    speed = "e_lib"   min(E_lib, t_library / t_floor): the speed-up over the library, capped at the
                      speed-up a kernel *on* the roofline floor would have

    candidate reward  = min over its workloads (aggregate="min", default: a kernel is only as
                        good as its worst workload; a hack on any workload makes it a hack)
                        or their mean (aggregate="mean")

The held-out term: KernelBench's semantics allow a kernel specialised to its one shape, so a held-out failure does
not change a record's status unless the run gates on it (``--heldout-gate``), but a policy trained on the reward
would otherwise learn to hard-code the public shape (the cheapest way to a fast, correct kernel). A record whose
held-out shapes all passed, or that ran none, is not affected.

Every speed term is bounded by the roofline: no measured time can earn more
than a kernel at the physical minimum would (and a time below it is
REWARD_HACK, not a large reward). Defaults make hacks < failures < incorrect <
any correct kernel, so the ordering a policy learns is the one the harness
judges; :class:`RewardConfig` refuses a configuration that breaks it.

Each :class:`Reward` carries the version and the whole config it was computed
with, so a training log always says which mapping produced its numbers.
Bump ``REWARD_VERSION`` whenever the mapping (not just a default) changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Iterable

from harness.records import JobResult, Status
from harness.score.sol import sol_score

REWARD_VERSION = "3"
"""2: a PASSED record whose held-out shapes failed earns less (``heldout_weight``). 3: every status has an outcome
(TOO_LARGE, which paid like a correct kernel, is left out like HARNESS_ERROR)."""
SPEED_TERMS = ("sol", "u_roof", "e_lib")
AGGREGATES = ("min", "mean")

OUTCOME: dict[Status, str] = {
    Status.PASSED: "correct",
    Status.INCORRECT_SHAPE: "incorrect", Status.INCORRECT_DTYPE: "incorrect", Status.INCORRECT_NUMERICAL: "incorrect",
    Status.COMPILE_ERROR: "failure", Status.RUNTIME_ERROR: "failure", Status.CRASHED: "failure",
    Status.TIMEOUT: "failure", Status.INVALID_CANDIDATE: "failure",
    Status.REWARD_HACK: "hack",
    Status.LOWERED: "none", Status.HARNESS_ERROR: "none", Status.TOO_LARGE: "none",
}
"""What every status pays: each is listed (``tests/score/test_reward.py`` checks that none is missing), so a new
status cannot fall through to a correct kernel's reward. ``none``: not the candidate's outcome (compiled only on a
machine that cannot run it; the harness or the machine failed; the harness's own side ran out of device memory
with the device to itself), left out of the sample. Every status a candidate can cause pays as a failure, an
incorrect output or a hack."""
_INCORRECT = {s for s, o in OUTCOME.items() if o == "incorrect"}
_FAILED = {s for s, o in OUTCOME.items() if o == "failure"}
_NOT_THE_CANDIDATES = {s for s, o in OUTCOME.items() if o == "none"}


@dataclass(frozen=True, slots=True)
class RewardConfig:
    """The user's choices for :func:`reward_of` (every field has a default; see the module table)."""

    hack: float = -1.0
    """Reward of a REWARD_HACK record."""
    failure: float = -0.5
    """Reward of a record that did not compile, raised, crashed, timed out or was not a valid candidate."""
    incorrect: float = 0.0
    """Reward of a record whose outputs were wrong (shape, dtype or numbers)."""
    correct: float = 0.5
    """Base reward of a correct record; timed records add ``speed_weight * speed``."""
    speed_weight: float = 1.0
    """Weight of the speed term (0: correctness only)."""
    speed: str = "sol"
    """Speed term: ``sol`` (speed-of-light score), ``u_roof`` or ``e_lib`` (see the module docstring)."""
    aggregate: str = "min"
    """How a candidate's workloads combine: ``min`` or ``mean``."""
    heldout_weight: float = 0.5
    """Share of a PASSED record's reward above ``incorrect`` that it loses when a held-out shape failed
    (``JobResult.heldout``): 0 ignores held-out shapes, 1 pays such a record what an incorrect one earns."""

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.type == "float" and not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)):
                raise ValueError(f"reward config: field '{f.name}' must be a finite number, got {v!r}")
        if self.speed not in SPEED_TERMS:
            raise ValueError(f"reward config: field 'speed' is {self.speed!r}; expected one of {SPEED_TERMS}")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"reward config: field 'aggregate' is {self.aggregate!r}; expected one of {AGGREGATES}")
        if not 0.0 <= self.heldout_weight <= 1.0:
            raise ValueError(f"reward config: field 'heldout_weight' is {self.heldout_weight}; it must be in [0, 1] "
                             "(0: held-out shapes ignored, 1: a record that fails them earns what an incorrect one does)")
        if self.speed_weight < 0:
            raise ValueError(f"reward config: field 'speed_weight' is {self.speed_weight}; it must be >= 0 "
                             "(a negative weight would reward slower kernels)")
        if not self.hack <= self.failure <= self.incorrect <= self.correct:
            raise ValueError(f"reward config: expected hack <= failure <= incorrect <= correct, got hack={self.hack}, "
                             f"failure={self.failure}, incorrect={self.incorrect}, correct={self.correct}; "
                             "otherwise a policy is paid more for a worse outcome")

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, d: dict | None) -> "RewardConfig":
        """The config from a JSON object (None: the defaults); unknown fields are refused by name."""
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError(f"reward config must be a JSON object with fields {[f.name for f in fields(cls)]}, "
                             f"got {type(d).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"reward config: unknown field(s) {unknown}; known: {sorted(known)}")
        return cls(**d)


@dataclass(frozen=True, slots=True)
class WorkloadReward:
    """The reward of one (candidate, workload) record and why."""

    workload: str
    status: str
    value: float | None
    """None: the record is not the candidate's outcome (LOWERED, HARNESS_ERROR, TOO_LARGE)."""
    speed: float | None
    """The speed term before weighting (None unless a timed, screened PASSED record)."""
    reason: str

    def to_dict(self) -> dict:
        return {"workload": self.workload, "status": self.status, "value": self.value, "speed": self.speed,
                "reason": self.reason}


@dataclass(frozen=True, slots=True)
class Reward:
    """A candidate's reward, the per-workload parts, and the mapping that produced it."""

    value: float | None
    """The aggregate; None when no record is the candidate's outcome (then train on nothing)."""
    version: str
    config: RewardConfig
    workloads: tuple[WorkloadReward, ...]
    reason: str

    def to_dict(self) -> dict:
        return {"value": self.value, "version": self.version, "config": self.config.to_dict(),
                "workloads": [w.to_dict() for w in self.workloads], "reason": self.reason}


def _num(x: object) -> float | None:
    """A float from a record field (JSON spells non-finite floats as strings)."""
    if x is None:
        return None
    v = float(x)  # type: ignore[arg-type]
    return v if math.isfinite(v) else None


def _speed(r: JobResult, term: str) -> tuple[float | None, str]:
    """(speed term, its explanation) of a PASSED record, or (None, why not) when it was not timed and screened."""
    s = r.screening
    tk = _num(r.timing.median_ms) if r.timing is not None else None
    tl = _num(r.library_timing.median_ms) if r.library_timing is not None else None
    if s is None or tk is None or tl is None or tk <= 0:
        return None, "correct, not timed (no timing or no measured ceilings)"
    tf = _num(s.t_floor_ms)
    if tf is None or tf <= 0:
        return None, "correct, no roofline floor for this workload"
    if term == "sol":
        v = sol_score(tk, tl, tf)
        return v, f"S={v:.3g} (t_kernel={tk:.4g} ms, t_library={tl:.4g} ms, t_floor={tf:.4g} ms)"
    if term == "u_roof":
        v = min(tf / tk, 1.0)
        return v, f"U_roof={tf / tk:.3g} (capped at 1)"
    e_lib, e_max = tl / tk, tl / tf
    v = min(e_lib, e_max)
    return v, f"E_lib={e_lib:.3g} (capped at the roofline's {e_max:.3g})"


def record_reward(r: JobResult, config: RewardConfig | None = None) -> WorkloadReward:
    """The reward of one record under ``config`` (default: :class:`RewardConfig`)."""
    c = config or RewardConfig()
    st = r.status
    why = r.error.message.splitlines()[0][:200] if r.error is not None and r.error.message else ""
    if st is Status.REWARD_HACK:
        return WorkloadReward(r.workload, st.value, c.hack, None, f"reward hack: {why}" if why else "reward hack")
    if st in _FAILED:
        return WorkloadReward(r.workload, st.value, c.failure, None, f"{st.value}: {why}" if why else st.value)
    if st in _INCORRECT:
        return WorkloadReward(r.workload, st.value, c.incorrect, None, f"{st.value}: {why}" if why else st.value)
    if st in _NOT_THE_CANDIDATES:
        what = {Status.LOWERED: "compiled to device source only, not executed",
                Status.TOO_LARGE: "too large for the harness on this device"}.get(st, "the harness failed")
        return WorkloadReward(r.workload, st.value, None, None, f"{st.value}: {what}; not the candidate's outcome")
    if OUTCOME[st] != "correct":
        raise ValueError(f"reward: status {st.value} has no outcome in OUTCOME")
    speed, text = _speed(r, c.speed)
    value = c.correct if speed is None else c.correct + c.speed_weight * speed
    text = text if speed is None else f"correct; {c.speed} term {text}"
    held = r.heldout
    if held is not None and held.generalizes is False and c.heldout_weight > 0:
        failed = next(s for s in held.shapes if s.status is not None and s.status != Status.PASSED.value)
        sizes = ", ".join(f"{k}={v}" for k, v in failed.sizes.items())
        value = c.incorrect + (1.0 - c.heldout_weight) * (value - c.incorrect)
        text += f"; {held.judged - held.passed}/{held.judged} held-out shape(s) failed ({sizes}: {failed.status})"
    return WorkloadReward(r.workload, st.value, value, speed, text)


def reward_of(records: Iterable[JobResult], config: RewardConfig | None = None) -> Reward:
    """The reward of one candidate from its records (one per workload), under ``config``.

    Records of several candidates must not be mixed (ValueError): the
    aggregate would mean nothing.
    """
    c = config or RewardConfig()
    recs = sorted(records, key=lambda r: r.workload)
    shas = {r.candidate_sha256 for r in recs}
    if len(shas) > 1:
        raise ValueError(f"reward_of: records of {len(shas)} different candidates given; pass one candidate's records")
    parts = tuple(record_reward(r, c) for r in recs)
    values = [p.value for p in parts if p.value is not None]
    if not values:
        why = "no records" if not parts else "no record is the candidate's outcome (" + \
              ", ".join(sorted({p.status for p in parts})) + ")"
        return Reward(None, REWARD_VERSION, c, parts, why)
    value = min(values) if c.aggregate == "min" else sum(values) / len(values)
    worst = min((p for p in parts if p.value is not None), key=lambda p: p.value)  # type: ignore[arg-type, return-value]
    reason = f"{c.aggregate} over {len(values)} workload(s); lowest: {worst.workload}: {worst.reason}"
    return Reward(value, REWARD_VERSION, c, parts, reason)


__all__ = ["REWARD_VERSION", "RewardConfig", "Reward", "WorkloadReward", "record_reward", "reward_of"]
