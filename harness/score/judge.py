"""From facts to statuses: pure functions, no processes, no I/O.

The session (:mod:`harness.execute.parent.session`) collects facts -- the worker's
claims and the trusted checker's findings -- and asks these functions what
they mean. Each returns ``None`` (nothing wrong) or a :class:`Failure`.
Keeping them here means every rule can be tested with plain values, and the
rule and its test live side by side.

The facts are this module's own records (:class:`CallFacts`, :class:`CheckFacts`), not the protocol's
messages: judging does not depend on how the facts travelled. ``CallFacts.of`` and ``CheckFacts.of`` read
them from any object with the same attribute names (the protocol's ``CallReport``, ``CompareReply``,
``VerifyReply`` and ``ErrorReply`` among them), and the judging functions accept such an object too.
"""

from __future__ import annotations

import math

from dataclasses import dataclass, field
from typing import Any

from harness.records import Status

IDENTICAL_MIN = 0.9999
"""Share of elements bit-identical to the library's output, on every correctness round, for :func:`fingerprint_note` ..."""
ROUNDING_MIN = 0.05
"""... of an op whose library output differs from the rounded float64 reference in at least this share."""
CONTENTION_MIN = 0.5
"""The library must run this much slower while the candidate lived than after, to be called contention. A GPU
kernel left spinning by the candidate doubles it or worse; other candidates compiling and starting beside a
timed one moved it by up to 24% on an H200, which must not be blamed on anyone."""
CONTENTION_MIN_MS = 0.02
CONTENTION_HACK = 1.0
"""Twice as slow while the candidate lived is REWARD_HACK (a kernel left spinning does that). Between
:data:`CONTENTION_MIN` and this, the slowdown is not blamed: neighbours starting and compiling beside a timed
candidate slowed an honest reference's library by 57% on an H200 (with the candidate's own times inflated
alike); the record is scored against the quiet library time instead, so a sabotage that small gains
nothing either."""
CONTENTION_HACK_MS = 0.1
"""... and this many milliseconds slower. The service's load test (smoke workloads, 12 candidates in flight on
one H200) slowed honest kernels' 4-23 us libraries by 29-46 us (up to 11x) while other workers started
beside them; below this a slowdown is rescored, not blamed, so a spinner small enough to hide under it gains
nothing either."""


@dataclass(frozen=True, slots=True)
class CallFacts:
    """What one call of the candidate's forward did, as its worker reported it (every field a claim)."""

    ok: bool
    """The forward returned (False: it raised; ``error_*`` say what)."""
    error_type: str = ""
    error_message: str = ""
    traceback_tail: str = ""
    out_of_memory: bool = False
    """The forward's failure was an out-of-memory."""
    stream_ms: float = 0.0
    """The call's time on its stream's CUDA events (ms)."""
    device_ms: float = 0.0
    """The call's time to the device-wide end (ms)."""
    enqueue_us: float = 0.0
    """Host time from handing the forward to the candidate's thread until it returned (us)."""
    idle_ms: float = 0.0
    """The host's round trip to the idle GPU right after the call (ms)."""
    launches: int = 0
    """Triton/TileLang kernel launches the worker counted during the forward."""
    aten_ops: tuple[str, ...] = ()
    """The aten ops the worker's dispatch recorder saw during the forward (CPU path)."""
    aten_elements: dict = field(default_factory=dict)
    """Input elements each of those ops was dispatched on, summed over the forward (CPU path)."""
    input_elements: int = 0
    """Elements of the call's tensor inputs."""
    new_threads: int = 0
    """Threads started by the forward and still running after it returned."""
    new_children: int = 0
    """Child processes started by the forward and still running after it returned."""
    output_types: tuple[str, ...] = ()
    """The type of each output tensor (``torch.Tensor`` for a plain one)."""
    lowered: bool = False
    """A TileLang kernel was lowered to device source only (no GPU): nothing ran to judge."""
    audit_blocked: tuple[str, ...] = ()
    """The worker's audit-hook refusals since its last report."""

    @classmethod
    def of(cls, r: Any) -> CallFacts:
        """The facts of ``r``: a :class:`CallFacts` as it is, or any object with a call report's attributes
        (``error`` an object with ``type``, ``message`` and ``traceback_tail``, or None; ``lowered_sources``
        None unless the kernel was only lowered)."""
        if isinstance(r, CallFacts):
            return r
        err = r.error
        return cls(ok=bool(r.ok), error_type=err.type if err is not None else "",
                   error_message=err.message if err is not None else "",
                   traceback_tail=(err.traceback_tail or "") if err is not None else "",
                   out_of_memory=bool(r.out_of_memory), stream_ms=r.stream_ms, device_ms=r.device_ms,
                   enqueue_us=r.enqueue_us, idle_ms=r.idle_ms, launches=int(r.launches), aten_ops=tuple(r.aten_ops),
                   aten_elements=dict(getattr(r, "aten_elements", {}) or {}),
                   input_elements=int(getattr(r, "input_elements", 0) or 0),
                   new_threads=int(r.new_threads), new_children=int(getattr(r, "new_children", 0)),
                   output_types=tuple(r.output_types), lowered=r.lowered_sources is not None,
                   audit_blocked=tuple(r.audit_blocked))


@dataclass(frozen=True, slots=True)
class CheckFacts:
    """The trusted checker's answer about one output: a comparison with the float64 reference (a correctness
    round) or with the library's output on the same inputs (a verified timed call)."""

    ok: bool
    """The output passed."""
    status: str
    """The status the checker found (a :class:`Status` value; ``PASSED`` when ``ok``)."""
    detail: str
    """What the checker saw, for the record's message."""
    max_excess: float | None = None
    """The largest error beyond the tolerance, as a multiple of it (None when not measured)."""
    checker_failed: bool = False
    """The checker itself could not answer (the harness's failure, never the candidate's)."""
    out_of_memory: bool = False
    """The checker's failure was an out-of-memory (the job may run again alone)."""

    @classmethod
    def of(cls, reply: Any) -> CheckFacts:
        """The facts of ``reply``: a :class:`CheckFacts` as it is, an answer with ``ok``, ``status``, ``detail``
        (and optionally ``max_excess``), or a failure of the checker (an object with ``status`` and ``detail``
        but no ``ok``, such as the protocol's error reply)."""
        if isinstance(reply, CheckFacts):
            return reply
        if not hasattr(reply, "ok"):
            return cls(ok=False, status=str(reply.status), detail=str(reply.detail), checker_failed=True,
                       out_of_memory=bool(getattr(reply, "out_of_memory", False)))
        return cls(ok=bool(reply.ok), status=str(reply.status), detail=str(reply.detail),
                   max_excess=getattr(reply, "max_excess", None))


@dataclass(frozen=True, slots=True)
class Failure:
    status: Status
    message: str
    evidence: dict = field(default_factory=dict)
    retry_alone: bool = False
    """The failure may have been caused by neighbours sharing the GPU (an out-of-memory): run again alone."""
    traceback_tail: str = ""

    @property
    def error(self) -> dict:
        return {"type": _error_type(self), "message": self.message, "traceback_tail": self.traceback_tail}


def brief(text: str, head: int = 240, tail: int = 900) -> str:
    """A long message's start and end (an exception's own text can begin with pages of generated code and
    end with the sentence that says what went wrong)."""
    if len(text) <= head + tail + 20:
        return text
    return f"{text[:head]} [... {len(text) - head - tail} characters ...] {text[-tail:]}"


def _error_type(f: Failure) -> str:
    return f.evidence.get("mechanism", f.status.value) if f.evidence else f.status.value


def hack(message: str, mechanism: str, **evidence: Any) -> Failure:
    return Failure(Status.REWARD_HACK, message, {"mechanism": mechanism, **evidence})


def judge_call(facts: CallFacts | Any, *, dsl: str, device: str, library_aten: tuple[str, ...],
               profiled: bool) -> Failure | None:
    """One call's facts (the worker's claims) -> a failure, or None to go on to the trusted checks.

    ``facts``: a :class:`CallFacts`, or an object :meth:`CallFacts.of` reads. ``profiled``: a kernel profiler
    runs in the worker (then kernel attribution, not the launch count, decides whether a DSL kernel did the work).
    """
    r = CallFacts.of(facts)
    tampered = judge_tamper(r.audit_blocked, ())
    if tampered is not None:
        return tampered
    if not r.ok:
        etype, emsg = r.error_type or "Error", r.error_message or "the forward failed"
        retry = r.out_of_memory and device != "cpu"
        return Failure(Status.RUNTIME_ERROR, f"forward raised {etype}: {brief(emsg)}", retry_alone=retry,
                       traceback_tail=r.traceback_tail[-3000:])
    claims = {"stream_ms": r.stream_ms, "device_ms": r.device_ms, "enqueue_us": r.enqueue_us, "idle_ms": r.idle_ms}
    bad_claims = {k: repr(v) for k, v in claims.items() if not (math.isfinite(v) and v >= 0)}
    if bad_claims:  # an honest worker's events and clocks only give finite, non-negative times
        return hack(f"the call's timing report is not a set of times: {bad_claims}", "timing_claim", **bad_claims)
    if r.new_threads:
        return hack(f"forward left {r.new_threads} thread(s) of its own code running after it returned", "late_thread")
    if r.new_children:
        return hack(f"forward left {r.new_children} child process(es) running after it returned", "child_process")
    if r.lowered:
        return None
    if not profiled:
        forbidden = library_share(r, library_aten)
        if forbidden:
            return hack(f"library fallback: forward called {sorted(forbidden)}, the library op this problem replaces, "
                        f"on {max(forbidden.values()):.0%} of its inputs' elements", "library_fallback",
                        aten=sorted(forbidden), share=max(forbidden.values()))
        if r.launches == 0:
            return hack(f"no Triton or TileLang kernel was launched during forward (declared dsl: {dsl}): the result "
                        "did not come from a DSL kernel", "no_dsl_kernel")
    bad = [t for t in r.output_types if t != "torch.Tensor"]
    if bad:
        return Failure(Status.INCORRECT_DTYPE, f"forward returned {bad}; expected plain torch.Tensor")
    if not r.output_types:
        return Failure(Status.INCORRECT_DTYPE, "forward returned no tensor output")
    return None


FALLBACK_MIN_SHARE = 0.1
"""The library op must run on at least this share of the forward's input elements to be a fallback. A kernel that
finishes with the library's op on a small tensor of partial results (flash-linear-attention's logsumexp over
per-block partials: 1/64 of the input) has done the work itself; a fallback runs the op on the inputs."""


def library_share(facts: CallFacts, library_aten: tuple[str, ...]) -> dict[str, float]:
    """{library op: its share of the forward's input elements} for the problem's library ops the forward called
    on at least :data:`FALLBACK_MIN_SHARE` of them (a report without element counts: every one called)."""
    names = {a.split(".", 1)[1] for a in library_aten if "." in a}
    out = {}
    for op in sorted(set(facts.aten_ops) & names):
        n = facts.aten_elements.get(op)
        share = 1.0 if n is None or facts.input_elements <= 0 else n / facts.input_elements
        if share >= FALLBACK_MIN_SHARE:
            out[op] = share
    return out


def dry_library_shares(elements: dict, input_elements: int, library_aten: tuple[str, ...]) -> dict[str, float] | None:
    """{library op: its share of the input elements} in a workload's dry forward (every library op it called, however
    small its share), or None without a complete dry record (then nothing is known about the op's share)."""
    if input_elements <= 0 or not isinstance(elements, dict):
        return None
    names = {a.split(".", 1)[1] for a in library_aten if "." in a}
    return {op: float(n) / input_elements for op, n in sorted(elements.items())
            if op in names and isinstance(n, int) and n >= 0}


def judge_tamper(audit_blocked: tuple[str, ...], patched: tuple[str, ...], new_children: int = 0) -> Failure | None:
    """Audit-hook refusals, replaced functions, child processes left at a phase's end: each a cheat attempt."""
    if audit_blocked:
        return hack(f"refused by the worker's audit hooks: {'; '.join(audit_blocked)[:400]}", "audit_hook",
                    events=list(audit_blocked))
    if patched:
        return hack(f"replaced functions the harness relies on: {', '.join(patched)[:400]}", "patched_functions",
                    patched=list(patched))
    if new_children:
        return hack(f"{new_children} child process(es) of the worker still running at the end of the phase",
                    "child_process")
    return None


def judge_compare(facts: CheckFacts | Any, call_index: int) -> Failure | None:
    """The checker's correctness answer for round ``call_index`` (a :class:`CheckFacts`, or an object
    :meth:`CheckFacts.of` reads)."""
    reply = CheckFacts.of(facts)
    if reply.checker_failed:
        return Failure(Status.HARNESS_ERROR, f"round {call_index}: the reference checker failed: {reply.detail}",
                       retry_alone=reply.out_of_memory)
    if reply.ok:
        return None
    status = Status(reply.status)
    if status is Status.REWARD_HACK:
        return hack(f"round {call_index}: {reply.detail}", "checker", round=call_index)
    return Failure(status, f"round {call_index}: {reply.detail}")


def fingerprint_note(identical: list[float | None], rounding: list[float | None]) -> str | None:
    """A note when every round is bit-identical to the library's output where float64 rounding would differ.

    Not a verdict: an independent kernel that follows the same arithmetic in the same order (a sequential-K
    fp32 GEMM like cuBLAS's SIMT one, an fp32 GELU with the same erf) is bit-identical too, as the H200 runs
    showed for the bundled Triton and TileLang references. It is recorded for an audit; the kernel
    attribution decides whether the library did the work.
    """
    pairs = [(i, r) for i, r in zip(identical, rounding) if i is not None and r is not None]
    if not pairs or len(pairs) < len(identical):
        return None
    if all(i >= IDENTICAL_MIN for i, _ in pairs) and min(r for _, r in pairs) >= ROUNDING_MIN:
        return (f"the output is bit-identical to the library's in every element of every round (the library's own "
                f"output differs from the rounded float64 reference in {min(r for _, r in pairs):.0%} of them): the "
                "same arithmetic in the same order, or the library itself (see the kernel table)")
    return None


def judge_verification(facts: CheckFacts | Any, position: int, phase: str) -> Failure | None:
    """A timed call's output (at a position the candidate could not know) against the library's (a
    :class:`CheckFacts`, or an object :meth:`CheckFacts.of` reads)."""
    reply = CheckFacts.of(facts)
    if reply.checker_failed:
        return Failure(Status.HARNESS_ERROR, f"verifying {phase} call {position} failed in the checker: {reply.detail}",
                       retry_alone=reply.out_of_memory)
    if reply.ok:
        return None
    if reply.status == "HARNESS_ERROR":
        return Failure(Status.HARNESS_ERROR, f"verifying {phase} call {position}: {reply.detail}")
    return hack(f"a {phase} call's output did not match the library's output for the same inputs ({phase} call "
                f"{position}, checked at a secret position): {reply.detail}; the forward does different work when "
                "it is timed than when it is checked", "timed_call_mismatch", phase=phase, position=position,
                detail=reply.detail[:300], max_excess=reply.max_excess)


def judge_markers(markers: int, calls: int) -> Failure | None:
    """The profiler window must hold exactly two harness markers per call (hold and end).

    No markers at all means the device has no usable sleep kernel (then there is no attribution, see
    :func:`markers_usable`), not tampering.
    """
    if markers == 2 * calls or markers == 0:
        return None
    return hack(f"the profiler window holds {markers} marker kernels for {calls} calls (2 expected per call): "
                "the candidate launched the harness's marker kernel itself, or hid calls", "profiler_markers",
                markers=markers, calls=calls)


def markers_usable(markers: int) -> bool:
    return markers > 0


def slowed(session_ms: float, session_rel_iqr: float, quiet_ms: float, quiet_rel_iqr: float) -> float | None:
    """How much slower (a fraction) the library ran while the candidate lived than after it ended, when beyond
    noise (:data:`CONTENTION_MIN`, or 4x the two IQRs, and :data:`CONTENTION_MIN_MS`); else None."""
    tol = max(CONTENTION_MIN, 4.0 * (session_rel_iqr + quiet_rel_iqr))
    if session_ms <= quiet_ms * (1 + tol) or session_ms - quiet_ms < CONTENTION_MIN_MS:
        return None
    return session_ms / quiet_ms - 1


def judge_contention(session_ms: float, session_rel_iqr: float, quiet_ms: float, quiet_rel_iqr: float) -> Failure | None:
    """The library, timed while the candidate's process was alive, against a quiet re-measurement after it ended:
    REWARD_HACK from :data:`CONTENTION_HACK` and :data:`CONTENTION_HACK_MS` up (a smaller slowdown is rescored,
    see :func:`slowed`)."""
    tol = max(CONTENTION_MIN, 4.0 * (session_rel_iqr + quiet_rel_iqr))
    s = slowed(session_ms, session_rel_iqr, quiet_ms, quiet_rel_iqr)
    if s is None or s < max(tol, CONTENTION_HACK) or session_ms - quiet_ms < CONTENTION_HACK_MS:
        return None
    return hack(f"the library ran {session_ms / quiet_ms - 1:.0%} slower while the candidate's process was alive "
                f"({session_ms:.4g} ms) than after it ended ({quiet_ms:.4g} ms, tolerance {tol:.0%}): the candidate "
                "left work on the GPU that slowed the baseline", "library_contention",
                library_ms=round(session_ms, 6), quiet_library_ms=round(quiet_ms, 6))
