"""Per-record metrics and the selection rules shared by the leaderboard, comparisons and reports.

Definitions (one (candidate, workload) record ``r``; times are medians in ms)::

    E_lib  = t_library / t_kernel            from the record's screening, else from its two timings
    U_roof = t_floor / t_kernel              from the screening only (needs measured ceilings)
    S      = 1 / (1 + (t_kernel - t_floor) / (t_library - t_floor)),  clamped to [0, 1]

``S`` is a *speed-of-light score*: 1 at the roofline floor, 0.5 at library
speed, towards 0 as the kernel slows down. It is defined for

* failures (every status but PASSED, LOWERED and HARNESS_ERROR, REWARD_HACK
  included even when it carries timings): ``S = 0``;
* PASSED records with kernel timing, library timing and a roofline floor: the
  formula above. When the library is at or below the measured floor
  (``t_library <= t_floor``, measurement noise near the roof) the formula's
  denominator is not positive and ``S = 0.5 * t_library / t_kernel`` (0.5 at
  library speed, same direction), clamped to [0, 1];
* nothing else: PASSED without timing (``--no-timing``, no ceilings), LOWERED
  (compiled only) and HARNESS_ERROR (not the candidate's fault) have ``S = None``.

Attempted records are those whose outcome is the candidate's: every status
except LOWERED (compiled to device source, never executed) and HARNESS_ERROR.

CPU path: records whose ``env.device_kind`` is ``"cpu"`` (Triton interpreter;
timed on the host clock only with ``run --timing``) are judged on correctness only. Their timings, and any screening an
older harness wrote into them, are ignored: E_lib, U_roof, S and the times are
None and a PASSED record's verdict bucket is ``cpu_path``
(:data:`CPU_PATH_NOTE`), so nothing ranks, plots or compares them by speed. An
interpreted kernel's time says nothing about the GPU kernel it stands for.

Results files are append-only, so one job may have several records (a
``--rerun``, merged files). :func:`latest_records` keeps the latest record per
:func:`entry_key` (largest ``created_at``; the later one in input order on a
tie). The key includes the generator and its version besides the ``job_id``:
an unchanged file submitted as ``gen@1`` and ``gen@2`` is two entries, never
one superseding the other, whatever the job id is made of.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from harness.records import JobResult, Status
from harness.results.store import EntryKey, entry_key
from harness.score.sol import sol_score

FAST_P = (0.0, 0.5, 0.8, 1.0, 1.5, 2.0)
"""The E_lib thresholds of the fast_p metrics."""

VERDICT_BUCKETS = (
    "efficient", "authoring_defect", "structural_residual", "beats_weak_baseline", "borderline",
    "not_timed", "cpu_path", "incorrect", "failed", "reward_hack", "lowered", "harness_error",
)
"""Every bucket :func:`verdict_of` can return, in display order."""

CPU_PATH_NOTE = "CPU path: correctness only, no performance verdict"
"""How every report names a PASSED record of the CPU path (bucket ``cpu_path``)."""

_INCORRECT = {Status.INCORRECT_SHAPE, Status.INCORRECT_DTYPE, Status.INCORRECT_NUMERICAL}
_NOT_ATTEMPTED = {Status.LOWERED, Status.HARNESS_ERROR}


def num(x: object) -> float | None:
    """A float from a record field; JSON spells non-finite floats ``"nan"``/``"inf"``/``"-inf"``."""
    return None if x is None else float(x)  # type: ignore[arg-type]


def finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def label(generator: str, version: str) -> str:
    """The ``generator@version`` spelling used everywhere in reports."""
    return f"{generator}@{version}"


def record_label(r: JobResult) -> str:
    return label(r.generator, r.generator_version)


def is_attempted(r: JobResult) -> bool:
    """True when the record's outcome is the candidate's (not LOWERED, not HARNESS_ERROR)."""
    return r.status not in _NOT_ATTEMPTED


def is_cpu_path(r: JobResult) -> bool:
    """True for a record of the CPU path (``env.device_kind == "cpu"``): correctness only, see the module docstring."""
    return r.env.device_kind == "cpu"


def _perf(r: JobResult) -> bool:
    """Whether the record's timings and screening may be used (not on the CPU path)."""
    return not is_cpu_path(r)


def latest_records(results: Iterable[JobResult]) -> tuple[list[JobResult], int]:
    """(latest record per :func:`entry_key`, in first-seen order of the keys; number of superseded records)."""
    best: dict[EntryKey, tuple[str, int, JobResult]] = {}
    order: dict[EntryKey, int] = {}
    n = 0
    for i, r in enumerate(results):
        n += 1
        key = entry_key(r)
        order.setdefault(key, i)
        cur = best.get(key)
        if cur is None or (r.created_at, i) >= (cur[0], cur[1]):
            best[key] = (r.created_at, i, r)
    kept = [best[k][2] for k in sorted(best, key=order.__getitem__)]
    return kept, n - len(kept)


def verdict_of(r: JobResult) -> str:
    """The verdict bucket of one record (one of :data:`VERDICT_BUCKETS`)."""
    if r.status is Status.PASSED:
        if is_cpu_path(r):
            return "cpu_path"
        return r.screening.verdict.value if r.screening is not None else "not_timed"
    if r.status is Status.LOWERED:
        return "lowered"
    if r.status is Status.REWARD_HACK:
        return "reward_hack"
    if r.status is Status.HARNESS_ERROR:
        return "harness_error"
    if r.status in _INCORRECT:
        return "incorrect"
    return "failed"


def screening_of(r: JobResult):
    """The record's screening, or None on the CPU path (where an older harness still wrote one)."""
    return r.screening if _perf(r) else None


def t_kernel_ms(r: JobResult) -> float | None:
    """Median kernel time in ms; None when untimed or on the CPU path."""
    return num(r.timing.median_ms) if r.timing is not None and _perf(r) else None


def t_library_ms(r: JobResult) -> float | None:
    """Median library time in ms (same session); None when untimed or on the CPU path."""
    return num(r.library_timing.median_ms) if r.library_timing is not None and _perf(r) else None


HOST_CLOCK_NOTE = ("host-clock times of the Triton interpreter on the CPU path (kernelgate run --timing): they show "
                   "the timing protocol ran, not how fast the kernel is on a GPU")
"""How every output labels the times of a CPU-path record (shown, never ranked, plotted or compared)."""


def host_times_ms(r: JobResult) -> tuple[float, float] | None:
    """(kernel, library) median ms of a CPU-path record that was timed (``--timing``); None otherwise.

    Shown wherever a record's times are shown, labelled with :data:`HOST_CLOCK_NOTE`; never used for E_lib,
    U_roof, S, a ranking, a chart or a comparison (see the module docstring).
    """
    if not is_cpu_path(r) or r.timing is None or r.library_timing is None:
        return None
    return num(r.timing.median_ms), num(r.library_timing.median_ms)  # type: ignore[return-value]


def shown_times_ms(r: JobResult) -> tuple[float | None, float | None]:
    """The (kernel, library) times a table shows for ``r``: the GPU medians, else the host-clock ones, else None."""
    host = host_times_ms(r)
    return host if host is not None else (t_kernel_ms(r), t_library_ms(r))


def t_floor_ms(r: JobResult) -> float | None:
    s = screening_of(r)
    return num(s.t_floor_ms) if s is not None else None


def e_lib_of(r: JobResult) -> float | None:
    """E_lib of a PASSED record (None otherwise, when not timed, or on the CPU path)."""
    if r.status is not Status.PASSED or not _perf(r):
        return None
    if r.screening is not None:
        return num(r.screening.e_lib)
    tk, tl = t_kernel_ms(r), t_library_ms(r)
    if tk is None or tl is None:
        return None
    return tl / tk if tk > 0 else math.inf


def u_roof_of(r: JobResult) -> float | None:
    s = screening_of(r)
    return num(s.u_roof) if r.status is Status.PASSED and s is not None else None


def u_roof_library_of(r: JobResult) -> float | None:
    s = screening_of(r)
    return num(s.u_roof_library) if s is not None else None


def score_of(r: JobResult) -> float | None:
    """S of one record: 0 for failures, the formula for scored passes, None when undefined."""
    if not is_attempted(r):
        return None
    if r.status is not Status.PASSED:
        return 0.0
    tk, tl, tf = t_kernel_ms(r), t_library_ms(r), t_floor_ms(r)
    if tk is None or tl is None or tf is None:
        return None
    return sol_score(tk, tl, tf)


def geomean(values: Iterable[float | None]) -> float | None:
    """Geometric mean of the finite positive values; None when there are none."""
    logs = [math.log(v) for v in values if finite(v) and v > 0]  # type: ignore[operator]
    return math.exp(sum(logs) / len(logs)) if logs else None


def mean(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


@dataclass(frozen=True, slots=True)
class ProblemOutcome:
    """How one candidate did on one problem, over the workloads it ran.

    ``correct``: at least one attempted workload and every attempted one PASSED.
    ``e_lib_min``: the smallest E_lib over its timed workloads (None if none
    timed): the candidate is only as fast as its slowest workload.
    ``fast(p)``: correct, and for p > 0 also timed with ``e_lib_min > p``; for
    p = 0 correctness alone (E_lib > 0 holds for any finite time).
    """

    candidate: str
    attempted: bool
    correct: bool
    e_lib_min: float | None
    mean_s: float | None
    n_workloads: int

    def fast(self, p: float) -> bool:
        if not self.correct:
            return False
        if p <= 0:
            return True
        return self.e_lib_min is not None and self.e_lib_min > p

    def sort_key(self) -> tuple:
        """Larger is better: correct first, then timed, then E_lib_min, then mean S."""
        e = self.e_lib_min if self.e_lib_min is not None else -math.inf
        s = self.mean_s if self.mean_s is not None else -math.inf
        return (self.attempted, self.correct, self.e_lib_min is not None, e, s)


def problem_outcome(candidate: str, records: list[JobResult]) -> ProblemOutcome:
    att = [r for r in records if is_attempted(r)]
    correct = bool(att) and all(r.status is Status.PASSED for r in att)
    es = [e for e in (e_lib_of(r) for r in att) if e is not None]
    return ProblemOutcome(
        candidate=candidate, attempted=bool(att), correct=correct, e_lib_min=min(es) if (correct and es) else None,
        mean_s=mean(score_of(r) for r in att), n_workloads=len(records),
    )


def best_candidate(records: list[JobResult]) -> ProblemOutcome | None:
    """The best candidate of one generator on one problem (:meth:`ProblemOutcome.sort_key`; ties: first name)."""
    by_cand: dict[str, list[JobResult]] = {}
    for r in records:
        by_cand.setdefault(r.candidate, []).append(r)
    outcomes = [problem_outcome(c, rs) for c, rs in sorted(by_cand.items())]
    if not outcomes:
        return None
    return max(outcomes, key=ProblemOutcome.sort_key)
