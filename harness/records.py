"""Typed records that cross a process or disk boundary.

Every record is a frozen, slotted dataclass with an explicit ``to_dict`` /
``from_dict`` pair, so what lands in a JSONL file is exactly what the code
declares and a file written by an older harness fails loudly instead of being
half-read. Conventions:

* units are part of field names (``latency_ms``, ``bytes``, ``flops``);
* ``None`` means "absent / not measured" (never ``-1``);
* raw samples are kept; rounding happens only when rendering;
* non-finite floats are encoded as the strings ``"nan"``, ``"inf"``, ``"-inf"``
  so they never silently become ``null`` (see :mod:`harness.jsonio`).

Size (about 530 lines): the on-disk schema is defined here, once (every record type that
crosses a process or disk boundary, its validation and its upgrade from schema 1).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

from harness.records_correctness import HeldoutResult, HeldoutShape, ProfileCheck, WorstElement

SCHEMA_VERSION = 2
"""2: trusted timing, kernel attribution, timed-call verification, evidence, secret workloads, sizes, mode."""


class Status(str, enum.Enum):
    """Outcome of one (candidate, workload) evaluation. Which fields a record may carry under each
    status is checked when the record is built (:meth:`JobResult.__post_init__`, :data:`FIELDS_BY_STATUS`)."""

    PASSED = "PASSED"
    LOWERED = "LOWERED"  # compiled to device source, not executable here
    INCORRECT_SHAPE = "INCORRECT_SHAPE"
    INCORRECT_DTYPE = "INCORRECT_DTYPE"
    INCORRECT_NUMERICAL = "INCORRECT_NUMERICAL"
    INVALID_CANDIDATE = "INVALID_CANDIDATE"  # no ModelNew, bad signature, unknown problem
    COMPILE_ERROR = "COMPILE_ERROR"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    CRASHED = "CRASHED"
    TIMEOUT = "TIMEOUT"
    REWARD_HACK = "REWARD_HACK"
    HARNESS_ERROR = "HARNESS_ERROR"  # the harness itself failed; not the candidate's fault
    TOO_LARGE = "TOO_LARGE"  # the harness's own side ran out of device memory with the device to itself; not the candidate's fault

    @property
    def is_harness_fault(self) -> bool:
        """The harness (or the machine) could not evaluate the candidate: never counted against it."""
        return self in (Status.HARNESS_ERROR, Status.TOO_LARGE)

    @property
    def is_correct(self) -> bool:
        return self is Status.PASSED

    @property
    def is_failure(self) -> bool:
        return self not in (Status.PASSED, Status.LOWERED)


class Verdict(str, enum.Enum):
    """Screening verdict for a correct candidate timed on a GPU (see harness.score.gates).

    The only verdict vocabulary: a record without screening (not timed, the
    CPU path, or a failure) has no verdict, and reports say why from its status.
    """

    EFFICIENT = "efficient"
    AUTHORING_DEFECT = "authoring_defect"
    STRUCTURAL_RESIDUAL = "structural_residual"
    BEATS_WEAK_BASELINE = "beats_weak_baseline"
    BORDERLINE = "borderline"
    REWARD_HACK = "reward_hack"


def _dc_to_dict(obj: Any) -> Any:
    if dataclasses.is_dataclass(obj):
        return {f.name: _dc_to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (list, tuple)):
        return [_dc_to_dict(v) for v in obj]
    if isinstance(obj, dict):
        return {k: _dc_to_dict(v) for k, v in obj.items()}
    return obj


_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _floats(cls: type, data: dict) -> dict:
    """Undo the JSON encoding of non-finite floats (see harness.jsonio) for float fields."""
    out = dict(data)
    for f in dataclasses.fields(cls):
        v = out.get(f.name)
        if "float" in str(f.type):
            if isinstance(v, str) and v in _NONFINITE:
                out[f.name] = _NONFINITE[v]
            elif isinstance(v, (list, tuple)):
                out[f.name] = tuple(_NONFINITE.get(x, x) if isinstance(x, str) else x for x in v)
    return out


def _check_keys(cls: type, data: dict) -> None:
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {sorted(unknown)}; known: {sorted(names)}")


@dataclass(frozen=True, slots=True)
class ErrorInfo:
    """An exception that crossed a process boundary, as text."""

    type: str
    """Exception class name, e.g. ``SyntaxError``."""
    message: str
    """``str(exc)``, capped at a few KB."""
    traceback_tail: str = ""
    """Last lines of the formatted traceback (never the whole thing)."""

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "ErrorInfo | None":
        if d is None:
            return None
        _check_keys(cls, d)
        return cls(**d)


@dataclass(frozen=True, slots=True)
class TimingStats:
    """Latency distribution of one timed callable.

    ``samples_ms`` holds every raw sample; the summary fields are derived from
    them and are only conveniences for readers of the JSON.
    """

    median_ms: float
    iqr_ms: float
    """Interquartile range (p75 - p25) of ``samples_ms``."""
    min_ms: float
    mean_ms: float
    samples_ms: tuple[float, ...]
    timer: str
    """``cuda_event`` (device events around a device-wide sync) or ``host_perf_counter``."""
    l2_flush: bool
    """True when a cache-flush buffer was written before every sample."""

    @property
    def relative_iqr(self) -> float:
        return self.iqr_ms / self.median_ms if self.median_ms > 0 else float("inf")

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "TimingStats | None":
        if d is None:
            return None
        _check_keys(cls, d)
        d = _floats(cls, d)
        d["samples_ms"] = tuple(float(x) for x in d["samples_ms"])
        return cls(**d)


@dataclass(frozen=True, slots=True)
class CorrectnessStats:
    """How close the candidate came to the reference over all rounds."""

    rounds_run: int
    rounds_passed: int
    max_abs_err: float | None
    """Largest |out - ref_fp64| seen over all rounds."""
    max_excess: float | None
    """Largest |out-ref| / (atol + rtol*|ref|); <= 1 means within tolerance."""
    atol: float
    rtol: float
    failed_round: int | None = None
    """Index of the first failing round, if any."""
    detail: str = ""
    """Human-readable reason for the first failure."""
    round_profiles: tuple[str, ...] = ()
    """The value profile of each round run, in order (harness.execute.shared.value_profiles)."""
    failed_profile: str | None = None
    """The value profile of the first failing round."""
    worst: WorstElement | None = None
    """The worst element of the first failing comparison."""
    profiles: tuple[ProfileCheck, ...] = ()
    """Every value profile's fairness verdict for this workload (the fair ones are drawn from)."""

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "CorrectnessStats | None":
        if d is None:
            return None
        _check_keys(cls, d)
        d = _floats(cls, d)
        d["round_profiles"] = tuple(d.get("round_profiles", ()))
        d["worst"] = WorstElement.from_dict(d.get("worst"))
        d["profiles"] = tuple(ProfileCheck.from_dict(x) for x in d.get("profiles", ()))
        return cls(**d)


@dataclass(frozen=True, slots=True)
class Screening:
    """The two cheap checks plus the verdict they imply (harness.score.gates)."""

    e_lib: float
    """Library-relative efficiency, t_library / t_kernel (>1 = faster than the library)."""
    u_roof: float
    """Roofline utilization of the kernel, t_floor / t_kernel (<= 1 unless cheating)."""
    u_roof_library: float
    """Roofline utilization of the library baseline."""
    t_floor_ms: float
    bound: str
    """``memory`` or ``compute``: which term of the roofline floor is larger."""
    ceiling_name: str
    """Which measured ceiling the compute term used, e.g. ``tensor_fp16``."""
    verdict: Verdict
    borderline: bool
    """True when a gate decision is within measurement noise of its threshold."""
    tau_lib: float
    tau_roof: float
    reason: str

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Screening | None":
        if d is None:
            return None
        _check_keys(cls, d)
        d = _floats(cls, d)
        d["verdict"] = Verdict(d["verdict"])
        return cls(**d)


@dataclass(frozen=True, slots=True)
class TrustedTiming:
    """The parent's own clock over batches of back-to-back calls (harness.score.clock).

    Each batch runs the forward ``calls_per_batch`` times on fresh inputs made
    beforehand; the parent times it from its request to the reply, minus an
    empty request's round trip. The candidate can only make its own batch
    slower, never faster.
    """

    calls_per_batch: int
    kernel_ms_per_call: float
    """(Shortest candidate batch - shortest round trip) / calls: the candidate's trusted time per call."""
    library_ms_per_call: float
    """The same for the library, timed in the trusted checker."""
    round_trip_ms: float
    """Median round trip of an empty request to the worker (subtracted from each of its batches)."""
    kernel_batch_ms: tuple[float, ...]
    library_batch_ms: tuple[float, ...]
    round_trip_batch_ms: tuple[float, ...]
    library_round_trip_batch_ms: tuple[float, ...]
    """The checker's empty-request round trips (subtracted from the library's batches)."""
    source: str
    """Which times the screening used: ``cuda_event`` (the events agreed with this clock) or ``trusted_batch``
    (host-bound: both sides were scored on this clock)."""
    note: str = ""

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "TrustedTiming | None":
        if d is None:
            return None
        _check_keys(cls, d)
        d = _floats(cls, d)
        for k in ("kernel_batch_ms", "library_batch_ms", "round_trip_batch_ms", "library_round_trip_batch_ms"):
            d[k] = tuple(float(x) for x in d[k])
        return cls(**d)


@dataclass(frozen=True, slots=True)
class KernelShare:
    """One kernel name's share of a forward's GPU time."""

    name: str
    kind: str
    """``dsl`` (a Triton/TileLang kernel of the candidate), ``library`` (a kernel of the library op, learned by
    profiling the reference), ``partials`` (the library op's kernels finishing the candidate's partial results,
    :func:`harness.score.attribution.finishes_partials`), ``vendor`` (cuBLAS/cuDNN/CUTLASS), ``copy`` (copies,
    casts, fills), ``aten`` (other PyTorch kernels), ``inductor`` (torch.compile-generated) or ``other``."""
    us_per_call: float
    share: float


@dataclass(frozen=True, slots=True)
class KernelAttribution:
    """Where the forward's GPU time went (harness.score.attribution)."""

    method: str
    """``profiler`` (CUPTI kernel records, reported by the worker: a claim cross-checked by the trusted side's
    fingerprint and clock), or ``launch-counter`` where no profiler ran (the CPU path)."""
    dsl_share: float | None
    """Share of the forward's GPU time, less data movement (``copy`` kernels), in the candidate's own
    Triton/TileLang kernels (None: launch counter)."""
    kernels: tuple[KernelShare, ...] = ()
    side_us: float | None = None
    """GPU microseconds of the profiled calls' kernels and copies on streams other than the timed one (work that
    can outlive the timed stream's end event); None where no profiler ran."""

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "KernelAttribution | None":
        if d is None:
            return None
        _check_keys(cls, d)
        d = dict(d)
        d["kernels"] = tuple(KernelShare(**k) for k in d.get("kernels", ()))
        return cls(**d)


@dataclass(frozen=True, slots=True)
class Verification:
    """Timed calls whose outputs the trusted checker verified, at positions the candidate could not know."""

    timed_calls: int
    checked_calls: int
    """Verified against the library's output on the same inputs (samples and batch calls)."""
    mismatches: int

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "Verification | None":
        if d is None:
            return None
        _check_keys(cls, d)
        return cls(**d)


@dataclass(frozen=True, slots=True)
class EnvSnapshot:
    """Where a result was produced. Two results are comparable only if these match."""

    device_kind: str
    """``cuda`` or ``cpu``."""
    device_name: str
    device_uuid: str | None
    driver: str | None
    python: str
    torch: str
    triton: str | None
    tilelang: str | None
    harness: str
    sandbox: str = "none"
    """OS-level sandbox in force for candidates (e.g. ``rlimits``)."""
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None

    def comparable_key(self) -> tuple:
        return (self.device_kind, self.device_name, self.driver, self.torch, self.triton, self.tilelang)

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "EnvSnapshot | None":
        if d is None:
            return None
        _check_keys(cls, d)
        return cls(**d)


_MEASURED = ("timing", "library_timing", "screening", "trusted_timing", "kernels", "verification")
FIELDS_BY_STATUS: dict[str, tuple[set[str], set[str]]] = {
    # status: (fields that must be present, fields that must be absent)
    "PASSED": (set(), {"error", "evidence"}),
    "LOWERED": (set(), {"error", "evidence", *_MEASURED}),
    "REWARD_HACK": ({"error"}, set()),
    "HARNESS_ERROR": ({"error"}, {"evidence", *_MEASURED}),
    "TOO_LARGE": ({"error"}, {"evidence", *_MEASURED}),
}
"""Which fields a record carries under which status; every other failure status is like
``INCORRECT_*``: an error, no measurements, no evidence. A REWARD_HACK keeps what it was
caught with (its timing, its kernel table) and says why in ``error`` and ``evidence``."""
_FAILURE_RULE = ({"error"}, {"evidence", *_MEASURED})


@dataclass(frozen=True, slots=True)
class JobResult:
    """One record per (candidate, workload): the unit of the results JSONL.

    Field presence by status is :data:`FIELDS_BY_STATUS`, checked on construction;
    ``screening`` also needs ``timing`` and ``library_timing``, which come together.
    """

    job_id: str
    """Canonical id (harness.results.ids): sha256 of the candidate's bytes, its generator and version, the
    problem and its version, the workload and its sizes, mode, baseline, environment and harness version."""
    run_id: str
    candidate: str
    """Candidate file path relative to its submission folder."""
    candidate_sha256: str
    generator: str
    generator_version: str
    problem_id: str
    category: str
    workload: str
    dtype: str
    dsl: str
    """``triton``, ``tilelang``, ``torch`` (plain PyTorch) or ``unknown``."""
    status: Status
    flops: int
    min_bytes: int
    env: EnvSnapshot
    created_at: str
    """UTC ISO-8601 timestamp of the record."""
    error: ErrorInfo | None = None
    correctness: CorrectnessStats | None = None
    timing: TimingStats | None = None
    library_timing: TimingStats | None = None
    screening: Screening | None = None
    diagnostics: tuple[dict, ...] = ()
    """Static defect findings (harness.diagnose): {rule, line, message, hint}."""
    warnings: tuple[str, ...] = ()
    problem_version: str = ""
    """Hash of the problem file, copied so a result always names what it was scored against."""
    allow_tf32: bool = False
    """Whether TF32 was permitted (for candidate and library alike) in this workload."""
    phase_s: dict | None = None
    """Wall seconds per phase as the parent saw them: ``startup_s`` (interpreter, torch, guards),
    ``import_s`` (the candidate module), ``build_s`` (models, dry precompile), ``wait_s`` (for a
    correctness slot on the device), ``correctness_s``, ``timing_wait_s`` (for the device to itself),
    ``timing_s``; the first two are shared by a candidate's workloads. Parts of ``correctness_s``
    (sums over rounds, for overhead accounting): ``forward_s`` (the candidate's forward, as the worker reports
    it: untrusted, never scored),
    ``autotune_s`` (the first round, when the dry compile reached an autotuner: the GPU held alone for it),
    ``check_s`` (the trusted checker's reply, of which ``reference_s`` computing the references,
    0 when another candidate of the run already computed them, and ``compare_s`` reading the outputs, checking
    the inputs and comparing, as the checker timed them; the rest is the round trip) and ``queue_s`` (waiting inside the
    phase: for a free checker process, or for the shared GPU again after an autotuning round). Parts of
    ``timing_s``: ``samples_s`` (the alternating timed calls, of which ``verify_s`` verifying a secret share
    of them), ``kernels_s`` (the profiler's table and the library's kernels), ``batches_s`` (the parent's
    clock). Beside the scored sample set (diagnostics, the parent's clock): ``beside_build_s`` and
    ``beside_exit_s``, seconds of other workers building or exiting on the GPU during it, outside the gate
    (:mod:`harness.execute.parent.activity`). ``fairness_s``: asking the checker which value profiles are fair (a
    probe the first time, then its cache); ``heldout_s``: the workload's held-out shapes (their builds, probes and
    rounds). ``freeze_s`` (shared by the workloads): stopping the worker's whole process tree for the checker's
    reads of what it committed, and letting it run again (:mod:`harness.execute.parent.freeze`)."""
    base_seed: int | None = None
    """The run's base seed. Random and secret by default (candidates only ever receive the seed of
    the call they are in, just before it); stored here so ``kernelgate run --seed`` can replay the run."""
    params: dict | None = None
    """The problem's size constants this workload ran with (after ``--set``)."""
    secret: bool = False
    """A secret workload: shapes derived per run from the secret seed or a private file, never public."""
    mode: str = "eval"
    """``eval`` or ``train``: the mode Model and ModelNew ran in."""
    baseline: str = "eager"
    """The library baseline: ``eager`` (the problem's Model) or ``compile`` (torch.compile of it)."""
    trusted_timing: TrustedTiming | None = None
    kernels: KernelAttribution | None = None
    verification: Verification | None = None
    evidence: dict | None = None
    """REWARD_HACK only: the facts it was decided on (numbers, the mechanism), for an audit."""
    attempts: int = 1
    """2 when the first attempt failed for a reason the candidate may not have caused (an out-of-memory or a
    dead worker while sharing the GPU) and the candidate was run again alone; the record is the second's."""
    client: str | None = None
    """The authenticated client of ``kernelgate serve`` that submitted the candidate (its tokens-file name; the
    service sets it, a client cannot); None for records of ``kernelgate run`` and the Python API."""
    heldout: HeldoutResult | None = None
    """Correctness at held-out shapes of this workload (harness.problems.heldout), run only when the workload
    itself PASSED (or failed because of them: ``heldout.gated``); None when none was run."""
    schema_version: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        must, must_not = FIELDS_BY_STATUS.get(self.status.value, _FAILURE_RULE)
        missing = [f for f in sorted(must) if getattr(self, f) is None]
        present = [f for f in sorted(must_not) if getattr(self, f) is not None]
        if missing or present:
            raise ValueError(f"JobResult({self.candidate}, {self.workload}) with status {self.status.value}: "
                             + (f"needs {missing}" if missing else "") + (" and " if missing and present else "")
                             + (f"must not carry {present}" if present else ""))
        if (self.timing is None) != (self.library_timing is None):
            raise ValueError(f"JobResult({self.candidate}, {self.workload}): timing and library_timing come together")
        if self.screening is not None and self.timing is None:
            raise ValueError(f"JobResult({self.candidate}, {self.workload}): screening without timing")

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "JobResult":
        version = d.get("schema_version", SCHEMA_VERSION)
        if version == 1:
            d = _upgrade_v1(d)
        elif version != SCHEMA_VERSION:
            raise ValueError(
                f"result schema_version {version} != {SCHEMA_VERSION}; "
                "re-run or convert the results file with this harness version"
            )
        _check_keys(cls, d)
        d = dict(d)
        d["status"] = Status(d["status"])
        d["env"] = EnvSnapshot.from_dict(d["env"])
        d["error"] = ErrorInfo.from_dict(d.get("error"))
        d["correctness"] = CorrectnessStats.from_dict(d.get("correctness"))
        d["timing"] = TimingStats.from_dict(d.get("timing"))
        d["library_timing"] = TimingStats.from_dict(d.get("library_timing"))
        d["screening"] = Screening.from_dict(d.get("screening"))
        d["trusted_timing"] = TrustedTiming.from_dict(d.get("trusted_timing"))
        d["kernels"] = KernelAttribution.from_dict(d.get("kernels"))
        d["verification"] = Verification.from_dict(d.get("verification"))
        d["heldout"] = HeldoutResult.from_dict(d.get("heldout"))
        d["diagnostics"] = tuple(d.get("diagnostics", ()))
        d["warnings"] = tuple(d.get("warnings", ()))
        return cls(**d)

    def replace(self, **changes: Any) -> "JobResult":
        return dataclasses.replace(self, **changes)


_V1_VERDICTS = {"incorrect", "failed", "not_timed"}


def _upgrade_v1(d: dict) -> dict:
    """A schema-1 record (before trusted timing) as schema 2: same facts, no new measurements.

    Schema 1 let a below-floor REWARD_HACK carry timing (still allowed) and had
    three verdict strings that were never produced (dropped with the screening
    that would hold them).
    """
    d = dict(d)
    d["schema_version"] = SCHEMA_VERSION
    s = d.get("screening")
    if isinstance(s, dict) and s.get("verdict") in _V1_VERDICTS:
        d["screening"] = None
    return d


__all__ = [
    "SCHEMA_VERSION",
    "Status",
    "Verdict",
    "ErrorInfo",
    "TimingStats",
    "CorrectnessStats",
    "WorstElement",
    "ProfileCheck",
    "HeldoutShape",
    "HeldoutResult",
    "Screening",
    "EnvSnapshot",
    "TrustedTiming",
    "KernelShare",
    "KernelAttribution",
    "Verification",
    "JobResult",
    "FIELDS_BY_STATUS",
]
