"""The messages between the parent, the candidate worker and the trusted checker: the only definition.

Three processes talk (see docs/security.md)::

    parent (trusted, no CUDA)  <-- JSON lines (harness.execute.wire.channel) -->  worker (untrusted: the candidate)
    parent                     <-- JSON lines on stdin/stdout -->                  checker (trusted: references, library)

Every message is a frozen dataclass registered with :func:`harness.execute.wire.codec.message`; what a worker
sends is decoded with the codec's strictness (unknown kinds or fields, wrong types, oversized values are protocol
violations: an honest worker only sends what :func:`encode` writes). Everything a worker says is a claim.

Conversation with a worker (one candidate, its workloads in order)::

    worker -> parent   GPU_WANT_LINE         pre-started workers told gpu_gate, raw: before its CUDA context
    parent -> worker   GPU_GO                one byte, sent while the pool holds a background place in the device gate
    worker -> parent   warm line             pre-started workers only, raw, before the Spec: warm
    parent -> worker   Spec                  first line
    worker -> parent   Ready                 its confinement, audit hooks and profiler in place
    worker -> parent   Imported | Fatal
    for each workload:
      worker -> parent WantDevice | WorkloadFatal     models built, kernels compiled (dry)
      parent -> worker Go
      repeated, in any order the parent chooses:
        parent -> worker Call          -> CallReport      one forward on fresh inputs from (seed, transform)
        parent -> worker CallBlock     -> CallReport x n  n such calls, one message (the timing phase's)
        parent -> worker Batch         -> BatchReady      make the inputs of a batch (the candidate's code does not run)
        parent -> worker RunBatch      -> BatchReport     back-to-back forwards on them, timed by the parent's clock
        parent -> worker Release                           drop kept outputs (no reply)
        parent -> worker Kernels       -> KernelReport    the profiler's kernel table since the last one
      parent -> worker EndWorkload     -> WorkloadDone
    parent -> worker   Finish          -> Done

Commit before reveal: every CallReport and BatchReport *commits* the outputs of its calls (:class:`Committed`:
where the checker can read them, a file in the worker's hand-off folder or CUDA IPC handles), before the parent
decides which of them to verify; the parent then stops the worker's whole process tree, has the checker read
the chosen ones, and lets it run again. No message ever tells the worker which calls were verified, and nothing
of the worker runs while its outputs are read.

Conversation with a checker: one request, one reply (:data:`REPLY_FOR`), defined in
:mod:`harness.execute.wire.checker_messages` and named here too, so ``protocol.X`` is every message; the records
both conversations share are in :mod:`harness.execute.wire.parts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

WARM_PREFIX = b"kernelgate-worker-warm "
"""A pre-started worker's one raw line starts so, once it is warm (sandboxed, torch and the profiler loaded,
CUDA context made) and before any candidate exists; the pool hands out only workers that wrote it. The rest of
the line is a JSON object: seconds per warm-up step (diagnostics, ``warm_*`` in a record's ``phase_s``)."""
WARM_LINE_MAX = 1024
GPU_WANT_LINE = b"kernelgate-worker-wants-gpu\n"
"""A pre-started worker told ``gpu_gate`` writes this raw line before it creates its CUDA context and profiler,
then waits for :data:`GPU_GO` on its input: the pool lets it go while it holds a background place in the device gate,
so no context is created while a workload is timed (:mod:`harness.execute.parent.pool`)."""
GPU_GO = b"g"


def warm_line(laps: dict[str, float]) -> bytes:
    """The warm line for ``laps`` (step name -> seconds)."""
    return WARM_PREFIX + json.dumps({str(k)[:40]: float(v) for k, v in list(laps.items())[:16]}).encode() + b"\n"


def parse_warm_line(line: bytes) -> dict[str, float] | None:
    """The laps of a warm line, or None when ``line`` is not one."""
    if not line.startswith(WARM_PREFIX) or not line.endswith(b"\n") or len(line) > WARM_LINE_MAX:
        return None
    try:
        laps = json.loads(line[len(WARM_PREFIX):])
    except ValueError:
        return None
    if not isinstance(laps, dict):
        return None
    return {str(k): float(v) for k, v in laps.items() if isinstance(v, (int, float)) and 0 <= v < 1e5}
from harness.execute.wire.codec import (MAX_LIST, MAX_SOURCES_CHARS, MAX_TEXT, VERSION, ProtocolError, decode,  # noqa: F401
                                       encode, message)


from harness.execute.wire.parts import Error, WorkloadSpec, KernelRow, Committed

# --------------------------------------------------------------------------- parent -> worker

@message("spec")
class Spec:
    """The job: sent once, first."""

    candidate_path: str
    problem_path: str
    device: str
    handoff_dir: str
    dsl: str
    timing: dict
    precompile: bool
    isolation: str
    """The confinement level the worker was started with (:data:`harness.execute.boundary.enter.LEVELS`)."""
    max_file_bytes: int
    gpu_memory_fraction: float
    handoff: str
    mode: str
    """``eval`` or ``train``: the mode ModelNew (and, in the checker, Model) runs in."""
    in_place: bool
    input_transform: str
    workloads: tuple[WorkloadSpec, ...]
    library_aten: tuple[str, ...] = ()
    """CPU path only: aten ops that embody the library op (the dispatch recorder's list)."""
    cpu_threads: int = 1


@message("go")
class Go:
    """The workload may use the device now (shared for correctness, or alone for its first autotuning round)."""

    workload: str


@message("call")
class Call:
    """Run one forward on fresh inputs made from ``seed`` with round transform ``transform``; keep its outputs."""

    call_id: int
    seed: int
    transform: int
    hold_us: float
    """How long the GPU sleep before the start event holds the launch queue (the parent gives both sides the same)."""
    release: tuple[int, ...] = ()
    """Kept calls to drop before this one."""
    poison: bool = True
    """Fill the allocator's free memory with NaN first (correctness rounds). Timed calls skip it on both sides:
    their inputs are fresh per call, so an output a kernel never wrote holds another call's values, which the
    verification fails all the same, and the fill would cost a pass over twice the inputs per call."""
    commit_inputs: bool = False
    """Also commit the call's inputs as the forward left them (correctness rounds: an input the forward changed)."""


@dataclass(frozen=True, slots=True)
class CallSpec:
    """One call of a :class:`CallBlock`."""

    call_id: int
    seed: int
    transform: int


@message("call_block")
class CallBlock:
    """Run these calls one after another, each exactly as a :class:`Call` (fresh inputs, flush, hold, events)
    with one CallReport each, keeping every call's outputs; stop after a report that is not ok. The timing
    phase's calls travel in blocks of a few: one round trip per block, not per call."""

    calls: tuple[CallSpec, ...]
    hold_us: float
    release: tuple[int, ...] = ()
    """Kept calls to drop before the first."""
    poison: bool = False


@message("batch")
class Batch:
    """Make the inputs of a batch, one set per (seed, transform), in the worker's own thread; reply BatchReady.

    The candidate's code does not run while they are made: it first sees them in :class:`RunBatch`.
    """

    call_ids: tuple[int, ...]
    seeds: tuple[int, ...]
    transforms: tuple[int, ...]


@message("run_batch")
class RunBatch:
    """Run the forward on each prepared input set back to back (no flush, hold or events), keep each output,
    synchronize, reply BatchReport. The parent times this request -> reply; ``call_ids`` empty times the
    round trip alone."""

    call_ids: tuple[int, ...]


@message("release")
class Release:
    call_ids: tuple[int, ...]


@message("kernels")
class Kernels:
    """Report the kernels the profiler saw since the last Kernels (or since Go), and start a new window."""


@message("end_workload")
class EndWorkload:
    workload: str


@message("finish")
class Finish:
    pass


# --------------------------------------------------------------------------- worker -> parent (untrusted)

@message("ready")
class Ready:
    sandbox: str
    """:meth:`harness.execute.boundary.enter.Confinement.describe` of what the worker applied to itself."""
    confinement: dict
    """:meth:`harness.execute.boundary.enter.Confinement.to_dict` (sent before any candidate code ran)."""
    audit: str
    profiler: str
    """``cupti`` when a kernel profiler runs, else why not (``unavailable: ...``, ``cpu``)."""
    channel_fds: tuple[int, ...] = ()
    """The worker's descriptors of its channel (commands read, reports written), before any candidate code ran:
    the parent checks at each freeze that they are still its pipes and the only ones on them."""


@message("imported")
class Imported:
    audit_blocked: tuple[str, ...] = ()
    patched: tuple[str, ...] = ()


@message("fatal")
class Fatal:
    status: str
    error: Error
    audit_blocked: tuple[str, ...] = ()


@message("workload_fatal")
class WorkloadFatal:
    workload: str
    status: str
    error: Error


@message("want_device")
class WantDevice:
    workload: str
    exclusive_first_round: bool


@message("call_report")
class CallReport:
    """What one Call did, as the worker saw it. Everything here is a claim; the parent verifies what it scores."""

    call_id: int
    ok: bool
    error: Error | None = None
    cuda_error: bool = False
    out_of_memory: bool = False
    stream_ms: float = 0.0
    device_ms: float = 0.0
    enqueue_us: float = 0.0
    """Host time from handing the forward to the candidate's thread until it returned."""
    idle_ms: float = 0.0
    """The host's round trip to the idle GPU right after the call (:attr:`harness.measure.timing.Timed.idle_ms`)."""
    launches: int = 0
    triton_launches: int = 0
    """Of ``launches``, Triton's (a forward that lowered a TileLang kernel may have run Triton ones first)."""
    dsl_names: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    aten_elements: dict = field(default_factory=dict)
    """CPU path: input elements each recorded aten op was dispatched on, summed over the forward."""
    input_elements: int = 0
    """Elements of the call's tensor inputs."""
    new_threads: int = 0
    output_types: tuple[str, ...] = ()
    lowered_sources: tuple[str, ...] | None = None
    audit_blocked: tuple[str, ...] = ()
    """Audit-hook refusals since the last report (e.g. ``ctypes.dlopen``): each one is a cheat attempt."""
    prep_us: float = 0.0
    """Host time making the call's inputs and poisoning the allocator (diagnostics only: where a pair's time goes)."""
    wall_us: float = 0.0
    """Host time of the whole call, from the Call's arrival to this report (diagnostics only)."""
    outputs: Committed | None = None
    """The call's outputs, committed (None when the call failed)."""
    inputs: Committed | None = None
    """The call's inputs after the forward, committed when the Call asked (``commit_inputs``)."""


@message("batch_ready")
class BatchReady:
    calls: int
    error: Error | None = None
    out_of_memory: bool = False


@message("batch_report")
class BatchReport:
    calls: int
    error: Error | None = None
    cuda_error: bool = False
    out_of_memory: bool = False
    outputs: tuple[Committed, ...] = ()
    """Every call's outputs, committed, in the batch's order."""


@message("kernel_report")
class KernelReport:
    """The phase's end: the profiler's kernel table, and the identity check of the worker's functions."""

    profiler: str
    rows: tuple[KernelRow, ...]
    markers: int
    """Marker kernels the harness launched in the window (two per timed call: hold and end)."""
    calls: int
    """Calls in the window."""
    dsl_names: tuple[str, ...]
    """Names of the Triton/TileLang kernels the worker's hooks saw compiled or launched (a claim)."""
    patched: tuple[str, ...] = ()
    """Functions of torch, Triton or the harness replaced since the worker's snapshot (harness.execute.worker.rules.tamper)."""
    side_us: float = 0.0
    """GPU microseconds of the window's kernels and copies on streams other than the markers'
    (:attr:`harness.execute.shared.profiling.Attribution.side_us`)."""
    dry_aten_elements: dict = field(default_factory=dict)
    """The workload's dry forward (compile only, before the first real call) under the aten recorder: input elements
    each aten op was dispatched on; empty when that forward did not run to its end (an autotuned kernel ends it)."""
    dry_input_elements: int = 0
    """The dry forward's input elements (0: no complete dry record)."""


@message("workload_done")
class WorkloadDone:
    workload: str


@message("done")
class Done:
    pass


WORKER_TO_PARENT = (Ready, Imported, Fatal, WorkloadFatal, WantDevice, CallReport, BatchReady, BatchReport, KernelReport,
                    WorkloadDone, Done)
PARENT_TO_WORKER = (Go, Call, CallBlock, Batch, RunBatch, Release, Kernels, EndWorkload, Finish)

# the checker's conversation (defined in checker_messages.py), named here too: one namespace for every message
from harness.execute.wire.checker_messages import (  # noqa: E402,F401
    Context, Compare, CompareReply, LibSample, LibCall, LibSamples, LibSampleReply, LibSamplesReply, Verify, VerifyReply, LibBatch, RunLibBatch, BatchReply, LibKernels, LibKernelsReply, Drop, Ping, OkReply, ErrorReply, Worst, ProfileVerdict, FairnessProbe, FairnessReply, CHECKER_REQUESTS, CHECKER_REPLIES, REPLY_FOR)


def error_from_exception(exc: BaseException, limit: int = MAX_TEXT) -> Error:
    """An :class:`Error` for ``exc`` with the tail of its traceback."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Error(type(exc).__name__, str(exc)[:limit], tb[-limit:])

