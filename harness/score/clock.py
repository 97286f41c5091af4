"""A clock the candidate cannot forge: its CUDA-event times checked against the parent's wall clock.

The candidate's worker times each call with CUDA events: fine-grained, but a
claim (its interpreter can rewrite timers and reports). The parent also
times *batches* of back-to-back calls on fresh inputs (made before the batch,
while no candidate code runs; the whole batch handed to the forward's thread at
once, so a thread switch per call does not count) from its own side of the pipe (request sent ->
reply received, the worker synchronizing before it replies); an empty
request's round trip is subtracted::

    T_c = (min_b W_candidate[b] - min_b W_round_trip[b]) / n      per call, candidate
    T_l = (min_b W_library[b]   - min_b W_library_round_trip[b]) / n   per call, library (trusted process)

A forward cannot finish a batch sooner than its kernels run (outputs of
calls chosen after the batch are verified), and delaying only makes a batch
longer, so T_c bounds the candidate's real time per call from above. The
least-disturbed batch is the shortest: the parent's own clock is read by one
of its session threads, which waits for the interpreter lock behind the
other sessions' work, and such a wait only ever adds time. Bug it stops: with
medians of two batches, one batch slowed by milliseconds scored a 0.13 ms
TileLang RMSNorm and its library at 1.93 and 1.97 ms per call as host-bound
in one suite run on an H200 and at 0.133 ms on its events in the next.
Decision (:func:`judge_clock`)::

    m_c (1 + tol) >= T_c        the events agree: score the events (cold cache, no launch overhead)
    else, enqueue >= T_c (1-tol) host-bound (launch overhead exceeds GPU time): score BOTH sides on
                                 the trusted batches, so each pays its own host time
    else                         the claimed time is not what the parent measured: REWARD_HACK

``tol`` = :data:`BASE_TOLERANCE` + 3 x the relative spread of the candidate's
batches, the spread's part at most :data:`MAX_SPREAD_TOLERANCE` (a candidate
controls its own batches' spread: unbounded, one delayed batch would have let
any claim agree). A forger who also claims a long enqueue time gains nothing:
it is then scored on T_c.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

BASE_TOLERANCE = 0.25
"""Back-to-back calls share L2 and overlap host and GPU work; cold event samples do neither. 25% covers that
difference for honest kernels on a GPU: every one of the 306 honest records of the committed H200 suites
(evidence/h200-results/, evidence/throughput/) was scored on its events under it."""
MAX_SPREAD_TOLERANCE = 0.25
"""The most the batches' spread adds to the tolerance."""
CPU_TOLERANCE = 1.0
"""On the CPU path the worker's clock and the parent's share two loaded cores with compiling neighbours: only
a claim more than twice as fast as the parent's clock is called a disagreement there, and it is a warning,
never a verdict (no time is scored on the CPU path; the session says so on the record)."""


@dataclass(frozen=True, slots=True)
class ClockDecision:
    kernel_ms: float
    library_ms: float
    source: str
    """``cuda_event`` or ``trusted_batch``."""
    note: str
    hack: str | None
    """Why the claim disagrees with the trusted clock (REWARD_HACK), or None."""
    evidence: dict


def per_call(batches_ms: list[float], round_trips_ms: list[float], n: int) -> float:
    """(shortest batch - shortest round trip) / n, never below 0 (0 without batches)."""
    if not batches_ms or not round_trips_ms:
        return 0.0
    return max(0.0, min(batches_ms) - min(round_trips_ms)) / n


def spread(batches_ms: list[float], inputs_ms: list[float], n: int) -> float:
    """Relative spread (max - min) / median of the per-call values of the batches."""
    vals = [max(0.0, b - g) / n for b, g in zip(batches_ms, inputs_ms)]
    if len(vals) < 2 or statistics.median(vals) <= 0:
        return 0.0
    return (max(vals) - min(vals)) / statistics.median(vals)


def judge_clock(*, event_kernel_ms: float, event_library_ms: float, enqueue_us: float, trusted_kernel_ms: float,
                trusted_library_ms: float, kernel_spread: float, n: int,
                base_tolerance: float = BASE_TOLERANCE, host_bound_possible: bool = True) -> ClockDecision:
    """``host_bound_possible`` is False on the CPU path, where the worker's clock is the host's (an
    enqueue time cannot explain a difference there)."""
    tol = base_tolerance + min(MAX_SPREAD_TOLERANCE, 3.0 * kernel_spread)
    evidence = {"event_ms": round(event_kernel_ms, 6), "trusted_ms_per_call": round(trusted_kernel_ms, 6),
                "enqueue_us": round(enqueue_us, 2), "calls_per_batch": n, "tolerance": round(tol, 3)}
    if event_kernel_ms * (1 + tol) >= trusted_kernel_ms:
        return ClockDecision(event_kernel_ms, event_library_ms, "cuda_event",
                             f"CUDA-event median {event_kernel_ms:.4g} ms agrees with the parent's clock "
                             f"({trusted_kernel_ms:.4g} ms per call over batches of {n})", None, evidence)
    if host_bound_possible and enqueue_us / 1e3 >= trusted_kernel_ms * (1 - tol):
        return ClockDecision(trusted_kernel_ms, trusted_library_ms, "trusted_batch",
                             f"host-bound: launching the forward takes {enqueue_us:.0f} us per call, more than its "
                             f"GPU time ({event_kernel_ms * 1e3:.0f} us); both sides scored on the parent's clock "
                             f"over batches of {n} calls", None, evidence)
    return ClockDecision(trusted_kernel_ms, trusted_library_ms, "trusted_batch", "",
                         f"claimed time disagrees with the trusted clock: the worker's "
                         f"{'CUDA events say' if host_bound_possible else 'host clock says'} "
                         f"{event_kernel_ms:.4g} ms per call, the parent's wall clock over batches of {n} calls says "
                         f"{trusted_kernel_ms:.4g} ms (tolerance {tol:.0%}), and launching takes only "
                         f"{enqueue_us:.0f} us", evidence)
