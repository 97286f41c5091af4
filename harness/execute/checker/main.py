"""The trusted checker: reference outputs, comparisons, and the library baseline.

A long-lived subprocess of the parent (``python -m harness.execute.checker.main``)
speaking :mod:`harness.execute.wire.protocol` as JSON lines on stdin/stdout. It
imports problem code only (trusted), never candidate code, so the reference
outputs, the library's timing and the library's outputs live in a process
the candidate cannot reach. It uses the GPU; the parent never does.

What it does, per request:

* ``Compare`` (correctness): the problem's ``Model`` in float64 on upcast
  inputs and the library's own output at the workload dtype for (seed,
  transform), against the candidate's handed-off output
  (:func:`harness.score.correctness.compare_outputs`); the candidate's
  handed-off inputs against the checker's own copy (an input the forward
  changed); and how many output elements are bit-identical to the library's
  (a fingerprint of a library fallback, judged by the parent).
* ``LibSample``: one library call timed exactly like a worker's call
  (:meth:`harness.measure.timing.DeviceTimer.timed_call`, the forward on a
  thread of its own as the candidate's is), on the checker's own inputs for
  the same (seed, transform); its output may be kept for a ``Verify``.
  ``LibSamples``: a block of them in one request (the timing phase's).
* ``Verify``: a timed call's handed-off output against the kept library
  output of the same inputs.
* ``LibBatch`` / ``RunLibBatch``: make a batch's inputs (untimed), then run
  the library on them back to back, for the parent's wall clock.
* ``LibKernels``: the library's forward under the profiler: which kernels the
  library op is made of on this device.
* ``FairnessProbe``: which value profiles are fair for a workload
  (:mod:`harness.execute.checker.fairness`). A reference of a sum carries its
  error scale (:mod:`harness.execute.checker.terms`) for ``Compare`` and ``Verify``.

References are cached, least recently used first out, up to
``KERNELGATE_CHECKER_CACHE_MB`` (default 4096) per process: every candidate
of a run gets the same correctness seeds for a workload, so the candidates of
one problem share one reference computation.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections import OrderedDict
from pathlib import Path
from typing import Any

from harness.execute.checker.terms import trail_for
from harness.execute.wire import protocol as P

_REF_CACHE: "OrderedDict[str, tuple[list, list]]" = OrderedDict()
_REF_CACHE_MAX_ENTRIES = 64
_CTX: "OrderedDict[str, Any]" = OrderedDict()
_CTX_MAX = 8
_KEPT: dict[int, tuple[list, P.Context, int, int]] = {}
_TERMS: "OrderedDict[str, list]" = OrderedDict()  # the sums' error scales of a cached reference (same key)
_STATE: dict[str, Any] = {}


def cache_limit_bytes() -> int:
    try:
        return max(0, int(os.environ.get("KERNELGATE_CHECKER_CACHE_MB", "4096"))) << 20
    except ValueError:
        return 4096 << 20


def _nbytes(entry: tuple[list, list]) -> int:
    return sum(t.numel() * t.element_size() for part in entry for t in part)


def _flags(ctx: P.Context) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = bool(ctx.allow_tf32)
    torch.backends.cudnn.allow_tf32 = bool(ctx.allow_tf32)
    torch.set_float32_matmul_precision("high" if ctx.allow_tf32 else "highest")


def _inputs(ctx: P.Context, module: Any, seed: int, transform: int) -> list:
    from harness.execute.shared.inputs import make_inputs

    return make_inputs(module, ctx.dtype, ctx.device, seed, transform, ctx.input_transform)


def _fwd_seed(ctx: P.Context, seed: int) -> int | None:
    return seed if ctx.mode == "train" else None


class _Baseline:
    """The library for one context: its module, model (eager or compiled), and a thread to call it on."""

    def __init__(self, ctx: P.Context):
        import torch

        from harness.execute.shared.threads import CandidateThread
        from harness.execute.shared.inputs import make_reference_model
        from harness.problems.loader import load_module

        self.ctx = ctx
        self.module = load_module(Path(ctx.problem_path), ctx.params)
        self.model = make_reference_model(self.module, ctx.dtype, ctx.device, ctx.model_seed, ctx.mode)
        if ctx.baseline == "compile":
            self.model = torch.compile(self.model)
        self.thread = CandidateThread()  # the library's forward crosses a thread as the candidate's does
        self.last_enqueue_us: float | None = None


def _baseline(ctx: P.Context) -> _Baseline:
    key = ctx.key
    if key in _CTX:
        _CTX.move_to_end(key)
        return _CTX[key]
    _flags(ctx)
    b = _Baseline(ctx)
    if ctx.baseline == "compile":  # compile now, not inside the first timed sample
        from harness.execute.shared.threads import forward

        b.thread.run(forward, b.model, _inputs(ctx, b.module, 0, 0), _fwd_seed(ctx, 0))
    _CTX[key] = b
    while len(_CTX) > _CTX_MAX:
        _, old = _CTX.popitem(last=False)
        old.thread.stop()
    return b


def _timer(device: str) -> Any:
    from harness.measure.timing import DeviceTimer, TimingConfig

    if "timer" not in _STATE:
        flush = TimingConfig.for_device("cpu" if device == "cpu" else "cuda").flush_bytes
        _STATE["timer"] = DeviceTimer(device, flush)
    return _STATE["timer"]


def _reference(ctx: P.Context, seed: int, transform: int) -> tuple[list, list]:
    """(float64 references, library outputs at the workload dtype) for one call's inputs, cached."""
    import torch

    from harness.execute.shared.threads import forward
    from harness.execute.shared.inputs import flatten_outputs, make_reference_model

    key = json.dumps([ctx.key, seed, transform])
    if key in _REF_CACHE:
        _REF_CACHE.move_to_end(key)
        return _REF_CACHE[key]
    b = _baseline(ctx)
    _flags(ctx)
    inputs = _inputs(ctx, b.module, seed, transform)
    libs = [t.detach() for t in flatten_outputs(b.thread.run(forward, b.model, [x.clone() if isinstance(x, torch.Tensor)
                                                                            else x for x in inputs], _fwd_seed(ctx, seed)))]
    with torch.no_grad(), trail_for(ctx.sums) as trail:
        try:
            model64 = make_reference_model(b.module, "float64", ctx.device, ctx.model_seed, ctx.mode)
            in64 = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            if ctx.mode == "train":
                torch.manual_seed(seed)
            outs = flatten_outputs(model64(*in64))
        except (RuntimeError, TypeError, NotImplementedError):
            # op without a float64 kernel on this device: fall back to float32 on upcast inputs
            model32 = make_reference_model(b.module, "float32", ctx.device, ctx.model_seed, ctx.mode)
            in32 = [x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs]
            if ctx.mode == "train":
                torch.manual_seed(seed)
            outs = flatten_outputs(model32(*in32))
        _TERMS[key] = trail(outs)
        refs = [t.detach().double() for t in outs]
    while len(_TERMS) > _REF_CACHE_MAX_ENTRIES:
        _TERMS.popitem(last=False)
    limit = cache_limit_bytes()
    if _nbytes((refs, libs)) <= limit:
        _REF_CACHE[key] = (refs, libs)
        while len(_REF_CACHE) > _REF_CACHE_MAX_ENTRIES or sum(_nbytes(e) for e in _REF_CACHE.values()) > limit:
            _REF_CACHE.popitem(last=False)
    return refs, libs


def _terms_of(ctx: P.Context, seed: int, transform: int) -> list | None:
    """The sums' error scales of the reference :func:`_reference` computed for these inputs (None: unknown)."""
    key = json.dumps([ctx.key, seed, transform])
    if key in _TERMS:
        _TERMS.move_to_end(key)
    return _TERMS.get(key)


def fairness_probe(req: P.FairnessProbe) -> P.FairnessReply:
    """Which value profiles are fair (:func:`harness.execute.checker.fairness.answer`), with the rounds' own
    reference and library (:func:`_reference`)."""
    from harness.execute.checker.fairness import answer

    def reference(seed: int, profile: int) -> tuple[list, list, list | None, Any]:
        return (*_reference(req.ctx, seed, profile), _terms_of(req.ctx, seed, profile), _baseline(req.ctx).module)

    return answer(req, reference)


def _busy_reads() -> int:
    """Reads that started with the GPU busy since the last reply (:mod:`harness.execute.checker.gpu_idle`)."""
    from harness.execute.checker.outputs import STATE

    n, STATE["busy_reads"] = STATE["busy_reads"], 0
    return n


def _failed(status: str, detail: str) -> P.CompareReply:
    return P.CompareReply(ok=False, status=status, detail=detail)


def _read(committed: Any, expected: list, folder: str | None) -> tuple[list | None, str, str]:
    """(tensors, "", "") or (None, status, detail): a committed read, checked against ``expected`` first."""
    from harness.execute.checker.outputs import read
    from harness.execute.wire.outputs import CommitError, CommitMalformed, LayoutMismatch

    try:
        return read(committed, expected, folder), "", ""
    except LayoutMismatch as exc:
        return None, exc.status, str(exc)
    except CommitMalformed as exc:
        return None, "REWARD_HACK", f"committed outputs malformed: {exc}"
    except CommitError as exc:
        return None, "HARNESS_ERROR", (f"committed outputs could not be read ({exc}); if this repeats for every "
                                       "candidate, rerun with --handoff file")


def _mutated(ctx: P.Context, b: _Baseline, seed: int, transform: int, committed: Any,
             folder: str | None) -> list[int] | str:
    """Indices of tensor inputs the candidate's forward changed, or a message when they cannot be read."""
    import torch

    from harness.execute.checker.outputs import expected_of

    ours = [x for x in _inputs(ctx, b.module, seed, transform) if isinstance(x, torch.Tensor)]
    theirs, status, detail = _read(committed, expected_of(ours), folder)
    if theirs is None:
        return detail
    return [i for i, (a, o) in enumerate(zip(theirs, ours)) if not torch.equal(a.to(o.device), o)]


def _fingerprint(outs: list, refs: list, libs: list) -> tuple[float | None, float | None]:
    """(share of elements bit-identical to the library, share where the library differs from round(ref64))."""
    from harness.score.correctness import CHUNK

    same = diff = total = 0
    for o, r, lib in zip(outs, refs, libs):
        if not lib.is_floating_point() or o.shape != lib.shape or o.dtype != lib.dtype:
            continue
        o, lf, rf = o.to(lib.device).reshape(-1), lib.reshape(-1), r.reshape(-1)
        total += lib.numel()
        for a in range(0, lf.numel(), CHUNK):  # chunked: no full-size temporaries at KernelBench's sizes
            same += int((o[a:a + CHUNK] == lf[a:a + CHUNK]).sum())
            diff += int((lf[a:a + CHUNK] != rf[a:a + CHUNK].to(lib.dtype)).sum())
    if not total:
        return None, None
    return same / total, diff / total


def compare(req: P.Compare) -> P.CompareReply:
    import torch

    from harness.execute.checker.outputs import expected_of, still_equal
    from harness.score.correctness import compare_outputs

    t0 = time.perf_counter()
    refs, libs = _reference(req.ctx, req.seed, req.transform)
    if refs and refs[0].is_cuda:
        torch.cuda.synchronize()
    t1 = time.perf_counter()
    folder = req.handoff_dir or None
    outs, status, detail = _read(req.outputs, expected_of(libs), folder)
    if outs is None:
        return _failed(status, detail)
    if not req.in_place and req.inputs is not None:
        changed = _mutated(req.ctx, _baseline(req.ctx), req.seed, req.transform, req.inputs, folder)
        if isinstance(changed, str):
            return _failed("REWARD_HACK", f"inputs could not be checked after the forward: {changed}")
        if changed:
            return _failed("REWARD_HACK", f"forward modified its input(s) {changed} (the problem is not in-place)")
    res = compare_outputs(outs, refs, libs, atol=req.atol, rtol=req.rtol, reduction_length=req.reduction_length,
                          terms=_terms_of(req.ctx, req.seed, req.transform))
    same, diff = _fingerprint(outs, refs, libs) if res["ok"] else (None, None)
    if refs and refs[0].is_cuda:
        torch.cuda.synchronize()
    changed_while_read = not still_equal(req.outputs, outs)
    return P.CompareReply(busy_at_read=_busy_reads() > 0, ok=res["ok"], status=res["status"], detail=res["detail"], max_abs_err=res["max_abs_err"],
                          max_excess=res["max_excess"], library_max_excess=res["library_max_excess"],
                          identical_fraction=same, library_rounding_fraction=diff, ref_s=round(t1 - t0, 4),
                          check_s=round(time.perf_counter() - t1, 4), changed_while_read=changed_while_read,
                          worst=P.Worst(**res["worst"]) if res.get("worst") else None)


def lib_sample(req: P.LibSample) -> P.LibSampleReply:
    return _lib_call(req.ctx, req.seed, req.transform, req.hold_us, req.keep_id)


def lib_samples(req: P.LibSamples) -> P.LibSamplesReply:
    """A block of library calls, one after another (the worker's CallBlock on this side)."""
    return P.LibSamplesReply(samples=tuple(_lib_call(req.ctx, c.seed, c.transform, req.hold_us, c.keep_id)
                                           for c in req.calls))


def _lib_call(ctx: P.Context, seed: int, transform: int, hold_us: float, keep_id: int | None) -> P.LibSampleReply:
    """One library call timed exactly like a worker's timed call (fresh inputs, flush, hold, events)."""
    from harness.execute.shared.threads import forward
    from harness.execute.shared.inputs import flatten_outputs

    t0 = time.perf_counter()
    b = _baseline(ctx)
    _flags(ctx)
    timer = _timer(ctx.device)
    inputs = _inputs(ctx, b.module, seed, transform)  # no poison: as the worker's timed calls
    prep_us = (time.perf_counter() - t0) * 1e6
    fwd_seed = _fwd_seed(ctx, seed)
    t = timer.timed_call(lambda: b.thread.run(forward, b.model, inputs, fwd_seed), hold_us)
    if keep_id is not None:
        _KEPT[keep_id] = ([x.detach() for x in flatten_outputs(t.result)], ctx, seed, transform)
    return P.LibSampleReply(stream_ms=t.stream_ms, device_ms=t.device_ms, enqueue_us=t.enqueue_us, idle_ms=t.idle_ms,
                            prep_us=prep_us, wall_us=(time.perf_counter() - t0) * 1e6)


def verify(req: P.Verify) -> P.VerifyReply:
    from harness.execute.checker.outputs import expected_of, still_equal
    from harness.score.correctness import compare_outputs

    kept = _KEPT.pop(req.keep_id, None)
    if kept is None:
        return P.VerifyReply(ok=False, status="HARNESS_ERROR", detail=f"no kept library output {req.keep_id}")
    libs, ctx, seed, transform = kept
    folder = req.handoff_dir or None
    outs, status, detail = _read(req.outputs, expected_of(libs), folder)
    if outs is None:
        return P.VerifyReply(ok=False, status=status, detail=detail)
    if not req.in_place and req.inputs is not None:
        changed = _mutated(ctx, _baseline(ctx), seed, transform, req.inputs, folder)
        if isinstance(changed, str) or changed:
            return P.VerifyReply(ok=False, status="REWARD_HACK",
                                 detail=f"a timed call modified its input(s): {changed}")
    # the library's kept output is the reference here; the comparison reads it chunk by chunk, as float32 (no
    # operand is float64). A sum's error scale is the float64 reference's of these inputs, times the factor
    terms = _reference(ctx, seed, transform) and _terms_of(ctx, seed, transform) if ctx.sums else None
    terms = [t * req.tolerance_factor if t is not None else None for t in terms] if terms else None
    res = compare_outputs(outs, libs, libs, atol=req.atol * req.tolerance_factor, rtol=req.rtol * req.tolerance_factor,
                          reduction_length=req.reduction_length, terms=terms)
    changed = not still_equal(req.outputs, outs)
    return P.VerifyReply(ok=res["ok"], status=res["status"], detail=res["detail"], max_excess=res["max_excess"],
                         changed_while_read=changed, busy_at_read=_busy_reads() > 0)


def lib_batch(req: P.LibBatch) -> P.BatchReply:
    """Prepare a batch: its inputs, made now (the parent does not time this)."""
    b = _baseline(req.ctx)
    _flags(req.ctx)
    keep = {int(k): int(v) for k, v in req.keep.items()}
    _STATE["batch"] = (b, [(_inputs(req.ctx, b.module, seed, tr), _fwd_seed(req.ctx, seed), keep.get(j), seed, tr)
                           for j, (seed, tr) in enumerate(zip(req.seeds, req.transforms))])
    _timer(req.ctx.device).sync()
    return P.BatchReply(calls=len(req.seeds))


def run_lib_batch(req: P.RunLibBatch) -> P.BatchReply:
    """Run the library on the prepared batch back to back, then synchronize (the parent times this)."""
    from harness.execute.shared.threads import forward, run_all
    from harness.execute.shared.inputs import flatten_outputs

    if req.empty:
        return P.BatchReply(calls=0)
    b, calls = _STATE.pop("batch")
    # the whole batch in one hand-over to the library's thread, as the worker's
    outs, failed = b.thread.run(run_all, forward, [(b.model, inputs, seed) for inputs, seed, _, _, _ in calls])
    if failed is not None:
        raise failed
    for (_, _, keep_id, s, tr), out in zip(calls, outs):
        if keep_id is not None:
            _KEPT[keep_id] = ([t.detach() for t in flatten_outputs(out)], b.ctx, s, tr)
    _timer(b.ctx.device).sync()
    return P.BatchReply(calls=len(calls))


def lib_kernels(req: P.LibKernels) -> P.LibKernelsReply:
    from harness.execute.shared.threads import forward
    from harness.execute.shared.profiling import KernelProfiler, attribute

    if "profiler" not in _STATE:
        _STATE["profiler"] = KernelProfiler(req.ctx.device, running=False)
    prof = _STATE["profiler"]
    if not prof.available:
        return P.LibKernelsReply(profiler=prof.status, rows=())
    b = _baseline(req.ctx)
    _flags(req.ctx)
    timer = _timer(req.ctx.device)
    timer.calibrate()
    inputs = _inputs(req.ctx, b.module, 1, 0)
    b.thread.run(forward, b.model, inputs, _fwd_seed(req.ctx, 1))  # warm: lazy inits stay out of the window
    prof.begin()
    for k in range(3):
        timer.timed_call(lambda: b.thread.run(forward, b.model, inputs, _fwd_seed(req.ctx, 1)), 50.0)
    att = attribute(prof.end())
    rows = tuple(P.KernelRow(name=n[:300], inside_us=a / 3, count=max(1, c // 3), outside_us=o / 3)
                 for n, (a, c, o) in att.rows.items() if a > 0)
    return P.LibKernelsReply(profiler=prof.status, rows=rows)


def handle(req: Any) -> Any:
    if isinstance(req, P.Ping):
        return P.OkReply()
    if isinstance(req, P.Drop):
        for k in req.keep_ids:
            _KEPT.pop(k, None)
        _STATE.pop("batch", None)
        return P.OkReply()
    handler = {P.Compare: compare, P.LibSample: lib_sample, P.LibSamples: lib_samples, P.Verify: verify,
               P.LibBatch: lib_batch, P.RunLibBatch: run_lib_batch, P.LibKernels: lib_kernels,
               P.FairnessProbe: fairness_probe}[type(req)]
    return handler(req)


def _out_of_memory(exc: BaseException) -> bool:
    return "out of memory" in f"{type(exc).__name__}: {exc}".lower() or "OutOfMemoryError" in type(exc).__name__


def _free_memory() -> None:
    """After an out-of-memory: drop every cache so the next request starts from nothing."""
    _REF_CACHE.clear()
    _TERMS.clear()
    _KEPT.clear()
    while _CTX:
        _, b = _CTX.popitem()
        b.thread.stop()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        pass


TRIM_BYTES = 1 << 30


def _trim() -> None:
    """Give the caching allocator's free blocks back to the device after a request that allocated much (a
    float64 reference, a comparison): between requests a checker holds only its bounded reference cache, never
    memory the jobs admitted beside it were promised (seen on the H200: three idle checkers held 108 GiB)."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return
    if torch.cuda.memory_reserved() - torch.cuda.memory_allocated() > TRIM_BYTES:
        torch.cuda.empty_cache()


def _warm_up() -> None:
    """Pay torch's import and the CUDA context at start-up, not inside the first candidate's check."""
    import torch

    torch.set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS", "1") or 1)))
    import harness.execute.checker.outputs  # noqa: F401
    import harness.execute.shared.inputs  # noqa: F401
    import harness.problems.loader  # noqa: F401
    import harness.score.correctness  # noqa: F401

    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        torch.empty(1, device="cuda")
        from harness.execute.checker import gpu_idle, outputs

        probe = gpu_idle.cuda_probe()
        probe.calibrate()  # the idle baseline, before any candidate's worker can hold the GPU
        outputs.use_probe(probe)
        from harness.execute.shared.profiling import KernelProfiler

        _STATE["profiler"] = KernelProfiler("cuda", running=False)  # CUPTI's first start is slow: not in a check


def main() -> int:
    from harness.execute.shared.lifeline import watch_parent

    watch_parent()
    out = sys.stdout
    sys.stdout = sys.stderr  # anything printed by problem code must not corrupt the protocol
    _warm_up()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = handle(P.decode(json.loads(line), P.CHECKER_REQUESTS))
        except Exception as exc:  # noqa: BLE001
            oom = _out_of_memory(exc)
            if oom:
                _free_memory()
            reply = P.ErrorReply(status="HARNESS_ERROR", detail=f"{type(exc).__name__}: {str(exc)[:2000]}",
                                 traceback_tail=traceback.format_exc()[-3000:], out_of_memory=oom)
        out.write(json.dumps(P.encode(reply)) + "\n")
        out.flush()
        if not isinstance(reply, (P.LibSampleReply, P.LibSamplesReply, P.BatchReply)):
            _trim()  # not between timed library samples: their allocations are reused from the cache
    return 0


if __name__ == "__main__":
    sys.exit(main())
