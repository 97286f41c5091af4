"""The messages between the parent, the candidate worker and the trusted checker: the only definition.

Three processes talk (see README "Security")::

    parent (trusted, no CUDA)  <-- HMAC-signed JSON lines -->  worker (untrusted: runs the candidate)
    parent                     <-- JSON lines on stdin/stdout --> checker (trusted: references, library)

Every message is a frozen dataclass here with a ``KIND`` tag; :func:`encode`
turns one into a plain dict (``{"kind": ..., "v": VERSION, ...fields}``) and
:func:`decode` turns a dict back into the dataclass, refusing unknown kinds,
unknown or missing fields, wrong types, over-long strings and lists. The
worker is untrusted, so what it sends is parsed with the same strictness as a
network packet: a message that does not decode is a protocol violation
(``REWARD_HACK``: an honest worker only sends what :func:`encode` writes).

Conversation with a worker (one candidate, its workloads in order)::

    worker -> parent   GPU_WANT_LINE         pre-started workers told gpu_gate, unsigned: before its CUDA context
    parent -> worker   GPU_GO                one byte, sent while the pool holds a background place in the device gate
    worker -> parent   warm line             pre-started workers only, unsigned, before the Spec: warm
    parent -> worker   Spec                  first line, unsigned: carries the channel key
    worker -> parent   Ready                 sandbox, audit hooks and profiler in place
    worker -> parent   Imported | Fatal
    for each workload:
      worker -> parent WantDevice | WorkloadFatal     models built, kernels compiled (dry)
      parent -> worker Go
      repeated, in any order the parent chooses:
        parent -> worker Call          -> CallReport      one forward on fresh inputs from (seed, transform)
        parent -> worker CallBlock     -> CallReport x n  n such calls, one message (the timing phase's)
        parent -> worker Handoff       -> HandoffReport   export a kept call's outputs (and inputs)
        parent -> worker Batch         -> BatchReady      make the inputs of a batch (the candidate's code does not run)
        parent -> worker Go...Batch    -> BatchReport     back-to-back forwards on them, timed by the parent's clock
        parent -> worker Release                           drop kept outputs (no reply)
        parent -> worker Kernels       -> KernelReport    the profiler's kernel table since the last one
      parent -> worker EndWorkload     -> WorkloadDone
    parent -> worker   Finish          -> Done

The worker cannot tell a checked call from a timed one: every Call runs the
same code (fresh inputs, cache flush, held launch queue, events; the allocator
poisoned in the correctness rounds), and the parent decides only afterwards
which outputs to ask for.
Conversation with a checker: one request, one reply (:class:`CheckerRequest`
subclasses; replies are :class:`CheckerReply` subclasses).

Size (about 630 lines): this module is the only definition of every message between the
processes; splitting it would split the protocol. Most lines are the message classes themselves.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass, field
from typing import Any

VERSION = 2
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
MAX_TEXT = 8000
MAX_LIST = 4096
MAX_SOURCES_CHARS = 400_000


class ProtocolError(ValueError):
    """A message that is not what :func:`encode` writes (names the kind and field)."""


_REGISTRY: dict[str, type] = {}


def message(kind: str):
    """Class decorator: register a frozen dataclass as the message ``kind``."""

    def wrap(cls):
        cls = dataclass(frozen=True, slots=True)(cls)
        if kind in _REGISTRY:
            raise ValueError(f"message kind {kind!r} registered twice")
        cls.KIND = kind
        _REGISTRY[kind] = cls
        return cls

    return wrap


def encode(msg: Any) -> dict:
    """The wire form of a message: a plain dict of JSON values."""
    if type(msg) not in _REGISTRY.values():
        raise TypeError(f"{type(msg).__name__} is not a protocol message")
    out = {"kind": msg.KIND, "v": VERSION}
    for f in dataclasses.fields(msg):
        out[f.name] = _plain(getattr(msg, f.name))
    return out


def _plain(v: Any) -> Any:
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def decode(d: Any, expect: tuple[type, ...] | None = None) -> Any:
    """The message a wire dict encodes; raises :class:`ProtocolError` naming what is wrong.

    ``expect`` restricts the kinds accepted here (a worker may only send
    worker messages, and only the ones that fit the conversation's state).
    """
    if not isinstance(d, dict):
        raise ProtocolError(f"a message must be a JSON object, got {type(d).__name__}")
    kind = d.get("kind")
    cls = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ProtocolError(f"unknown message kind {str(kind)[:60]!r}")
    if d.get("v") != VERSION:
        raise ProtocolError(f"{kind}: protocol version {str(d.get('v'))[:20]!r}, expected {VERSION}")
    if expect is not None and cls not in expect:
        raise ProtocolError(f"unexpected message {kind!r} here; expected one of {sorted(c.KIND for c in expect)}")
    return _build(cls, d, kind, {"kind", "v"})


_SCHEMA: dict[type, tuple[frozenset, tuple[tuple[str, Any, bool], ...]]] = {}


def _schema(cls: type) -> tuple[frozenset, tuple[tuple[str, Any, bool], ...]]:
    """(field names, (name, type, required) per field) of a dataclass, computed once per class."""
    if cls not in _SCHEMA:
        hints = typing.get_type_hints(cls)
        fields = tuple((f.name, hints[f.name], f.default is dataclasses.MISSING
                        and f.default_factory is dataclasses.MISSING)  # type: ignore[misc]
                       for f in dataclasses.fields(cls))
        _SCHEMA[cls] = (frozenset(name for name, _, _ in fields), fields)
    return _SCHEMA[cls]


def _build(cls: type, d: dict, where: str, extra: set[str] = frozenset()) -> Any:
    names, fields = _schema(cls)
    unknown = set(d) - names - extra
    if unknown:
        raise ProtocolError(f"{where}: unknown field(s) {sorted(unknown)[:5]}")
    kwargs = {}
    for name, tp, required in fields:
        if name not in d:
            if required:
                raise ProtocolError(f"{where}: missing field '{name}'")
            continue
        kwargs[name] = _check(d[name], tp, f"{where}.{name}")
    return cls(**kwargs)


def _check(v: Any, tp: Any, where: str) -> Any:
    """``v`` converted to ``tp`` (tuples for lists, nested dataclasses), or ProtocolError."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return v
    if origin in (typing.Union, types.UnionType):
        if v is None and type(None) in args:
            return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _check(v, a, where)
            except ProtocolError as exc:
                errors.append(str(exc))
        raise ProtocolError(errors[0] if errors else f"{where}: must not be null")
    if origin in (tuple, list):
        if not isinstance(v, list):
            raise ProtocolError(f"{where}: expected a list, got {type(v).__name__}")
        if len(v) > MAX_LIST:
            raise ProtocolError(f"{where}: list of {len(v)} items (at most {MAX_LIST})")
        inner = args[0] if args else Any
        return tuple(_check(x, inner, f"{where}[{i}]") for i, x in enumerate(v))
    if origin is dict or tp is dict:
        if not isinstance(v, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(v).__name__}")
        if len(v) > MAX_LIST:
            raise ProtocolError(f"{where}: object of {len(v)} keys (at most {MAX_LIST})")
        return dict(v)
    if dataclasses.is_dataclass(tp):
        if not isinstance(v, dict):
            raise ProtocolError(f"{where}: expected an object, got {type(v).__name__}")
        return _build(tp, v, where)
    if tp is bool:
        if type(v) is not bool:
            raise ProtocolError(f"{where}: expected true/false, got {type(v).__name__}")
        return v
    if tp is int:
        if type(v) is not int:
            raise ProtocolError(f"{where}: expected an integer, got {type(v).__name__}")
        return v
    if tp is float:
        if type(v) not in (int, float):
            raise ProtocolError(f"{where}: expected a number, got {type(v).__name__}")
        return float(v)
    if tp is str:
        if not isinstance(v, str):
            raise ProtocolError(f"{where}: expected a string, got {type(v).__name__}")
        if len(v) > MAX_SOURCES_CHARS:
            raise ProtocolError(f"{where}: string of {len(v)} characters (at most {MAX_SOURCES_CHARS})")
        return v
    raise ProtocolError(f"{where}: unsupported type {tp}")


# --------------------------------------------------------------------------- shared parts

@dataclass(frozen=True, slots=True)
class Error:
    """An exception that crossed the boundary, as text."""

    type: str
    message: str
    traceback_tail: str = ""


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """What a worker needs to rebuild one workload: the problem's constants, dtype, seeds of the weights."""

    name: str
    params: dict
    dtype: str
    allow_tf32: bool
    model_seed: int
    warm_seed: int


@dataclass(frozen=True, slots=True)
class KernelRow:
    """One kernel name's GPU time in a profiled window, as the worker's profiler saw it (a claim)."""

    name: str
    inside_us: float
    """Microseconds of this kernel that ran inside a forward's window (between the harness's markers) or on
    a stream other than the harness's."""
    count: int
    outside_us: float = 0.0
    """Microseconds outside every forward window on the harness's stream (inputs, flush, poison: the harness's own)."""


# --------------------------------------------------------------------------- parent -> worker

@message("spec")
class Spec:
    """The job: sent once, first, unsigned (it carries the key the rest is signed with)."""

    key: str
    candidate_path: str
    problem_path: str
    device: str
    handoff_dir: str
    dsl: str
    timing: dict
    precompile: bool
    sandbox: bool
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


@message("handoff")
class Handoff:
    """Export the outputs (and, if ``inputs``, the inputs) of a kept call for the checker."""

    call_id: int
    inputs: bool


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
    audit: str
    profiler: str
    """``cupti`` when a kernel profiler runs, else why not (``unavailable: ...``, ``cpu``)."""


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
    dsl_names: tuple[str, ...] = ()
    aten_ops: tuple[str, ...] = ()
    new_threads: int = 0
    new_children: int = 0
    output_types: tuple[str, ...] = ()
    lowered_sources: tuple[str, ...] | None = None
    audit_blocked: tuple[str, ...] = ()
    """Audit-hook refusals since the last report (e.g. ``ctypes.dlopen``): each one is a cheat attempt."""
    prep_us: float = 0.0
    """Host time making the call's inputs and poisoning the allocator (diagnostics only: where a pair's time goes)."""
    wall_us: float = 0.0
    """Host time of the whole call, from the Call's arrival to this report (diagnostics only)."""


@message("handoff_report")
class HandoffReport:
    call_id: int
    output_ipc: tuple[dict, ...] | None = None
    output_path: str | None = None
    input_ipc: tuple[dict, ...] | None = None
    input_path: str | None = None
    error: Error | None = None
    output_digest: str | None = None
    """BLAKE2b of the file at ``output_path`` as the worker wrote it (the checker reads only a file that has it)."""
    input_digest: str | None = None


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
    new_children: int = 0
    """Child processes of the worker alive at the end of the phase."""
    side_us: float = 0.0
    """GPU microseconds of the window's kernels and copies on streams other than the markers'
    (:attr:`harness.execute.shared.profiling.Attribution.side_us`)."""


@message("workload_done")
class WorkloadDone:
    workload: str


@message("done")
class Done:
    pass


WORKER_TO_PARENT = (Ready, Imported, Fatal, WorkloadFatal, WantDevice, CallReport, HandoffReport, BatchReady,
                    BatchReport, KernelReport, WorkloadDone, Done)
PARENT_TO_WORKER = (Go, Call, CallBlock, Handoff, Batch, RunBatch, Release, Kernels, EndWorkload, Finish)


# --------------------------------------------------------------------------- parent <-> checker (trusted)

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

    @property
    def key(self) -> str:
        import json

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
    output_ipc: tuple[dict, ...] | None = None
    output_path: str | None = None
    input_ipc: tuple[dict, ...] | None = None
    input_path: str | None = None
    output_digest: str | None = None
    input_digest: str | None = None


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
    output_ipc: tuple[dict, ...] | None = None
    output_path: str | None = None
    input_ipc: tuple[dict, ...] | None = None
    input_path: str | None = None
    output_digest: str | None = None
    input_digest: str | None = None


@message("verify_reply")
class VerifyReply:
    ok: bool
    status: str
    detail: str
    max_excess: float | None = None


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


CHECKER_REQUESTS = (Compare, LibSample, LibSamples, Verify, LibBatch, RunLibBatch, LibKernels, Drop, Ping)
CHECKER_REPLIES = (CompareReply, LibSampleReply, VerifyReply, BatchReply, LibKernelsReply, OkReply, ErrorReply)
REPLY_FOR: dict[type, tuple[type, ...]] = {
    Compare: (CompareReply, ErrorReply), LibSample: (LibSampleReply, ErrorReply),
    LibSamples: (LibSamplesReply, ErrorReply), Verify: (VerifyReply, ErrorReply),
    LibBatch: (BatchReply, ErrorReply), RunLibBatch: (BatchReply, ErrorReply), LibKernels: (LibKernelsReply, ErrorReply),
    Drop: (OkReply, ErrorReply), Ping: (OkReply, ErrorReply),
}


def error_from_exception(exc: BaseException, limit: int = MAX_TEXT) -> Error:
    """An :class:`Error` for ``exc`` with the tail of its traceback."""
    import traceback

    tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return Error(type(exc).__name__, str(exc)[:limit], tb[-limit:])

