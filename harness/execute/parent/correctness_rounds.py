"""One workload's correctness rounds, as the parent runs them: each round's call and its check, the value
profiles found fair for the workload and the held-out shapes' naming of failures. A part of
:class:`harness.execute.parent.session.Session` (a mixin: it reads the session's state); what the rounds are is
decided by :mod:`harness.execute.parent.correctness_plan`, and what a reply means by :mod:`harness.score.judge`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import time
from typing import Any

from harness.execute.parent import correctness_plan as plan
from harness.execute.wire import protocol as P
from harness.execute.shared.inputs import round_seed
from harness.execute.checker.fairness import cache_dir as fairness_cache_dir
from harness.problems import heldout
from harness.measure.timing import hold_for
from harness.records import CorrectnessStats, Status
from harness.score import judge

MIXED_ON_CPU = ("the CPU path runs Triton kernels under the interpreter but can only lower TileLang ones, so it "
                "cannot judge a candidate that uses both; evaluate it on a GPU, or submit its kernels as separate "
                "candidates")


class WorkloadDecided(Exception):
    """The workload (or the candidate) is decided; the conversation for it ends here."""


class CorrectnessRounds:
    """The rounds of one workload (see the module docstring)."""

    def _call(self, cid: int, seed: int, transform: int, hold: float, release: tuple[int, ...] = (),
              commit_inputs: bool = False) -> P.CallReport:
        self._send(P.Call(call_id=cid, seed=seed, transform=transform, hold_us=hold, release=release,
                          commit_inputs=commit_inputs))
        r = self._recv(self.o.round_timeout_s + (self.o.compile_timeout_s if cid == 0 else 0), f"running call {cid}",
                       P.CallReport)
        if r.call_id != cid:
            raise P.ProtocolError(f"call_report for call {r.call_id}, expected {cid}")
        return r

    def _judge_call(self, r: P.CallReport) -> judge.Failure | None:
        """One call's report, with the processes alive in the worker's tree counted from outside."""
        facts = dataclasses.replace(judge.CallFacts.of(r), new_children=self._children() if r.ok else 0)
        return judge.judge_call(facts, dsl=self.c.dsl, device=self.o.device, library_aten=tuple(self.p.library_aten),
                                profiled=self.profiler == "cupti")

    def _read_failure(self, reply: Any, where: str) -> judge.Failure | None:
        """An output that changed between the checker's two reads of it, with the worker stopped: a kernel of the
        worker was still writing it (an honest worker synchronizes before it commits)."""
        if getattr(reply, "busy_at_read", False):
            self._add("*", "gpu_busy_reads", 1)  # diagnostics: the bytes' second read decides
        if getattr(reply, "changed_while_read", False):
            return judge.hack(f"{where}: the committed output changed while the checker read it, with the worker "
                              "stopped: work of the worker was still running after it reported the call done",
                              "changed_while_read", where=where)
        return None

    def _workload(self, w: Any, first_exclusive: bool) -> None:
        o, ctx = self.o, self._ctx(w)
        profiles, checks = self._profiles(w, ctx)
        names = tuple(plan.name_of(x) for x in profiles)
        worst = None
        rounds_passed, max_abs, max_excess, lib_excess = 0, 0.0, 0.0, 0.0
        identical: list[float | None] = []
        rounding: list[float | None] = []
        hold = hold_for(None)
        for r in range(len(profiles)):
            seed = round_seed(o.base_seed, w.name, r)
            t_call = time.monotonic()
            rep = self._call(r, seed, profiles[r], hold, release=(r - 1,) if r else (), commit_inputs=True)
            hold = hold_for(rep.enqueue_us or None)
            if self.lock_held == "exclusive" and first_exclusive and not self.t.alone:
                self._add(w.name, "autotune_s", time.monotonic() - t_call)  # the GPU held alone for it
                t_gate = time.monotonic()  # the autotuning round is over: share the GPU again
                self._acquire("shared")
                self._add(w.name, "queue_s", time.monotonic() - t_gate)
            if rep.lowered_sources is not None and rep.ok:
                return self._lowered(w, rep)
            self._add(w.name, "forward_s", rep.stream_ms / 1e3 if rep.ok else None)
            failed = self._named(self._judge_call(rep), w, names[r])
            corr = lambda detail="": CorrectnessStats(r + 1, rounds_passed, max_abs, max_excess, w.atol, w.rtol,  # noqa: E731
                                                      r if detail else None, detail, names[:r + 1],
                                                      names[r] if detail else None, worst, checks)
            if failed is not None:
                self._lap(w.name, "correctness_s")
                self._fail(w, failed, correctness=corr(failed.message))
                raise WorkloadDecided
            if rep.outputs is None or rep.outputs.error is not None:
                self._lap(w.name, "correctness_s")
                why = rep.outputs.error.message if rep.outputs is not None else "nothing was committed"
                self._record(w, Status.INCORRECT_DTYPE, error={"type": "NotTensors", "message": why},
                             correctness=corr(why))
                raise WorkloadDecided
            t_check = time.monotonic()
            with self._frozen():
                reply, waited = self.dev.checkers.request(P.Compare(
                    ctx=ctx, seed=seed, transform=profiles[r], atol=w.atol, rtol=w.rtol, reduction_length=w.reduction_length,
                    in_place=self.p.in_place, outputs=rep.outputs, inputs=rep.inputs,
                    handoff_dir=str(self.handoff_dir)), ctx.key)
            self._add(w.name, "check_s", time.monotonic() - t_check)
            self._add(w.name, "queue_s", waited)
            failed = self._read_failure(reply, f"correctness round {r}")
            if failed is not None:
                self._lap(w.name, "correctness_s")
                self._fail(w, failed, correctness=corr(failed.message))
                raise WorkloadDecided
            if isinstance(reply, P.CompareReply):
                self._add(w.name, "reference_s", reply.ref_s)
                self._add(w.name, "compare_s", reply.check_s)
                if reply.max_abs_err is not None:
                    max_abs = max(max_abs, reply.max_abs_err)
                    max_excess = max(max_excess, reply.max_excess or 0.0)
                    lib_excess = max(lib_excess, reply.library_max_excess or 0.0)
                identical.append(reply.identical_fraction)
                rounding.append(reply.library_rounding_fraction)
                worst = plan.worst_of(reply.worst)
            failed = self._named(judge.judge_compare(reply, r), w, names[r])
            if failed is not None:
                self._lap(w.name, "correctness_s")
                self._fail(w, failed, correctness=corr(failed.message))
                raise WorkloadDecided
            rounds_passed += 1
        self._send(P.Release(call_ids=(len(profiles) - 1,)))
        corr = CorrectnessStats(len(profiles), rounds_passed, max_abs, max_excess, w.atol, w.rtol, round_profiles=names,
                                profiles=checks)
        warnings: list[str] = []
        if lib_excess > 1.0:
            warnings.append(f"the library's own output exceeds the tolerance by {lib_excess:.2f}x against float64; "
                            "the tolerance was widened to 1.5x the library's error")
        note = judge.fingerprint_note(identical, rounding)
        if note is not None:
            warnings.append(note)
        kernels = self._attribution(w, ctx, len(profiles))
        self._lap(w.name, "correctness_s")
        if isinstance(kernels, judge.Failure):
            self._fail(w, kernels, correctness=corr)
            raise WorkloadDecided
        if not o.time_kernels or heldout.is_heldout(w):  # a held-out shape is judged, never timed
            self._record(w, Status.PASSED, correctness=corr, warnings=tuple(warnings), kernels=kernels)
            return
        self._timing(w, ctx, corr, warnings, lib_excess, kernels)

    def _profiles(self, w: Any, ctx: P.Context) -> tuple[tuple[int, ...], tuple]:
        """The value profile of each correctness round of ``w`` and the fairness verdicts it was chosen from
        (:mod:`harness.execute.parent.correctness_plan`); raises WorkloadDecided for a held-out shape that is not fair (the
        library fails on it): recorded as the harness's, and folded into the public record as "not judged"."""
        public = heldout.public_of(w)
        pw = next((x for x in self.t.workloads if x.name == public), w) if public else w
        verdicts = self._fairness(pw, self._ctx(pw) if pw is not w else ctx, ())
        fair = plan.fair_profiles(verdicts) if verdicts is not None else (plan.NORMAL,)
        self._fair[pw.name] = fair
        # the profiles follow the run (its secret seed and the workload), not the candidate: every candidate of a
        # run gets the same (seed, profile) per round, so the checker computes each reference once
        rng = random.Random(hashlib.sha256(f"{self.o.base_seed}|profiles|{pw.name}".encode()).digest())
        shapes = sum(1 for x in self.t.workloads if heldout.public_of(x) == pw.name)
        rounds, held = plan.split_profiles(fair, self.o.rounds, shapes, self.o.heldout_rounds, rng)
        checks = plan.profile_checks(verdicts or ())
        if public is None:  # and every profile that failed at a held-out shape or that no held-out shape ran
            failed = plan.failed_profiles(self.results, self.t.workloads, w.name)
            covered = set(rounds) | plan.heldout_covered(self.results, self.t.workloads, w.name)
            extra = dict.fromkeys([*failed, *(p for p in fair if p not in covered)])
            return rounds + tuple(p for p in extra if p not in rounds), checks
        want = held[heldout.index_of(w) - 1] if 0 < heldout.index_of(w) <= len(held) else (plan.NORMAL,)
        here = self._fairness(w, ctx, tuple(sorted({plan.NORMAL, *want})))
        if here is None:
            return (plan.NORMAL,) * len(want), ()
        if not any(v.fair for v in here if v.profile == plan.NORMAL):
            why = next((v.reason for v in here if v.profile == plan.NORMAL), "")
            self._record(w, Status.HARNESS_ERROR, error={"type": "NotFair", "message": f"not fair at this shape: {why}"})
            raise WorkloadDecided
        fair_here = plan.fair_profiles(here)
        return tuple(p if p in fair_here else plan.NORMAL for p in want), plan.profile_checks(here)

    def _fairness(self, w: Any, ctx: P.Context, only: tuple[int, ...]) -> tuple | None:
        """The checker's fairness verdicts for ``w`` (``only`` these profiles; empty: all), kept per workload; None
        when the probe failed."""
        if not only and w.name in self._verdicts:
            return self._verdicts[w.name]
        t0 = time.monotonic()
        cache = fairness_cache_dir()
        reply, _ = self.dev.checkers.request(P.FairnessProbe(
            ctx=ctx, atol=w.atol, rtol=w.rtol, reduction_length=w.reduction_length,
            cache_dir=str(cache) if cache is not None else None, profiles=only), ctx.key)
        self._add(w.name, "fairness_s", time.monotonic() - t0)
        verdicts = reply.verdicts if isinstance(reply, P.FairnessReply) else None
        if not only:
            self._verdicts[w.name] = verdicts
        return verdicts

    def _timed_profile(self, name: str) -> int:
        """A timed call's value profile: one of the workload's fair ones, drawn in secret."""
        return plan.timed_profile(self._fair.get(name, (plan.NORMAL,)), self._rng)

    def _named(self, failed: judge.Failure | None, w: Any, profile: str) -> judge.Failure | None:
        """A round's failure, its message naming the value profile and, at a held-out shape, the sizes."""
        if failed is None:
            return None
        public = heldout.public_of(w)
        pw = next((x for x in self.t.workloads if x.name == public), None) if public else None
        return dataclasses.replace(failed, message=plan.with_profile(failed.message, profile, w, pw))

    def _lowered(self, w: Any, rep: P.CallReport) -> None:
        """A forward that reached a TileLang kernel on a machine that can only lower it: LOWERED (not the
        candidate's outcome), unless Triton kernels ran first (a mixed forward: refused, see :meth:`_mixed`)."""
        from harness.diagnose.lint import lint_cuda_source

        self._lap(w.name, "correctness_s")
        if rep.triton_launches:
            self._record(w, Status.INVALID_CANDIDATE, error={"type": "MixedDsl", "message": (
                f"the forward launched {rep.triton_launches} Triton kernel(s) and then a TileLang one, which this "
                f"machine can only lower: {MIXED_ON_CPU}")})
            return
        sources = list(rep.lowered_sources or ())
        findings = tuple(f.to_dict() for src in sources for f in lint_cuda_source(src))
        digest = hashlib.sha256("".join(sources).encode()).hexdigest()[:16]
        self._record(w, Status.LOWERED, warnings=(f"lowered {len(sources)} TileLang kernel(s) to CUDA source (sha256 "
                                                  f"{digest}); not executed: no GPU",), extra_diag=findings)

