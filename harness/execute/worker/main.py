"""The candidate worker: the only process that imports candidate code.

Started by the parent (``python -m harness.execute.worker.main --in-fd R --out-fd W``),
or forked by the run's fork server (:mod:`harness.execute.forkserver.server`, which has
imported torch and Triton but never holds anything of a run) and entering
:func:`main` the same way, in the candidate's scratch folder, with stdin closed and
stdout/stderr drained into capped buffers. The conversation is defined in
:mod:`harness.execute.wire.protocol`; this module carries it out.

Two threads (see :mod:`harness.execute.shared.threads`): the main thread
holds the signed channel, the timer, the profiler, the kept outputs and the
facts it reports; every line of candidate code (import, ``ModelNew(...)``,
``forward``) runs on the candidate's thread. Before the import, the worker
applies its resource limits and Landlock sandbox, installs audit hooks
(:mod:`harness.execute.worker.rules.audit`) and snapshots the identity of the functions it
relies on (:mod:`harness.execute.worker.rules.tamper`).

The worker reports *facts* and never decides a status. None of what it
reports is believed as such: outputs are judged by the trusted checker, the
library is timed in the checker, and the candidate's own timings are checked
against the parent's wall clock. Reference outputs never enter this process.
Every call's inputs are generated here from a seed the parent sends with that
call, so candidate code that reads the worker's memory cannot learn later
inputs; the run's base seed never leaves the parent.
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
COMPONENTS = ("spec", "chan", "sandbox", "torch", "guards", "device", "cuda", "forward", "run_all", "reader", "not_plain",
              "flatten", "make_inputs", "make_reference_model", "load_module", "attribute", "poison", "poison_bytes",
              "perf", "profiler", "timer", "cthread", "threads_ok", "audit", "tamper")
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

    def __init__(self, spec: P.Spec, chan: Any, warm: dict, sandbox: str):
        import torch

        from harness.execute.worker import guards
        from harness.execute.shared.threads import CandidateThread, forward, run_all
        from harness.execute.wire.handoff import NotPlain, OutputReader
        from harness.execute.shared.inputs import (flatten_outputs, make_inputs, make_reference_model, poison_allocator,
                                            poison_bytes)
        from harness.execute.shared.profiling import attribute
        from harness.measure.timing import DeviceTimer, TimingConfig
        from harness.problems.loader import load_module

        self.spec, self.chan, self.sandbox = spec, chan, sandbox
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
        self.children_seen: set[int] | None = None
        self.threads_ok = {self.cthread.ident} | {t.ident for t in threading.enumerate() if t.name == "kg-lifeline"}

    # ------------------------------------------------------------------ channel
    def send(self, msg: Any) -> None:
        self.chan.send(P.encode(msg))

    def recv(self, *expect: type) -> Any:
        raw = self.chan.recv()
        if raw is None:
            raise SystemExit(0)  # the parent went away
        return P.decode(raw, expect or None)

    # ------------------------------------------------------------------ life
    def run(self) -> None:
        from harness.execute.worker.rules import audit
        from harness.execute.worker.rules import spawn
        from harness.execute.worker.rules import trusted_thread
        from harness.execute.worker.rules.tamper import TamperCheck

        scratch = Path(self.spec.candidate_path).parent
        self.audit = audit.install((str(scratch),), exempt=tuple(str(scratch / d) for d in CACHE_DIRS))
        spawn.install(self.audit.state["transparent"])  # fork_exec raises an audit event too (spawn.py)
        guard = trusted_thread.arm(self.audit)  # this thread: candidate code called here ends the worker
        self.tamper = TamperCheck()
        self.tamper.snapshot()
        self.tamper.watch("worker", self, COMPONENTS)
        self.send(P.Ready(sandbox=self.sandbox, audit=f"python audit hooks (PEP 578); trusted thread guarded by {guard}",
                          profiler=self.profiler.status))
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
        if spec.precompile and self.cuda:
            # Compile (Triton JIT and every autotune config, TileLang nvcc) before asking for the
            # device, so compiles overlap other candidates' timing. Triton launches are dry here
            # (compile, no launch, no autotune benchmarking: guards.dry_launches). Errors are left
            # to the real calls to report.
            try:
                warm = self.make_inputs(module, w.dtype, self.device, w.warm_seed, 0, spec.input_transform)
                with self.guards.dry_launches():
                    self.cthread.run(self.forward, model, warm, None)
                torch.cuda.synchronize()
                del warm
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
        self.children_seen = None
        fwd_seed = spec.mode == "train"
        while True:
            msg = self.recv(P.Call, P.CallBlock, P.Handoff, P.Batch, P.RunBatch, P.Release, P.Kernels, P.EndWorkload)
            if isinstance(msg, P.Call):
                for cid in msg.release:
                    self.kept.pop(cid, None)
                if self.call(model, module, w, msg, fwd_seed) == "stop":
                    return "stop"
            elif isinstance(msg, P.CallBlock):
                for cid in msg.release:
                    self.kept.pop(cid, None)
                done = "ok"
                for c in msg.calls:
                    done = self.call(model, module, w, P.Call(call_id=c.call_id, seed=c.seed, transform=c.transform,
                                                              hold_us=msg.hold_us, poison=msg.poison), fwd_seed)
                    if done != "ok":
                        break  # the parent reads reports up to the first one that is not ok
                if done == "stop":
                    return "stop"
            elif isinstance(msg, P.Handoff):
                self.handoff(w, msg)
            elif isinstance(msg, P.Batch):
                self.prepare_batch(module, w, msg, fwd_seed)
            elif isinstance(msg, P.RunBatch):
                if self.run_batch(model, msg) == "stop":
                    return "stop"
            elif isinstance(msg, P.Release):
                for cid in msg.call_ids:
                    self.kept.pop(cid, None)
            elif isinstance(msg, P.Kernels):
                self.kernels()
            else:
                self.kept.clear()
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
        # the children seen after the previous call (one /proc scan per call: it reads a file per thread); a
        # child started between calls, by a thread of the candidate's, counts as this call's
        children_before = self.children_seen if self.children_seen is not None else self.guards.live_children()
        launches_before = guards.COUNTER.total
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
                                   lowered_sources=tuple(s[:200_000] for s in guards.COUNTER.lowered_sources)))
            return "ok"
        except BaseException as exc:  # noqa: BLE001
            cuda = _is_cuda_error(exc)
            self.send(P.CallReport(call_id=msg.call_id, ok=False, error=P.error_from_exception(exc), cuda_error=cuda,
                                   out_of_memory=_is_oom(exc), audit_blocked=self.audit.take()))
            return "stop" if cuda else "failed"
        self.calls_in_window += 1
        outs = self.flatten(timed.result)
        self.kept[msg.call_id] = (outs, inputs, None)
        report.update(
            ok=True, stream_ms=timed.stream_ms, device_ms=timed.device_ms, enqueue_us=timed.enqueue_us,
            idle_ms=timed.idle_ms,
            launches=guards.COUNTER.total - launches_before, dsl_names=tuple(sorted(guards.COUNTER.names))[:64],
            aten_ops=tuple(sorted(recorder.ops))[:256] if recorder is not None else (),
            new_threads=len(guards.live_threads() - threads_before - self.threads_ok),
            new_children=len(self._scan_children() - children_before),
            output_types=tuple(type(o).__module__ + "." + type(o).__qualname__ for o in outs)[:64],
            audit_blocked=self.audit.take(), prep_us=prep_us,
        )
        report["wall_us"] = (time.perf_counter() - t_start) * 1e6
        self.send(P.CallReport(**report))
        return "ok"

    def _scan_children(self) -> set[int]:
        self.children_seen = self.guards.live_children()
        return self.children_seen

    def handoff(self, w: P.WorkloadSpec, msg: P.Handoff) -> None:
        torch = self.torch
        entry = self.kept.get(msg.call_id)
        if entry is None:
            self.send(P.HandoffReport(call_id=msg.call_id, error=P.Error("UnknownCall", "no kept call with that id")))
            return
        outs, inputs, _ = entry
        tensors_in = [x for x in inputs if isinstance(x, torch.Tensor)] if (msg.inputs and inputs is not None) else None
        report: dict[str, Any] = {"call_id": msg.call_id}
        keep = []
        for part, tensors in (("output", outs), ("input", tensors_in)):
            if tensors is None:
                continue
            try:  # by address, never through the dispatcher or pickle (harness.execute.wire.handoff)
                exported = self.reader.export(tensors) if (self.spec.handoff == "ipc" and self.cuda) else None
                if exported is not None:
                    report[f"{part}_ipc"] = tuple(exported[0])
                    keep.append(exported[1])
                else:
                    path = f"{self.spec.handoff_dir}/{w.name}.c{msg.call_id}.{part}.raw"
                    report[f"{part}_digest"] = self.reader.write(tensors, path)
                    report[f"{part}_path"] = path
            except self.not_plain as exc:
                self.send(P.HandoffReport(call_id=msg.call_id, error=P.Error("NotTensors", str(exc))))
                return
        self.kept[msg.call_id] = (outs, inputs, keep)  # exported memory stays alive until released
        self.send(P.HandoffReport(**report))

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

    def run_batch(self, model: Any, msg: P.RunBatch) -> str:
        """The prepared calls back to back, then one device-wide synchronize (the parent's clock runs)."""
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
                self.kept[cid] = (self.flatten(out), inputs, None)
                n += 1
            if failed is not None:
                raise failed
            self.timer.sync()
        except BaseException as exc:  # noqa: BLE001
            cuda = _is_cuda_error(exc)
            self.send(P.BatchReport(calls=n, error=P.error_from_exception(exc), cuda_error=cuda,
                                    out_of_memory=_is_oom(exc)))
            return "stop" if cuda else "ok"
        self.send(P.BatchReport(calls=n))
        return "ok"

    def kernels(self) -> None:
        kernels = self.profiler.window()
        att = self.attribute(kernels)
        rows = sorted(att.rows.items(), key=lambda kv: -kv[1][0])[:200]
        self.send(P.KernelReport(
            profiler=self.profiler.status, markers=att.markers, calls=self.calls_in_window,
            rows=tuple(P.KernelRow(name=n[:300], inside_us=a, count=c, outside_us=o) for n, (a, c, o) in rows),
            dsl_names=tuple(sorted(self.guards.COUNTER.names))[:256], patched=tuple(self.tamper.changed()),
            new_children=len(self.guards.live_children()), side_us=att.side_us))
        self.calls_in_window = 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.execute.worker.main", description=__doc__.splitlines()[0])
    parser.add_argument("--in-fd", type=int, required=True)
    parser.add_argument("--out-fd", type=int, required=True)
    parser.add_argument("--prestart", metavar="JSON", help="pre-started worker: lock down and warm up with these "
                        "settings (device, sandbox, max_file_bytes, problem_paths, cpu_threads), then wait for the spec")
    parser.add_argument("--watch-pid", type=int, help="the process whose end ends this worker (default: its "
                        "parent; a forked worker's is the harness, not the fork server)")
    args = parser.parse_args(argv)

    from harness.execute.parent import reaper
    from harness.execute.worker import warmup
    from harness.execute.wire.channel import Endpoint
    from harness.execute.shared.lifeline import watch_parent

    # before anything of the candidate (and the audit hooks, which refuse ctypes to candidate code only): orphans
    # of the candidate's processes become this worker's children, seen by the child check and killed with its tree
    reaper.set_subreaper()
    pre = json.loads(args.prestart) if args.prestart else None
    sandbox, warm = "", None
    if pre is not None:
        sandbox = warmup.lock_down(pre, pre["problem_paths"])
        watch_parent(pid=args.watch_pid)  # after the lock-down: the thread is confined too (lifeline.py)
        warm = warmup.warm_up(pre, (args.in_fd, args.out_fd) if pre.get("gpu_gate") else None)
        os.write(args.out_fd, P.warm_line(warm["laps"]))  # the pool hands out only warm workers
    reader = os.fdopen(args.in_fd, "rb", buffering=0)
    line = b""
    while not line.endswith(b"\n"):
        chunk = reader.read(1)
        if not chunk:
            return 3  # the parent went away (or closed the pool) before giving us a candidate
        line += chunk
    spec = P.decode(json.loads(line), (P.Spec,))
    chan = Endpoint(reader, args.out_fd, bytes.fromhex(spec.key))  # the parent's commands follow the spec
    settings = {"device": spec.device, "sandbox": spec.sandbox, "max_file_bytes": spec.max_file_bytes,
                "cpu_threads": spec.cpu_threads, "tilelang": spec.dsl == "tilelang"}
    if pre is None:
        sandbox = warmup.lock_down(settings, [spec.problem_path])
        watch_parent(pid=args.watch_pid)  # until here the parent's end closes the channel: read() returns b""
        warm = warmup.warm_up(settings)
    elif spec.problem_path not in pre["problem_paths"] or bool(spec.sandbox) != bool(pre.get("sandbox", True)):
        chan.send(P.encode(P.Fatal(status="HARNESS_ERROR", error=P.Error(
            "PrestartMismatch", "pre-started worker was set up for other problems or sandbox settings than its "
            "candidate's spec", ""))))
        return 4
    worker = Worker(spec, chan, warm, sandbox)
    try:
        worker.run()
    finally:
        log = getattr(worker, "audit", None)
        if log is not None and log.disarm is not None:
            log.disarm()  # the candidate's objects may be finalized at exit, on this thread: no verdict
        reaper.kill_tree(os.getpid(), itself=False)  # its adopted orphans would outlive it (handed up the tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
