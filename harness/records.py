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
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from typing import Any

SCHEMA_VERSION = 1


class Status(str, enum.Enum):
    """Outcome of one (candidate, workload) evaluation.

    Only ``PASSED`` records carry timing and screening; ``LOWERED`` records
    (TileLang on a machine without a GPU) carry the lowered-source digest only.
    """

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

    @property
    def is_correct(self) -> bool:
        return self is Status.PASSED

    @property
    def is_failure(self) -> bool:
        return self not in (Status.PASSED, Status.LOWERED)


class Verdict(str, enum.Enum):
    """Screening verdict for a correct, timed candidate (see harness.score.gates)."""

    EFFICIENT = "efficient"
    AUTHORING_DEFECT = "authoring_defect"
    STRUCTURAL_RESIDUAL = "structural_residual"
    BEATS_WEAK_BASELINE = "beats_weak_baseline"
    BORDERLINE = "borderline"
    INCORRECT = "incorrect"
    FAILED = "failed"
    REWARD_HACK = "reward_hack"
    NOT_TIMED = "not_timed"


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

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict | None) -> "CorrectnessStats | None":
        if d is None:
            return None
        _check_keys(cls, d)
        return cls(**_floats(cls, d))


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


@dataclass(frozen=True, slots=True)
class JobResult:
    """One record per (candidate, workload): the unit of the results JSONL.

    Field presence by status: ``timing``/``library_timing``/``screening`` only
    when ``status`` is PASSED and the run timed; ``error`` only on failures;
    ``correctness`` whenever at least one round ran.
    """

    job_id: str
    """Canonical id: sha256 of (candidate content, problem id, workload, harness version)."""
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
    (sums over rounds, for overhead accounting): ``forward_s`` and ``handoff_s`` (the candidate's
    forward and the saving of its outputs, as the worker reports them: untrusted, never scored),
    ``check_s`` (the trusted checker's reply, of which ``reference_s`` computing the references;
    0 when another candidate of the run already computed them) and ``queue_s`` (waiting inside the
    phase: for a free checker process, or for the shared GPU again after an autotuning round)."""
    base_seed: int | None = None
    """The run's base seed. Random and secret by default (candidates only ever receive the seed of
    the round they are in, just before it); stored here so ``kernelgate run --seed`` can replay the run."""
    schema_version: int = SCHEMA_VERSION

    def to_dict(self) -> dict:
        return _dc_to_dict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "JobResult":
        _check_keys(cls, d)
        if d.get("schema_version", SCHEMA_VERSION) != SCHEMA_VERSION:
            raise ValueError(
                f"result schema_version {d.get('schema_version')} != {SCHEMA_VERSION}; "
                "re-run or convert the results file with this harness version"
            )
        d = dict(d)
        d["status"] = Status(d["status"])
        d["env"] = EnvSnapshot.from_dict(d["env"])
        d["error"] = ErrorInfo.from_dict(d.get("error"))
        d["correctness"] = CorrectnessStats.from_dict(d.get("correctness"))
        d["timing"] = TimingStats.from_dict(d.get("timing"))
        d["library_timing"] = TimingStats.from_dict(d.get("library_timing"))
        d["screening"] = Screening.from_dict(d.get("screening"))
        d["diagnostics"] = tuple(d.get("diagnostics", ()))
        d["warnings"] = tuple(d.get("warnings", ()))
        return cls(**d)

    def replace(self, **changes: Any) -> "JobResult":
        return dataclasses.replace(self, **changes)


__all__ = [
    "SCHEMA_VERSION",
    "Status",
    "Verdict",
    "ErrorInfo",
    "TimingStats",
    "CorrectnessStats",
    "Screening",
    "EnvSnapshot",
    "JobResult",
]
