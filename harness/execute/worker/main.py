"""The candidate worker: the only process that imports candidate code.

Started by the parent (``python -m harness.execute.worker.main --in-fd R --out-fd W``), or forked by the run's
fork server (:mod:`harness.execute.forkserver.server`, which has imported torch and Triton but never holds
anything of a run) and entering :func:`main` the same way, with stdin closed and stdout/stderr drained into
capped buffers. Before anything of a candidate it crosses the OS boundary (:func:`harness.execute.boundary.enter.enter`):
from then on it lives in namespaces of its own, under seccomp and Landlock, with no privileges, its keeper
outside. The conversation is defined in :mod:`harness.execute.wire.protocol`; this module carries it out.

Two threads (:mod:`harness.execute.shared.threads`): the main thread holds the channel, the timer, the profiler
and the kept outputs; every line of candidate code (import, ``ModelNew(...)``, ``forward``) runs on the
candidate's thread.

The worker reports *facts* and decides no status, and none of what it reports is believed as such: each call's
outputs are committed with its report and read by the trusted checker while this process tree is stopped, the
library is timed in the checker, and the candidate's own timings are bounded by the parent's clock. Every
call's inputs are made here from a seed the parent sends with that call; the run's base seed never leaves the
parent, and no message says which calls are verified.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from harness.execute.wire import protocol as P

MAX_TEXT = 4000
COMPONENTS = ("spec", "chan", "confinement", "torch", "guards", "device", "cuda", "forward", "run_all", "reader",
              "not_plain", "flatten", "make_inputs", "make_reference_model", "load_module", "attribute", "poison",
              "poison_bytes", "perf", "profiler", "timer", "cthread", "threads_ok", "roots", "audit", "tamper")
"""The worker's attributes that never change once its candidate exists (:meth:`TamperCheck.watch`)."""
CACHE_DIRS = ("triton-cache", "tilelang-cache", "tvm-cache")
"""Scratch sub-folders whose files are the compilers' (not candidate code) for the audit hooks."""


def _is_cuda_error(exc: BaseException) -> bool:
    """A device fault (illegal address, launch failure) poisons the CUDA context for good."""
    text = f"{type(exc).__name__}: {exc}"
    return ("CUDA error" in text or "AcceleratorError" in text or "illegal memory access" in text) and not _is_oom(exc)


def _is_oom(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return "OutOfMemoryError" in text or "out of memory" in text.lower()


def _import_candidate(path: str) -> Any:
    spec = importlib.util.spec_from_file_location("candidate", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["candidate"] = module
    spec.loader.exec_module(module)
    return module


def _build_model(cand: Any, module: Any, dtype: str, device: str, seed: int, mode: str, ref_model: Any) -> Any:
    """``ModelNew(*get_init_inputs())`` with the reference's weights, on the candidate's thread."""
    import torch

    from harness.execute.shared.inputs import copy_matching_state

    torch.manual_seed(seed)
    with torch.device(device):
        model = cand.ModelNew(*module.get_init_inputs())
    model = model.to(device=device, dtype=getattr(torch, dtype))
    model = model.train() if mode == "train" else model.eval()
    copy_matching_state(ref_model, model)
    return model


def _recorded_forward(model: Any, inputs: list, seed: int | None, recorder: Any) -> Any:
    """CPU path: a forward under the aten recorder (dispatch modes are per thread: entered on this one)."""
    from harness.execute.shared.threads import forward

    with recorder:
        return forward(model, inputs, seed)


class Worker:
    """The trusted loop of one candidate (main thread); lives only in :func:`main`'s frame."""

    def __init__(self, spec: P.Spec, chan: Any, warm: dict, confinement: Any):
        import torch

        from harness.execute.worker import guards
        from harness.execute.shared.threads import CandidateThread, forward, run_all
        from harness.execute.worker.outputs import NotPlain, OutputReader
        from harness.execute.shared.inputs import (flatten_outputs, make_inputs, make_reference_model, poison_allocator,
                                            poison_bytes)
        from harness.execute.shared.profiling import attribute
        from harness.measure.timing import DeviceTimer, TimingConfig
        from harness.problems.loader import load_module

        self.spec, self.chan, self.confinement = spec, chan, confinement
        self.torch, self.guards = torch, guards
        self.device = spec.device
        self.cuda = spec.device.startswith("cuda")
        # everything the loop calls, captured before any candidate code exists
        self.forward, self.run_all, self.flatten = forward, run_all, flatten_outputs
        self.reader, self.not_plain = OutputReader(torch), NotPlain
        self.make_inputs, self.make_reference_model, self.load_module = make_inputs, make_reference_model, load_module
        self.attribute, self.poison, self.poison_bytes = attribute, poison_allocator, poison_bytes
        self.perf = time.perf_counter
        self.profiler = warm["profiler"]
        if self.cuda:
            frac = float(spec.gpu_memory_fraction or 0)
            if 0 < frac < 1:
                # the caching allocator refuses to grow past this share of the GPU: one candidate
                # cannot starve the others (or the checker) sharing the device
                torch.cuda.set_per_process_memory_fraction(frac, 0)
        if spec.dsl == "tilelang":
            guards.install_tilelang_hooks(execute=self.cuda)
        self.timer = DeviceTimer(self.device, TimingConfig.from_dict(spec.timing).flush_bytes)
        self.cthread = CandidateThread()
        self.kept: dict[int, tuple] = {}
        self.prepared: list[tuple] = []
        self.calls_in_window = 0
        self.dry_record: tuple[dict, int] = ({}, 0)
        """The workload's dry forward under the aten recorder: (input elements per aten op, input elements)."""
        self.threads_ok = {self.cthread.ident} | {t.ident for t in threading.enumerate() if t.name == "kg-lifeline"}
        self.roots = (str(Path(spec.candidate_path).parent) + os.sep,)
        """Where candidate code lives (its file, what it writes beside it): a thread running code from here is its."""

    # ------------------------------------------------------------------ channel
    def send(self, msg: Any) -> None:
        self.chan.send(P.encode(msg))

    def recv(self, *expect: type) -> Any:
        from harness.execute.wire.channel import ChannelClosed

        try:
            raw = self.chan.recv()
        except ChannelClosed:
            raise SystemExit(0) from None  # the parent went away
        return P.decode(raw, expect or None)

    # ------------------------------------------------------------------ life
    def run(self) -> None:
        from harness.execute.worker.rules import audit, trusted_thread
        from harness.execute.worker.rules.tamper import TamperCheck

        scratch = Path(self.spec.candidate_path).parent
        self.audit = audit.install((str(scratch),), exempt=tuple(str(scratch / d) for d in CACHE_DIRS))
        guard = trusted_thread.arm(self.audit)  # this thread: candidate code called here ends the worker
        self.tamper = TamperCheck()
        self.tamper.snapshot()
        self.tamper.watch("worker", self, COMPONENTS)
        self.send(P.Ready(sandbox=self.confinement.describe()[:400], confinement=self.confinement.to_dict(),
                          audit=f"python audit hooks (PEP 578); trusted thread guarded by {guard}",
                          profiler=self.profiler.status, channel_fds=self.chan.fds))
        try:
            cand = self.cthread.run(_import_candidate, self.spec.candidate_path)
            if not hasattr(cand, "ModelNew"):
                return self._fatal("INVALID_CANDIDATE", "MissingModelNew", "the file defines no 'ModelNew' class "
                                   "(KernelBench convention: class ModelNew(nn.Module) with Model's constructor and forward)")
            if not (isinstance(cand.ModelNew, type) and issubclass(cand.ModelNew, self.torch.nn.Module)):
                return self._fatal("INVALID_CANDIDATE", "BadModelNew", "ModelNew must be a subclass of torch.nn.Module")
        except BaseException as exc:  # noqa: BLE001 - any import failure is the candidate's
            self.send(P.Fatal(status="COMPILE_ERROR", error=P.error_from_exception(exc, MAX_TEXT),
                              audit_blocked=self.audit.take()))
            return
        self.send(P.Imported(audit_blocked=self.audit.take(), patched=tuple(self.tamper.changed())))
        for w in self.spec.workloads:
            if self.workload(cand, w) == "stop":
                return
        self.recv(P.Finish)
        self.send(P.Done())

    def _fatal(self, status: str, kind: str, message: str) -> None:
        self.send(P.Fatal(status=status, error=P.Error(kind, message, "")))

    # ------------------------------------------------------------------ one workload
    def workload(self, cand: Any, w: P.WorkloadSpec) -> str:
        torch, spec = self.torch, self.spec
        torch.backends.cuda.matmul.allow_tf32 = bool(w.allow_tf32)
        torch.backends.cudnn.allow_tf32 = bool(w.allow_tf32)
        torch.set_float32_matmul_precision("high" if w.allow_tf32 else "highest")
        module = self.load_module(Path(spec.problem_path), w.params)
        try:
            ref_model = self.make_reference_model(module, w.dtype, self.device, w.model_seed, spec.mode)
            model = self.cthread.run(_build_model, cand, module, w.dtype, self.device, w.model_seed, spec.mode, ref_model)
            del ref_model
        except TypeError as exc:
            self.send(P.WorkloadFatal(workload=w.name, status="INVALID_CANDIDATE", error=P.error_from_exception(exc)))
            return "next"
        except BaseException as exc:  # noqa: BLE001
            self.send(P.WorkloadFatal(workload=w.name, status="RUNTIME_ERROR", error=P.error_from_exception(exc)))
            return "stop" if _is_cuda_error(exc) else "next"
        exclusive = False
        self.dry_record = ({}, 0)
        if spec.precompile and self.cuda:
            # Compile (Triton JIT and every autotune config, TileLang nvcc) before asking for the
            # device, so compiles overlap other candidates' timing. Triton launches are dry here
            # (compile, no launch, no autotune benchmarking: guards.dry_launches). Errors are left
            # to the real calls to report.
            try:
                warm = self.make_inputs(module, w.dtype, self.device, w.warm_seed, 0, spec.input_transform)
                recorder = self.guards.AtenRecorder()  # what the op-level rule needs: the library op's share
                try:
                    with self.guards.dry_launches():
                        self.cthread.run(_recorded_forward, model, warm, None, recorder)
                    self.dry_record = (dict(sorted(recorder.elements.items())[:256]),
                                       sum(x.numel() for x in warm if isinstance(x, torch.Tensor)))
                except self.guards.DryAutotuned:
                    pass  # the dry forward ends at its first autotuned kernel: no complete record
                finally:
                    del warm
                torch.cuda.synchronize()
            except BaseException as exc:  # noqa: BLE001
                if _is_cuda_error(exc):
                    self.send(P.WorkloadFatal(workload=w.name, status="RUNTIME_ERROR",
                                              error=P.error_from_exception(exc)))
                    return "stop"
            exclusive = self.guards.dry_saw_autotune()
        self.send(P.WantDevice(workload=w.name, exclusive_first_round=exclusive))
        self.recv(P.Go)
        self.timer.calibrate()
        self.profiler.window()  # a fresh window: the workload's first call starts it
        self.calls_in_window = 0
        fwd_seed = spec.mode == "train"
        while True:
            msg = self.recv(P.Call, P.CallBlock, P.Batch, P.RunBatch, P.Release, P.Kernels, P.EndWorkload)
            if isinstance(msg, P.Call):
                self.release(msg.release)
                if self.call(model, module, w, msg, fwd_seed) == "stop":
                    return "stop"
            elif isinstance(msg, P.CallBlock):
                self.release(msg.release)
                done = "ok"
                for c in msg.calls:
                    done = self.call(model, module, w, P.Call(call_id=c.call_id, seed=c.seed, transform=c.transform,
                                                              hold_us=msg.hold_us, poison=msg.poison), fwd_seed)
                    if done != "ok":
                        break  # the parent reads reports up to the first one that is not ok
                if done == "stop":
                    return "stop"
            elif isinstance(msg, P.Batch):
                self.prepare_batch(module, w, msg, fwd_seed)
            elif isinstance(msg, P.RunBatch):
                if self.run_batch(model, w, msg) == "stop":
                    return "stop"
            elif isinstance(msg, P.Release):
                self.release(msg.call_ids)
            elif isinstance(msg, P.Kernels):
                self.kernels()
            else:
                self.release(tuple(self.kept))
                del model
                if self.cuda:
                    torch.cuda.synchronize()
                    torch.cuda.empty_cache()
                self.profiler.window()
                self.send(P.WorkloadDone(workload=w.name))
                return "next"

    def call(self, model: Any, module: Any, w: P.WorkloadSpec, msg: P.Call, fwd_seed: bool) -> str:
        """One call and its CallReport: "ok", "failed" (the report says why) or "stop" (a CUDA error: the
        context is lost)."""
        torch, guards, spec = self.torch, self.guards, self.spec
        t_start = time.perf_counter()
        try:
            inputs = self.make_inputs(module, w.dtype, self.device, msg.seed, msg.transform, spec.input_transform)
        except BaseException as exc:  # noqa: BLE001 - e.g. a CUDA error left behind by the candidate
            self.send(P.CallReport(call_id=msg.call_id, ok=False, error=P.error_from_exception(exc),
                                   cuda_error=_is_cuda_error(exc), out_of_memory=_is_oom(exc)))
            return "stop" if _is_cuda_error(exc) else "failed"
        if msg.poison:
            in_bytes = sum(x.numel() * x.element_size() for x in inputs if isinstance(x, torch.Tensor))
            self.poison(self.device, self.poison_bytes(in_bytes))
        prep_us = (time.perf_counter() - t_start) * 1e6
        threads_before = guards.live_threads()
        launches_before, triton_before = guards.COUNTER.total, guards.COUNTER.triton
        seed = msg.seed if fwd_seed else None
        recorder = guards.AtenRecorder() if not self.cuda else None
        if recorder is not None:
            run = lambda: self.cthread.run(_recorded_forward, model, inputs, seed, recorder)  # noqa: E731
        else:
            run = lambda: self.cthread.run(self.forward, model, inputs, seed)  # noqa: E731
        report: dict[str, Any] = {"call_id": msg.call_id}
        try:
            timed = self.timer.timed_call(run, msg.hold_us)
        except guards.LoweredOnly:
            self.send(P.CallReport(call_id=msg.call_id, ok=True, launches=guards.COUNTER.total - launches_before,
                                   triton_launches=guards.COUNTER.triton - triton_before,
                                   lowered_sources=tuple(s[:200_000] for s in guards.COUNTER.lowered_sources)))
            return "ok"
        except BaseException as exc:  # noqa: BLE001
            cuda = _is_cuda_error(exc)
            self.send(P.CallReport(call_id=msg.call_id, ok=False, error=P.error_from_exception(exc), cuda_error=cuda,
                                   out_of_memory=_is_oom(exc), audit_blocked=self.audit.take()))
            return "stop" if cuda else "failed"
        self.calls_in_window += 1
        outs = self.flatten(timed.result)
        self.kept[msg.call_id] = (outs, inputs, [])
        report.update(
            ok=True, stream_ms=timed.stream_ms, device_ms=timed.device_ms, enqueue_us=timed.enqueue_us,
            idle_ms=timed.idle_ms,
            launches=guards.COUNTER.total - launches_before, dsl_names=tuple(sorted(guards.COUNTER.names))[:64],
            aten_ops=tuple(sorted(recorder.ops))[:256] if recorder is not None else (),
            aten_elements=dict(sorted(recorder.elements.items())[:256]) if recorder is not None else {},
            input_elements=sum(x.numel() for x in inputs if isinstance(x, torch.Tensor)),
            new_threads=guards.candidate_threads(threads_before | self.threads_ok, self.roots),
            output_types=tuple(type(o).__module__ + "." + type(o).__qualname__ for o in outs)[:64],
            audit_blocked=self.audit.take(), prep_us=prep_us,
        )
        # committed before the parent decides anything about this call
        report["outputs"] = self.commit(w, msg.call_id, "out", outs)
        if msg.commit_inputs:
            report["inputs"] = self.commit(w, msg.call_id, "in", [x for x in inputs if isinstance(x, torch.Tensor)])
        report["wall_us"] = (time.perf_counter() - t_start) * 1e6
        self.send(P.CallReport(**report))
        return "ok"

    def commit(self, w: P.WorkloadSpec, cid: int, part: str, tensors: list) -> P.Committed:
        """Where the checker can read ``tensors`` (one call's outputs or inputs): CUDA IPC handles of their memory
        (kept alive until the call is released), else a raw file in the hand-off folder. By address, never
        through the dispatcher or pickle (:mod:`harness.execute.worker.outputs`)."""
        try:
            ipc = self.reader.export(tensors) if (self.spec.handoff == "ipc" and self.cuda) else None
            if ipc is not None:
                return P.Committed(ipc=tuple(ipc))
            path = f"{self.spec.handoff_dir}/{w.name}.c{cid}.{part}.raw"
            self.reader.write(tensors, path)
        except self.not_plain as exc:
            return P.Committed(error=P.Error("NotTensors", str(exc)))
        except Exception as exc:  # noqa: BLE001 - a refused device copy, a full disk: the report says so
            return P.Committed(error=P.error_from_exception(exc, 2000))
        entry = self.kept.get(cid)
        if entry is not None:
            entry[2].append(path)
        return P.Committed(path=path)

    def release(self, call_ids: Any) -> None:
        """Drop kept calls: their outputs and inputs, and the files they were committed to."""
        for cid in list(call_ids):
            entry = self.kept.pop(cid, None)
            for path in entry[2] if entry is not None else ():
                try:
                    os.unlink(path)
                except OSError:
                    pass

    def prepare_batch(self, module: Any, w: P.WorkloadSpec, msg: P.Batch, fwd_seed: bool) -> None:
        """Make a batch's inputs on this (the trusted) thread; the candidate first sees them in RunBatch."""
        spec = self.spec
        try:
            self.prepared = [(cid, self.make_inputs(module, w.dtype, self.device, seed, tr, spec.input_transform),
                              seed if fwd_seed else None) for cid, seed, tr in zip(msg.call_ids, msg.seeds, msg.transforms)]
            self.timer.sync()
        except BaseException as exc:  # noqa: BLE001
            self.prepared = []
            self.send(P.BatchReady(calls=0, error=P.error_from_exception(exc), out_of_memory=_is_oom(exc)))
            return
        self.send(P.BatchReady(calls=len(self.prepared)))

    def run_batch(self, model: Any, w: P.WorkloadSpec, msg: P.RunBatch) -> str:
        """The prepared calls back to back, then one device-wide synchronize, then every call's outputs committed
        (the parent's clock runs from the request until it has stopped this process after the report)."""
        wanted = set(msg.call_ids)
        calls = [c for c in self.prepared if c[0] in wanted]
        self.prepared = [c for c in self.prepared if c[0] not in wanted]
        n = 0
        try:
            if self.cuda:
                fn, args = self.forward, [(model, inputs, seed) for _, inputs, seed in calls]
            else:  # the same forward as every other call: the recorder is no tell
                fn, args = _recorded_forward, [(model, inputs, seed, self.guards.AtenRecorder())
                                               for _, inputs, seed in calls]
            outs, failed = self.cthread.run(self.run_all, fn, args)  # the whole batch in one hand-over
            for (cid, inputs, _), out in zip(calls, outs):
                self.kept[cid] = (self.flatten(out), inputs, [])
                n += 1
            if failed is not None:
                raise failed
            self.timer.sync()
        except BaseException as exc:  # noqa: BLE001
            cuda = _is_cuda_error(exc)
            self.send(P.BatchReport(calls=n, error=P.error_from_exception(exc), cuda_error=cuda,
                                    out_of_memory=_is_oom(exc)))
            return "stop" if cuda else "ok"
        committed = tuple(self.commit(w, cid, "out", self.kept[cid][0]) for cid, _, _ in calls)
        self.send(P.BatchReport(calls=n, outputs=committed))
        return "ok"

    def kernels(self) -> None:
        kernels = self.profiler.window()
        att = self.attribute(kernels)
        rows = sorted(att.rows.items(), key=lambda kv: -kv[1][0])[:200]
        self.send(P.KernelReport(
            profiler=self.profiler.status, markers=att.markers, calls=self.calls_in_window,
            rows=tuple(P.KernelRow(name=n[:300], inside_us=a, count=c, outside_us=o) for n, (a, c, o) in rows),
            dsl_names=tuple(sorted(self.guards.COUNTER.names))[:256], patched=tuple(self.tamper.changed()),
            side_us=att.side_us, dry_aten_elements=self.dry_record[0], dry_input_elements=self.dry_record[1]))
        self.calls_in_window = 0


def _read_line(fd: int, limit: int = 1 << 20) -> bytes | None:
    """One line from ``fd``, read byte by byte (nothing after it is consumed); None at end of file."""
    line = b""
    while not line.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk or len(line) > limit:
            return None
        line += chunk
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.execute.worker.main", description=__doc__.splitlines()[0])
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--prestart", metavar="JSON", help="pre-started worker: cross the boundary and warm up "
                        "with these settings (device, isolation, max_file_bytes, problem_paths, cpu_threads), then "
                        "wait for the spec")
    parser.add_argument("--watch-pid", type=int, help="the process whose end ends this worker (default: its "
                        "parent; a forked worker's is the harness, not the fork server)")
    args = parser.parse_args(argv)

    from harness.execute.boundary.enter import enter
    from harness.execute.wire.channel import Endpoint
    from harness.execute.worker import warmup

    pre = json.loads(args.prestart) if args.prestart else None
    if pre is None:  # the spec first (before the boundary: nothing of the candidate exists yet)
        line = _read_line(args.in_fd)
        if line is None:
            return 3  # the parent went away before giving us a candidate
        spec = P.decode(json.loads(line), (P.Spec,))
        settings = {"device": spec.device, "isolation": spec.isolation, "max_file_bytes": spec.max_file_bytes,
                    "cpu_threads": spec.cpu_threads, "tilelang": spec.dsl == "tilelang"}
        problem_paths = [spec.problem_path]
    else:
        settings, problem_paths = pre, list(pre["problem_paths"])
    confinement = enter(settings, problem_paths, lifeline_pid=args.watch_pid)  # the keeper stays behind, outside
    gate_fds = (args.in_fd, args.out_fd) if pre is not None and pre.get("gpu_gate") else None
    warm = warmup.warm_up(settings, gate_fds)
    if pre is not None:
        os.write(args.out_fd, P.warm_line(warm["laps"]))  # the pool hands out only warm workers
        line = _read_line(args.in_fd)
        if line is None:
            return 3  # the pool closed before giving us a candidate
        spec = P.decode(json.loads(line), (P.Spec,))
    chan = Endpoint(args.in_fd, args.out_fd)
    if pre is not None and (spec.problem_path not in pre["problem_paths"]
                            or spec.isolation != pre.get("isolation", "strict")):
        chan.send(P.encode(P.Fatal(status="HARNESS_ERROR", error=P.Error(
            "PrestartMismatch", "pre-started worker was set up for other problems or isolation settings than its "
            "candidate's spec", ""))))
        return 4
    worker = Worker(spec, chan, warm, confinement)
    try:
        worker.run()
    finally:
        log = getattr(worker, "audit", None)
        if log is not None and log.disarm is not None:
            log.disarm()  # the candidate's objects may be finalized at exit, on this thread: no verdict
    return 0


if __name__ == "__main__":
    sys.exit(main())
