"""The parent's clock over batches: a disagreement with the events is confirmed on more batches before it is
scored host-bound or called a forgery (TimingPhase.trusted_clock)."""

from __future__ import annotations

import types

from harness.execute.parent.session import Session
from harness.execute.parent.timing_phase import TimingPhase
from harness.records import Status
from harness.score import judge
from harness.score.clock import per_call, spread

N = 14
EVENTS = [0.121] * 30  # the candidate's event samples (ms per call)
LIB = [0.75] * 30
ENQ = [464.0] * 30  # a loaded host: launching takes longer than the GPU time


def _phase(batch_ms: list[float], cuda: bool = True, fail_at: int | None = None):
    """A phase whose candidate batches take ``batch_ms`` in turn (round trips 0.5 ms, library 10.9 ms)."""
    session = types.SimpleNamespace(cuda=cuda, o=types.SimpleNamespace(batch_reps=2))
    session._judge_clock = lambda *a: Session._judge_clock(session, *a)
    phase = TimingPhase(session)
    asked: list[int] = []

    def batches(w, ctx, checker, cand_ms, lib_ms, lib_excess, prior=None):
        have = len(prior["W_c"]) if prior else 0
        asked.append(have)
        if fail_at is not None and have >= fail_at:
            return judge.Failure(Status.RUNTIME_ERROR, "a timed batch failed")
        W_c = (prior["W_c"] if prior else []) + batch_ms[have:have + 2]
        W_g = [0.5] * len(W_c)
        W_l, W_gl = [10.9] * len(W_c), [0.3] * len(W_c)
        info = {"n": N, "W_c": W_c, "W_l": W_l, "W_g": W_g, "W_gl": W_gl, "T_c": per_call(W_c, W_g, N),
                "T_l": per_call(W_l, W_gl, N), "spread": spread(W_c, W_g, N)}
        return info, 2
    phase.batches = batches
    return phase, asked


def test_two_slowed_batches_are_confirmed_before_a_host_bound_score():
    """Bug it stops (H200 suite run): a TileLang depthwise convolution at 0.121 ms
    on its events was scored host-bound at 0.211 ms, on two batches slowed by a loaded host (4.03 and 3.08 ms,
    against 2.56 ms in four other runs). Two more batches at the quiet machine's pace settle it on the events."""
    phase, asked = _phase([4.03, 3.08, 3.3, 2.56])
    decision, info, checks = phase.trusted_clock(None, None, None, EVENTS, LIB, ENQ, 1.0)
    assert asked == [0, 2] and checks == 4 and len(info["W_c"]) == 4
    assert decision.source == "cuda_event" and decision.hack is None
    # what the decision on the first two alone was
    first = Session._judge_clock(types.SimpleNamespace(cuda=True), EVENTS, LIB, ENQ,
                                 {"n": N, "T_c": per_call([4.03, 3.08], [0.5] * 2, N), "T_l": 0.75,
                                  "spread": spread([4.03, 3.08], [0.5] * 2, N)})
    assert first.source == "trusted_batch" and first.hack is None


def test_agreeing_batches_are_not_taken_again():
    phase, asked = _phase([3.2, 2.56])
    decision, info, checks = phase.trusted_clock(None, None, None, EVENTS, LIB, ENQ, 1.0)
    assert asked == [0] and checks == 2 and decision.source == "cuda_event"


def test_a_forged_clock_stays_a_forgery_on_more_batches():
    """What it keeps: a worker claiming 0.121 ms per call while every batch takes 0.5 ms per call is a forgery
    on four batches as on two (more batches only ever lower the shortest one: the truth is never hidden)."""
    phase, asked = _phase([7.5, 7.5, 7.4, 7.5])
    decision, info, checks = phase.trusted_clock(None, None, None, EVENTS, LIB, [20.0] * 30, 1.0)
    assert asked == [0, 2] and decision.hack is not None and "disagrees with the trusted clock" in decision.hack


def test_a_failure_in_the_extra_batches_is_returned_and_the_cpu_path_takes_one_round():
    phase, asked = _phase([4.03, 3.08], fail_at=2)
    assert isinstance(phase.trusted_clock(None, None, None, EVENTS, LIB, ENQ, 1.0), judge.Failure)
    phase, asked = _phase([4.03, 3.08, 2.56, 2.56], cuda=False)
    decision, info, checks = phase.trusted_clock(None, None, None, EVENTS, LIB, ENQ, 1.0)
    assert asked == [0] and len(info["W_c"]) == 2
