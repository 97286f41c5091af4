"""The parent's conversation with the trusted checker: one request, one reply (:data:`REPLY_FOR`). Part of the
protocol (:mod:`harness.execute.wire.protocol`, which also names every message here): references and comparisons,
the library's samples and batches, verification of committed outputs, the library's kernels, fairness probes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from harness.execute.wire.codec import message
from harness.execute.wire.parts import Committed, KernelRow

@dataclass(frozen=True, slots=True)
class Context:
    """One workload as the checker rebuilds it: problem file, constants, dtype, weights, mode, baseline."""

    problem_path: str
    params: dict
    dtype: str
    device: str
    model_seed: int
    input_transform: str
    allow_tf32: bool
    mode: str = "eval"
    baseline: str = "eager"
    """``eager`` (the problem's Model as written) or ``compile`` (``torch.compile(Model)``)."""
    sums: bool = False
    """An output of the problem's Model is a linear function of sums: its references carry the sums' error scales
    (:func:`harness.execute.checker.terms.has_sums`, decided by the parent on meta tensors)."""

    @property
    def key(self) -> str:
        return json.dumps([self.problem_path, self.params, self.dtype, self.device, self.model_seed,
                           self.input_transform, self.allow_tf32, self.mode, self.baseline], sort_keys=True)


@message("compare")
class Compare:
    """Correctness: the float64 reference and the library's output for (seed, transform) against the candidate's."""

    ctx: Context
    seed: int
    transform: int
    atol: float
    rtol: float
    reduction_length: int | None
    in_place: bool
    outputs: Committed = field(default_factory=Committed)
    """The candidate's outputs as its worker committed them (read while the worker is stopped)."""
    inputs: Committed | None = None
    """Its inputs after the forward, when committed."""
    handoff_dir: str = ""
    """The worker's hand-off folder: a committed file must lie directly in it."""


@message("compare_reply")
class CompareReply:
    ok: bool
    status: str
    detail: str
    max_abs_err: float | None = None
    max_excess: float | None = None
    library_max_excess: float | None = None
    identical_fraction: float | None = None
    """Share of output elements bit-identical to the library's output (floating outputs)."""
    library_rounding_fraction: float | None = None
    """Share of elements where the library's output differs from the float64 reference rounded to the dtype."""
    ref_s: float = 0.0
    check_s: float = 0.0
    changed_while_read: bool = False
    """As :attr:`VerifyReply.changed_while_read`."""
    busy_at_read: bool = False
    """As :attr:`VerifyReply.busy_at_read`."""
    worst: Worst | None = None
    """A numerical failure's worst element (:func:`harness.score.correctness.worst_element`)."""


@message("lib_sample")
class LibSample:
    """Time the library once, with the worker's protocol, on the checker's own inputs for (seed, transform)."""

    ctx: Context
    seed: int
    transform: int
    hold_us: float
    keep_id: int | None = None
    """Keep this call's output under this id for a later Verify."""


@dataclass(frozen=True, slots=True)
class LibCall:
    """One call of :class:`LibSamples`."""

    seed: int
    transform: int
    keep_id: int | None = None


@message("lib_samples")
class LibSamples:
    """Time the library on several calls one after another, each exactly as a :class:`LibSample`."""

    ctx: Context
    calls: tuple[LibCall, ...]
    hold_us: float


@message("lib_sample_reply")
class LibSampleReply:
    stream_ms: float
    device_ms: float
    enqueue_us: float
    idle_ms: float = 0.0
    prep_us: float = 0.0
    """As :attr:`CallReport.prep_us`, on the library's side."""
    wall_us: float = 0.0


@message("lib_samples_reply")
class LibSamplesReply:
    samples: tuple[LibSampleReply, ...]


@message("verify")
class Verify:
    """Compare a timed call's handed-off output with the library output kept under ``keep_id``."""

    keep_id: int
    atol: float
    rtol: float
    reduction_length: int | None
    tolerance_factor: float
    """Multiplies the correctness tolerance: the candidate and the library are each within it of the float64
    reference, so their difference may be up to about twice it."""
    in_place: bool
    outputs: Committed = field(default_factory=Committed)
    """The candidate's outputs as its worker committed them (read while the worker is stopped)."""
    inputs: Committed | None = None
    """Its inputs after the forward, when committed."""
    handoff_dir: str = ""
    """The worker's hand-off folder: a committed file must lie directly in it."""


@message("verify_reply")
class VerifyReply:
    ok: bool
    status: str
    detail: str
    max_excess: float | None = None
    changed_while_read: bool = False
    """The output's bytes differed between two reads with the worker stopped: work of the worker (a GPU kernel)
    was still writing it."""
    busy_at_read: bool = False
    """The GPU was still busy (another context's kernel held it) when the read started
    (:mod:`harness.execute.checker.gpu_idle`): a fact, not a verdict (a neighbour's work does that too)."""


@message("lib_batch")
class LibBatch:
    """Make the inputs of a batch for the library (untimed), like a worker's Batch; keep outputs at ``keep``."""

    ctx: Context
    seeds: tuple[int, ...]
    transforms: tuple[int, ...]
    keep: dict = field(default_factory=dict)
    """Position in the batch (as a string) -> keep id."""


@message("run_lib_batch")
class RunLibBatch:
    """Run the library on the prepared batch back to back, synchronize; the parent times request -> reply.
    ``empty`` times the round trip alone."""

    empty: bool = False


@message("batch_reply")
class BatchReply:
    calls: int


@message("lib_kernels")
class LibKernels:
    """Profile the library's forward: which kernels the library op is made of on this device."""

    ctx: Context


@message("lib_kernels_reply")
class LibKernelsReply:
    profiler: str
    rows: tuple[KernelRow, ...]


@message("drop")
class Drop:
    """Forget these kept library outputs, and a prepared batch that will not be run."""

    keep_ids: tuple[int, ...]


@message("ping")
class Ping:
    pass


@message("ok_reply")
class OkReply:
    pass


@message("error_reply")
class ErrorReply:
    """The checker could not serve a request: the harness's failure (HARNESS_ERROR), or an out-of-memory."""

    status: str
    detail: str
    traceback_tail: str = ""
    out_of_memory: bool = False


@dataclass(frozen=True, slots=True)
class Worst:
    """The element of a failed comparison farthest outside its tolerance (:class:`harness.records.WorstElement`)."""

    output: int
    index: tuple[int, ...]
    got: float
    expected: float
    allowed: float | None = None


@dataclass(frozen=True, slots=True)
class ProfileVerdict:
    """One value profile's fairness for a workload (:class:`harness.execute.checker.fairness.Fairness`)."""

    profile: int
    name: str
    fair: bool
    reason: str
    library_excess: float | None = None


@message("fairness_probe")
class FairnessProbe:
    """Which value profiles are fair for this workload at this tolerance: probed once, then from the cache
    (:mod:`harness.execute.checker.fairness`)."""

    ctx: Context
    atol: float
    rtol: float
    reduction_length: int | None
    cache_dir: str | None = None
    """Where the verdicts are cached (the parent's ``$KERNELGATE_CACHE/fairness``, outside the checker's scratch,
    which ends with the run); None: not cached."""
    profiles: tuple[int, ...] = ()
    """Probe only these (a held-out shape's rounds); empty: every profile the problem's annotation allows."""


@message("fairness_reply")
class FairnessReply:
    verdicts: tuple[ProfileVerdict, ...]
    cached: bool = False
    probe_s: float = 0.0


CHECKER_REQUESTS = (Compare, LibSample, LibSamples, Verify, LibBatch, RunLibBatch, LibKernels, Drop, Ping,
                    FairnessProbe)
CHECKER_REPLIES = (CompareReply, LibSampleReply, VerifyReply, BatchReply, LibKernelsReply, OkReply, ErrorReply,
                   FairnessReply)
REPLY_FOR: dict[type, tuple[type, ...]] = {
    Compare: (CompareReply, ErrorReply), LibSample: (LibSampleReply, ErrorReply),
    LibSamples: (LibSamplesReply, ErrorReply), Verify: (VerifyReply, ErrorReply),
    LibBatch: (BatchReply, ErrorReply), RunLibBatch: (BatchReply, ErrorReply), LibKernels: (LibKernelsReply, ErrorReply),
    Drop: (OkReply, ErrorReply), Ping: (OkReply, ErrorReply), FairnessProbe: (FairnessReply, ErrorReply),
}
