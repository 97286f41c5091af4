"""One candidate's evaluation: the parent's side of the conversation with its worker and the checker.

Per workload (messages in :mod:`harness.execute.wire.protocol`)::

    correctness   (GPU shared with up to --check-slots others)
        R rounds:   worker Call(seed_r, transform r)  ->  Handoff(outputs + inputs)  ->  checker Compare
        profiler:   worker Kernels  ->  attribution against the library's kernels (checker LibKernels)
    timing        (GPU exclusive; one checker process leased for the whole phase)
        W + S calls, alternating  worker Call(s_i, t_i)  /  checker LibSample(s_i, t_i)    fresh inputs each
        at secret positions:      worker Handoff  ->  checker Verify against the library's output
        B batches per side:       Batch/LibBatch (inputs, untimed), then RunBatch/RunLibBatch (the parent's clock)
                                  one call per batch chosen afterwards: Handoff -> Verify
        profiler:   worker Kernels  ->  attribution
    after the worker has exited: a quiet re-measurement of the library where needed (contention check)

Everything the worker says is a claim; what this module scores is decided by
:mod:`harness.score.judge`, :mod:`harness.score.clock` and
:mod:`harness.score.attribution` from the claims and the trusted facts.
Seeds, transforms and check positions come from a generator seeded with the
run's secret base seed and the job: the worker learns each call's seed only
with that call, and never which calls are checked.

Size (about 580 lines): one candidate's state machine (start, compile, workloads, timing, verdict, record) reads
top to bottom in one place; the parts with their own logic live beside it: worker_link.py (the channel, the stop
around every read, the confinement check), correctness_rounds.py (a workload's rounds), timing_phase.py,
checker_client.py, memory.py; the decisions are in harness/score.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import os
import random
import shutil
import statistics
import time
from pathlib import Path
from typing import Any, Iterator

from harness.execute.parent import correctness_plan as plan
from harness.execute.parent.checker_client import CheckerDied
from harness.execute.wire import protocol as P
from harness.execute.wire.channel import ChannelError, Endpoint, send_line
from harness.execute.worker.rules.trusted_thread import EXIT_TRUSTED_THREAD
from harness.execute.shared.inputs import round_seed
from harness.execute.parent.memory import estimate
from harness.execute.parent.children import kill_group, signame, wait_briefly
from harness.execute.parent.process import gpu_probe, make_scratch, run_tag, spawn_worker
from harness.execute.parent.scheduler import DeviceUnhealthy
from harness.execute.parent.task import DeviceContext, Task
from harness.execute.parent.timing_phase import TimingPhase, stats
from harness.execute.parent.correctness_rounds import MIXED_ON_CPU, CorrectnessRounds, WorkloadDecided
from harness.execute.parent.worker_link import (ChannelTampered, Unstoppable, WorkerDied, WorkerLink,
                                                WorkerTimeout)
from harness.measure.timing import TimingConfig, confirm_side_work
from harness.records import (CorrectnessStats, ErrorInfo, JobResult, KernelAttribution, Status, TimingStats,
                             TrustedTiming, Verification)
from harness.results.ids import job_id, now
from harness.score import attribution as attr
from harness.score import judge
from harness.score.clock import BASE_TOLERANCE, CPU_TOLERANCE, judge_clock

NOISY_IQR = 0.10


CHECKER_FAILED = "the trusted checker failed while this candidate lived"
"""The reason a task is run again alone after its checker died; a second failure in that run is the candidate's."""


class RetryAlone(Exception):
    """The candidate failed in a way its neighbours on the GPU may have caused: run it again alone."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class Session(WorkerLink, CorrectnessRounds):
    """Runs one task in one worker process and turns facts into records."""

    def __init__(self, task: Task, dev: DeviceContext):
        self.t, self.dev, self.o = task, dev, dev.opts
        self.c, self.p = task.candidate, task.problem
        self.cuda = self.o.device == "cuda"
        self.env = dev.env
        self.results: dict[str, JobResult] = {}
        self.lock_held = ""
        self.reserved = 0
        self.need = 0
        self._memory_asked = False
        self.timed: list[tuple[Any, P.Context, float, float]] = []
        self._clock = time.monotonic()
        self._phases: dict[str, dict[str, float]] = {"*": {}}
        self._rng = random.Random(hashlib.sha256(f"{self.o.base_seed}|{self.c.sha256}|{self.c.rel_path}".encode())
                                  .digest())
        self._fair: dict[str, tuple[int, ...]] = {}
        """Per workload, the value profiles found fair (harness.execute.parent.correctness_plan)."""
        self._verdicts: dict[str, tuple | None] = {}
        """Per public workload, the checker's fairness verdicts (None: the probe failed)."""
        self._probe: Any = None
        self._shared_when_failed = False
        self._building: int | None = None
        """The open "build" interval of this session's worker (:mod:`harness.execute.parent.activity`), or None."""
        self._channel: dict[int, int] = {}
        """The parent's pipe inodes -> the worker's descriptor on each (from its Ready), checked at each freeze."""

    # ------------------------------------------------------------------ records
    def _record(self, w: Any, status: Status, *, error: dict | None = None, correctness: CorrectnessStats | None = None,
                timing: TimingStats | None = None, library_timing: TimingStats | None = None, screening: Any = None,
                warnings: tuple[str, ...] = (), extra_diag: tuple[dict, ...] = (), evidence: dict | None = None,
                trusted: TrustedTiming | None = None, kernels: KernelAttribution | None = None,
                verification: Verification | None = None) -> None:
        if w.name in self.results:
            return
        err = ErrorInfo(error.get("type", "Error"), error.get("message", ""), error.get("traceback_tail", "")) \
            if error is not None else None
        keep_measured = status in (Status.PASSED, Status.REWARD_HACK)
        self.results[w.name] = JobResult(
            job_id=job_id(self.c, self.p, w, self.env, mode=self.t.mode, baseline=self.o.baseline),
            run_id=self.dev.run_id, candidate=self.c.rel_path, candidate_sha256=self.c.sha256,
            generator=self.c.generator, generator_version=self.c.generator_version, problem_id=self.p.id,
            category=self.p.category, workload=w.name, dtype=w.dtype, dsl=self.c.dsl, status=status, flops=w.flops,
            min_bytes=w.min_bytes, env=self.env, created_at=now(), error=err, correctness=correctness,
            timing=timing if keep_measured else None, library_timing=library_timing if keep_measured else None,
            screening=screening if keep_measured else None, diagnostics=self.t.diagnostics + extra_diag,
            warnings=self.t.notes + tuple(warnings), problem_version=self.p.version, allow_tf32=w.allow_tf32, base_seed=self.o.base_seed,
            params=dict(w.params), secret=bool(getattr(w, "secret", False)), mode=self.t.mode,
            baseline=self.o.baseline, trusted_timing=trusted if keep_measured else None,
            kernels=kernels if keep_measured else None, verification=verification if keep_measured else None,
            evidence=(evidence or {"mechanism": "unspecified"}) if status is Status.REWARD_HACK else None,
            attempts=self.t.attempt,
        )

    def _fail(self, w: Any, f: judge.Failure, **kw: Any) -> None:
        if f.retry_alone and not self.t.alone and self.cuda:
            raise RetryAlone(f.message)
        if f.retry_alone and self.cuda and f.status is Status.HARNESS_ERROR:
            # the harness's own side (reference, library, verification) ran out of memory with the device to itself
            f = judge.Failure(Status.TOO_LARGE, f"{f.message} -- with the device to itself (estimated peak "
                                                f"{self.need / 2**30:.1f} GiB): the workload is too large for the "
                                                "harness on this GPU; run it with smaller sizes (--set "
                                                "PROBLEM:NAME=VALUE) or on a larger GPU")
        self._record(w, f.status, error=f.error, evidence=f.evidence or None, **kw)

    def _unfinished(self, error: dict) -> None:
        """A worker that ends before the protocol's last message loses the records it had earned: a workload is
        passed only once the worker has answered every question about it (a forged report followed by an exit
        must not stand)."""
        for name, r in list(self.results.items()):
            if r.status is Status.PASSED:
                del self.results[name]

    def _fail_rest(self, status: Status, error: dict, evidence: dict | None = None) -> None:
        for w in self.t.workloads:
            self._record(w, status, error=error, evidence=evidence)

    def _lap(self, key: str, phase: str) -> None:
        t = time.monotonic()
        self._phases.setdefault(key, {})[phase] = round(t - self._clock, 4)
        self._clock = t

    def _add(self, key: str, phase: str, seconds: object) -> None:
        if isinstance(seconds, (int, float)) and 0 <= seconds < 1e6:
            ph = self._phases.setdefault(key, {})
            ph[phase] = round(ph.get(phase, 0.0) + float(seconds), 4)

    # ------------------------------------------------------------------ device admission
    def _acquire(self, mode: str) -> None:
        if self.t.alone:
            mode = "exclusive"
        if self.lock_held == mode:
            return
        self._release()
        (self.dev.gate.acquire_shared if mode == "shared" else self.dev.gate.acquire_exclusive)()
        self.lock_held = mode

    def _release(self) -> None:
        held, self.lock_held = self.lock_held, ""
        if held == "shared":
            self.dev.gate.release_shared()
        elif held == "exclusive":
            self.dev.gate.release_exclusive()

    @contextlib.contextmanager
    def _timed_cores(self, *pids: int) -> Iterator[None]:
        """The cores kept for this device's timed pair, for ``pids`` while the block runs
        (:mod:`harness.execute.parent.cpus`; nothing without a plan)."""
        plan = self.dev.cpus
        if plan is None:
            yield
            return
        for pid in pids:
            plan.pin(pid)
        try:
            yield
        finally:
            for pid in pids:
                plan.confine(pid)

    # ------------------------------------------------------------------ the process
    def run(self) -> list[JobResult]:
        self._clock = time.monotonic()
        # held-out shapes before their public workload; none for a TileLang candidate on the CPU path (only lowered)
        shapes = self.o.heldout_shapes if self.cuda or self.c.dsl != "tilelang" else 0
        self.t = dataclasses.replace(self.t, workloads=plan.with_heldout(self.t.workloads, plan.heldout_workloads(
            self.p, self.t.workloads, self.o.base_seed, shapes, self.o.device)))
        self.need = max(estimate(w).total for w in self.t.workloads)
        try:
            if self.t.alone:  # a retry after an out-of-memory: the device is drained before the model is even built
                self._reserve_memory()
            return self._run()
        finally:
            self.dev.memory.release(self.reserved)
            self.reserved = 0

    def _mixed(self) -> bool:
        """On the CPU path, a file that defines both Triton and TileLang kernels is refused (INVALID_CANDIDATE)
        before it runs: its TileLang kernels would only be lowered, leaving its Triton ones unjudged, and a wrong
        Triton kernel with a one-line TileLang decoy would otherwise be LOWERED, which pays nothing either way.
        Returns whether it was refused."""
        if self.cuda:
            return False
        from harness.candidates.dsl import scan_dsl

        kinds = scan_dsl(self.t.source.decode("utf-8", "replace")).kernel_dsls
        if {"triton", "tilelang"} <= set(kinds):
            self._fail_rest(Status.INVALID_CANDIDATE, {"type": "MixedDsl", "message": (
                f"the file defines both Triton and TileLang kernels: {MIXED_ON_CPU}")})
            return True
        return False

    def _reserve_memory(self) -> None:
        """Reserve the job's device memory, once, when the worker first asks for the device: after the candidate
        imported and built, so one that fails there never waits for memory (or, if oversized, for the whole
        device)."""
        if self._memory_asked:
            return
        self._memory_asked = True
        if not self.dev.memory.fits(self.need) and not self.t.alone:
            # more than the device has by the estimate: not refused on an estimate, run alone on the whole device
            self.t = dataclasses.replace(self.t, alone=True, reason=(
                f"its estimated peak ({self.need / 2**30:.1f} GiB, worker and checker) is more than the device's "
                f"{max(0, self.dev.memory.capacity or 0) / 2**30:.1f} GiB usable beside other jobs"))
        self.reserved = self.dev.memory.reserve_all() if self.t.alone else self.dev.memory.reserve(self.need)

    def _run(self) -> list[JobResult]:
        if self._mixed():
            return [self.results[w.name] for w in self.t.workloads]
        worker = self.dev.pool.take() if self.dev.pool is not None else None
        if worker is None:
            root = Path(self.o.scratch_root or os.environ.get("TMPDIR", "/tmp")).resolve()
            worker = spawn_worker(make_scratch(root, f"{run_tag(self.dev.run_id)}-{self.c.sha256[:12]}"), self.o.device,
                                  self.dev.gpu, threads=self.o.cpu_threads, cpus=self.dev.cpus,
                                  fork=self.o.spawn == "fork", isolation=self.o.isolation_level)
        self.worker = worker
        self.worker_pid = worker.proc.pid
        for k, v in (worker.warm_s or {}).items():
            self._add("*", f"warm_{k}", v)
        cand_file = worker.scratch / self.c.path.name
        cand_file.write_bytes(self.t.source)
        self.handoff_dir = worker.scratch / "handoff"
        self.finished = False
        self.chan = Endpoint(worker.c2p_r, worker.p2c_w)
        self.err_buf = worker.err_buf
        retry: RetryAlone | None = None
        try:
            send_line(worker.p2c_w, P.encode(self._spec(cand_file, worker.scratch)))
            self._converse()
        except RetryAlone as exc:
            retry = exc
        except WorkerTimeout as exc:
            kill_group(worker.proc)
            error = {"type": "Timeout", "message": str(exc), "traceback_tail": self.err_buf.text()[-2000:]}
            self._unfinished(error)
            self._fail_rest(Status.TIMEOUT, error)
        except Unstoppable as exc:
            kill_group(worker.proc)
            self.results.clear()  # a worker that cannot be stopped for a read has earned nothing
            self._fail_rest(Status.REWARD_HACK, {"type": "Unstoppable", "message": str(exc),
                                                 "traceback_tail": self.err_buf.text()[-2000:]},
                            {"mechanism": "freeze", "detail": str(exc)[:300]})
        except ChannelTampered as exc:
            kill_group(worker.proc)
            self.results.clear()  # every report came through the relay: none is the worker's
            self._fail_rest(Status.REWARD_HACK, {"type": "ChannelRelay", "message": str(exc),
                                                 "traceback_tail": self.err_buf.text()[-2000:]},
                            {"mechanism": "channel", "detail": str(exc)[:300]})
        except (ChannelError, P.ProtocolError) as exc:
            kill_group(worker.proc)
            self.results.clear()  # a worker that forges or garbles one message has earned nothing
            self._fail_rest(Status.REWARD_HACK, {"type": "ProtocolViolation",
                                                 "message": f"result channel violated: {exc}",
                                                 "traceback_tail": self.err_buf.text()[-2000:]},
                            {"mechanism": "channel", "detail": str(exc)[:300]})
        except (WorkerDied, BrokenPipeError, OSError) as exc:
            code = wait_briefly(worker.proc)
            how = f"killed by {signame(-code)}" if code is not None and code < 0 else f"exit code {code}"
            if code == EXIT_TRUSTED_THREAD:
                line = next((ln for ln in reversed(self.err_buf.text().splitlines()) if "trusted thread" in ln), "")
                self.results.clear()  # any of its results may have been fixed up on that thread
                self._fail_rest(Status.REWARD_HACK, {"type": "TrustedThread", "message": line or
                                                     "candidate code ran on the worker's trusted thread",
                                                     "traceback_tail": self.err_buf.text()[-2000:]},
                                {"mechanism": "trusted_thread", "detail": line[:300]})
            elif self.lock_held == "shared" and not self.t.alone and self.cuda:
                retry = RetryAlone(f"worker ended unexpectedly ({how}) while sharing the GPU")
            else:
                error = {"type": type(exc).__name__, "message": f"worker ended unexpectedly ({how}): {exc}",
                         "traceback_tail": self.err_buf.text()[-3000:]}
                self._unfinished(error)
                self._fail_rest(Status.CRASHED, error)
        except CheckerDied as exc:
            kill_group(worker.proc)
            if not (self.t.reason or "").startswith(CHECKER_FAILED):
                # the trusted side failed while this candidate lived: investigated, with a fresh checker, alone
                retry = RetryAlone(f"{CHECKER_FAILED}: {str(exc)[:300]}")
            else:
                self.results.clear()
                self._fail_rest(Status.RUNTIME_ERROR, {"type": "TrustedSideFailure", "message": (
                    f"the trusted checker failed again while this candidate was evaluated alone, with a fresh "
                    f"checker ({str(exc)[:300]}; the first time: {self.t.reason[len(CHECKER_FAILED) + 2:][:300]}): "
                    "charged to the candidate, whose outputs the checker was reading")})
        finally:
            self.dev.activity.end(self._building)
            self._building = None
            exiting = self.dev.activity.begin("exit")
            kill_group(worker.proc)
            self.dev.activity.end(exiting)
            try:
                self._probe_after_fault()
            finally:
                self._release()
            for t in worker.drains:
                t.join(timeout=5)
            worker.close_fds()
            if not self.o.keep_scratch:
                shutil.rmtree(worker.scratch, ignore_errors=True)
        if retry is not None:
            raise retry
        TimingPhase(self).quiet_checks()
        self._fail_rest(Status.HARNESS_ERROR, {"type": "NoReport", "message": "the worker reported nothing for this workload"})
        shared = self._phases["*"]
        records = [self.results[w.name].replace(phase_s={**shared, **self._phases.get(w.name, {})})
                   for w in self.t.workloads]
        records = plan.merge_heldout(records, self.t.workloads, gate=self.o.heldout_gate)
        if self.t.attempt > 1:
            records = [r.replace(warnings=r.warnings + (f"run again alone (attempt {self.t.attempt}) after: "
                                                       f"{self.t.reason}",)) for r in records]
        elif self.t.alone and self.t.reason:
            records = [r.replace(warnings=r.warnings + (f"run alone: {self.t.reason}",)) for r in records]
        if self._probe is not None:
            note = (f"GPU {self.dev.gpu or 0} health probe after this fault: {self._probe.state} in "
                    f"{self._probe.seconds:.1f} s" + (f" ({self._probe.detail})" if self._probe.detail else ""))
            records = [r.replace(warnings=r.warnings + (note,)) for r in records]
            if self._probe.state == "broken":
                raise DeviceUnhealthy(f"GPU {self.dev.gpu} failed its health probe after {self.c.rel_path}: "
                                      f"{self._probe.detail}", records)
        return records

    def _probe_after_fault(self) -> None:
        """After a crash, a kill or a CUDA error: is the GPU broken, or only full? (probed with the GPU held)"""
        faulted = any(r.status in (Status.CRASHED, Status.TIMEOUT, Status.RUNTIME_ERROR) for r in self.results.values())
        if not faulted or not self.cuda:
            return
        self._acquire("exclusive")
        probe = gpu_probe(self.dev.gpu or 0)
        for _ in range(3):  # full: the neighbours' memory is leaving; never retire a GPU for that
            if probe.state != "full":
                break
            time.sleep(5)
            probe = gpu_probe(self.dev.gpu or 0)
        self._probe = probe

    def _spec(self, cand_file: Path, scratch: Path) -> P.Spec:
        return P.Spec(
            candidate_path=str(cand_file), problem_path=str(self.p.path), device=self.o.device,
            handoff_dir=str(scratch / "handoff"), dsl=self.c.dsl, timing=self.o.timing.to_dict(),
            precompile=self.o.precompile, isolation=self.o.isolation_level, max_file_bytes=self.o.max_file_bytes,
            gpu_memory_fraction=self.o.gpu_memory_fraction, handoff=self.o.handoff, mode=self.t.mode,
            in_place=self.p.in_place, input_transform=self.p.input_transform,
            library_aten=tuple(self.p.library_aten), cpu_threads=self.o.cpu_threads,
            workloads=tuple(P.WorkloadSpec(name=w.name, params=dict(w.params), dtype=w.dtype, allow_tf32=w.allow_tf32,
                                           model_seed=round_seed(self.o.base_seed, w.name, -1),
                                           warm_seed=round_seed(self.o.base_seed, w.name, -2))
                            for w in self.t.workloads))

    # ------------------------------------------------------------------ conversation
    def _converse(self) -> None:
        o = self.o
        msg = self._recv(o.compile_timeout_s, "starting the worker", P.Ready, P.Fatal)
        if isinstance(msg, P.Fatal):
            self._fail_rest(Status(msg.status), dataclasses.asdict(msg.error))
            return
        if not self._confined(msg):
            return
        if self.dev.cpus is not None and self.worker.confined_pid() is not None:
            self.dev.cpus.confine(self.worker.confined_pid())  # forked by its keeper, perhaps before the keeper was
        self.profiler = msg.profiler
        self._lap("*", "startup_s")
        # the candidate's import, its models and its dry forward run on the GPU outside the gate: logged
        # (harness.execute.parent.activity) until it first asks for the device
        self._building = self.dev.activity.begin("build")
        msg = self._recv(o.compile_timeout_s, "importing the candidate", P.Imported, P.Fatal)
        self._lap("*", "import_s")
        if isinstance(msg, P.Fatal):
            f = judge.judge_tamper(msg.audit_blocked, ())
            if f is not None:
                self._fail_rest(f.status, f.error, f.evidence)
            else:
                self._fail_rest(Status(msg.status), dataclasses.asdict(msg.error))
            return
        f = judge.judge_tamper(msg.audit_blocked, msg.patched)
        if f is not None:
            self._fail_rest(f.status, f.error, f.evidence)
            return
        by_name = {w.name: w for w in self.t.workloads}
        for _ in self.t.workloads:
            if self._building is None:
                self._building = self.dev.activity.begin("build")
            msg = self._recv(o.compile_timeout_s, "building the model", P.WantDevice, P.WorkloadFatal)
            self.dev.activity.end(self._building)
            self._building = None
            if isinstance(msg, P.WorkloadFatal):
                w = by_name[msg.workload]
                if msg.error.type == "OutOfMemoryError" and self.cuda and not self.t.alone:
                    raise RetryAlone(f"building the model ran out of GPU memory: {msg.error.message[:200]}")
                self._record(w, Status(msg.status), error=dataclasses.asdict(msg.error))
                continue
            w = by_name.get(msg.workload)
            if w is None:
                raise P.ProtocolError(f"want_device for unknown workload {msg.workload[:60]!r}")
            self._lap(w.name, "build_s")
            self._reserve_memory()
            self._acquire("exclusive" if msg.exclusive_first_round else "shared")
            self._lap(w.name, "wait_s")
            try:
                self._send(P.Go(workload=w.name))
                self._workload(w, first_exclusive=msg.exclusive_first_round)
            except WorkloadDecided:
                pass
            finally:
                self._release()
            self._send(P.EndWorkload(workload=w.name))
            self._recv(o.round_timeout_s, "ending the workload", P.WorkloadDone)
        self._send(P.Finish())
        self._recv(o.round_timeout_s, "finishing", P.Done)
        self.finished = True

    # ------------------------------------------------------------------ attribution
    def _library_kernels(self, ctx: P.Context) -> dict[str, float] | None:
        """The library op's kernels for this workload, their GPU microseconds per call by name, profiled in the
        checker (trusted); None without a kernel profiler there."""
        with self.dev.lock:
            known = self.dev.library_kernels.get(ctx.key)
        if known is not None:
            return known
        reply, _ = self.dev.checkers.request(P.LibKernels(ctx=ctx), ctx.key)
        if isinstance(reply, P.ErrorReply) or reply.profiler != "cupti":
            return None
        got: dict[str, float] = {}
        for r in reply.rows:
            got[r.name] = got.get(r.name, 0.0) + float(r.inside_us)
        with self.dev.lock:
            self.dev.library_kernels[ctx.key] = got
        return got

    def _attribution(self, w: Any, ctx: P.Context, calls: int) -> KernelAttribution | judge.Failure:
        """The phase's end: tampering facts, then the profiler's kernel table for its calls, judged."""
        self._send(P.Kernels())
        rep = self._recv(self.o.round_timeout_s, "reading the kernel profile", P.KernelReport)
        failed = judge.judge_tamper((), rep.patched, self._children())
        if failed is not None:
            return failed
        if self.profiler != "cupti":
            return KernelAttribution(method="launch-counter", dsl_share=None)
        failed = judge.judge_markers(rep.markers, rep.calls)
        if failed is None and rep.calls != calls:
            failed = judge.hack(f"the profiler window reports {rep.calls} calls, the parent made {calls}",
                                "profiler_calls", reported=rep.calls, made=calls)
        if failed is not None:
            return failed
        if not judge.markers_usable(rep.markers):
            return KernelAttribution(method="launch-counter", dsl_share=None)
        library_us = self._library_kernels(ctx) or {}
        rows = [attr.Row(r.name, r.inside_us, r.count) for r in rep.rows]
        finishing = attr.finishes_partials(rows, calls, library_us, judge.dry_library_shares(
            rep.dry_aten_elements, rep.dry_input_elements, tuple(self.p.library_aten)))
        att = attr.attribute(rows, calls, set(library_us), set(rep.dsl_names), finishing=finishing)
        att = dataclasses.replace(att, side_us=rep.side_us)
        reason = attr.fallback_reason(att)
        if reason is not None:
            return judge.hack(reason, "library_fallback", dsl_share=att.dsl_share,
                              kernels=[dataclasses.asdict(k) for k in att.kernels[:6]])
        return att

    # ------------------------------------------------------------------ timing
    def _judge_clock(self, cand_ms: list[float], lib_ms: list[float], cand_enq: list[float], info: dict):
        """The clock decision on the events' medians against the batches in ``info``
        (:func:`harness.score.clock.judge_clock`)."""
        return judge_clock(event_kernel_ms=statistics.median(cand_ms), event_library_ms=statistics.median(lib_ms),
                           enqueue_us=statistics.median(cand_enq) if cand_enq else 0.0,
                           trusted_kernel_ms=info["T_c"], trusted_library_ms=info["T_l"],
                           kernel_spread=info["spread"], n=info["n"],
                           base_tolerance=BASE_TOLERANCE if self.cuda else CPU_TOLERANCE,
                           host_bound_possible=self.cuda)

    def _timing(self, w: Any, ctx: P.Context, corr: CorrectnessStats, warnings: list[str], lib_excess: float,
                kernels: KernelAttribution | None) -> None:
        o = self.o
        self._acquire("exclusive")  # nothing else runs on this GPU while it is timed
        self._lap(w.name, "timing_wait_s")
        cfg: TimingConfig = o.timing
        worker_pid = self.worker.confined_pid() or self.worker_pid
        with self.dev.checkers.lease(ctx.key) as checker, self._timed_cores(worker_pid, checker.proc.pid):
            phase = TimingPhase(self)
            t_part = time.monotonic()
            result, resampled = phase.sample_settled(w, ctx, checker, cfg, lib_excess)
            self._add(w.name, "samples_s", time.monotonic() - t_part)
            if resampled:
                warnings.append(resampled)
            if isinstance(result, judge.Failure):
                self._lap(w.name, "timing_s")
                self._fail(w, result, correctness=corr)
                raise WorkloadDecided
            cand_ms, lib_ms, cand_enq, checks, timed, windows_note, stream_windows = result
            t_part = time.monotonic()
            kernels_t = self._attribution(w, ctx, timed)
            self._add(w.name, "kernels_s", time.monotonic() - t_part)
            if isinstance(kernels_t, judge.Failure):
                self._lap(w.name, "timing_s")
                self._fail(w, kernels_t, correctness=corr)
                raise WorkloadDecided
            cand_ms, lib_ms, windows_note = confirm_side_work(cand_ms, lib_ms, windows_note, stream_windows,
                                                              kernels_t.side_us)
            if windows_note:
                warnings.append(windows_note)
            t_part = time.monotonic()
            trusted = phase.trusted_clock(w, ctx, checker, cand_ms, lib_ms, cand_enq, lib_excess)
            self._add(w.name, "batches_s", time.monotonic() - t_part)
            self._lap(w.name, "timing_s")
        if isinstance(trusted, judge.Failure):
            self._fail(w, trusted, correctness=corr)
            raise WorkloadDecided
        decision, clock_info, batch_checks = trusted
        timer = "cuda_event" if self.cuda else "host_perf_counter"
        kt, lt = stats(cand_ms, timer), stats(lib_ms, timer)
        tt = TrustedTiming(calls_per_batch=clock_info["n"], kernel_ms_per_call=clock_info["T_c"],
                           library_ms_per_call=clock_info["T_l"], round_trip_ms=statistics.median(clock_info["W_g"]),
                           kernel_batch_ms=tuple(clock_info["W_c"]), library_batch_ms=tuple(clock_info["W_l"]),
                           round_trip_batch_ms=tuple(clock_info["W_g"]),
                           library_round_trip_batch_ms=tuple(clock_info["W_gl"]), source=decision.source,
                           note=decision.note)
        verification = Verification(timed_calls=timed, checked_calls=checks + batch_checks, mismatches=0)
        if decision.hack is not None and not self.cuda:
            # nothing on the CPU path is scored by time (no E_lib, U_roof, S or speed reward), so a disagreement
            # there forges nothing; two loaded cores running the interpreter disagree honestly (a reference
            # LayerNorm measured 2.7x apart on the quick start). Say it, judge the correctness.
            warnings.append(f"not judged on the CPU path (no time is scored there): {decision.hack}")
        elif decision.hack is not None:
            self._record(w, Status.REWARD_HACK, error={"type": "ClockMismatch", "message": decision.hack},
                         correctness=corr, timing=kt, library_timing=lt, trusted=tt, kernels=kernels_t or kernels,
                         verification=verification, evidence={"mechanism": "trusted_clock", **decision.evidence})
            return
        if decision.source == "trusted_batch":
            warnings.append(decision.note)
            n = clock_info["n"]
            kt = stats([max(0.0, b - g) / n for b, g in zip(clock_info["W_c"], clock_info["W_g"])], "parent_wall_clock")
            lt = stats([max(0.0, b - g) / n for b, g in zip(clock_info["W_l"], clock_info["W_gl"])], "parent_wall_clock")
        for label, st in (("kernel", kt), ("library", lt)):
            if st.relative_iqr > NOISY_IQR:
                warnings.append(f"{label} timing is noisy: IQR/median = {st.relative_iqr:.0%} (> {NOISY_IQR:.0%})")
        screen = self.dev.screen_for(self.p) if (self.dev.screen_for is not None and self.cuda) else None
        screening = screen(w, kt, lt) if screen is not None else None
        if not self.cuda:
            warnings.append("CPU path: correctness and the protocol were checked; CPU timings are not GPU "
                            "performance, so no E_lib/U_roof verdict is given")
        status, err, evidence = Status.PASSED, None, None
        if screening is not None and screening.verdict.value == "reward_hack":
            status, err = Status.REWARD_HACK, {"type": "BelowPhysicalMinimum", "message": screening.reason}
            evidence = {"mechanism": "below_floor", "u_roof": screening.u_roof, "t_floor_ms": screening.t_floor_ms}
        self._record(w, status, error=err, correctness=corr, timing=kt, library_timing=lt, screening=screening,
                     warnings=tuple(warnings), trusted=tt, kernels=kernels_t or kernels, verification=verification,
                     evidence=evidence)
        lib_events = stats(lib_ms, timer)  # the quiet re-measurement is of events: compare like with like
        self.timed.append((w, ctx, lib_events.median_ms, lib_events.relative_iqr))
