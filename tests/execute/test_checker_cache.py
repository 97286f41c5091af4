"""The trusted checker's reference cache: one problem's references are computed once per run.

Every candidate of a run gets the same correctness seeds for a workload, so
the float64 reference of (problem, workload, round) is the same for all of
them; the parent sends a workload's compares to the checker process that
computed it (CheckerPool's affinity). On the H200 the reference was the
largest part of the harness's own time per candidate (up to 0.76 s per
workload for a convolution).
"""

from __future__ import annotations

import torch

from harness.execute.wire import protocol as P
from harness.execute.checker.main import _reference
from harness.execute.parent.checker_client import CheckerPool
from harness.execute.worker.outputs import OutputReader
from harness.problems.registry import load_registry


def _request(tmp_path, name: str) -> P.Compare:
    prob = load_registry().get("gelu")
    w = [w for w in prob.workloads if w.is_smoke][0]
    ctx = P.Context(problem_path=str(prob.path), params=dict(w.params), dtype=w.dtype, device="cpu", model_seed=11,
                    input_transform=prob.input_transform, allow_tf32=False)
    _, libs = _reference(ctx, 12, 0)  # the library's own output: a correct candidate
    path = tmp_path / f"{name}.raw"
    OutputReader(torch).write([t.clone() for t in libs], str(path))
    return P.Compare(ctx=ctx, seed=12, transform=0, atol=w.atol, rtol=w.rtol, reduction_length=w.reduction_length,
                     in_place=False, outputs=P.Committed(path=str(path)), handoff_dir=str(tmp_path))


def test_second_compare_of_a_workload_reuses_its_references(tmp_path):
    pool = CheckerPool("cpu", None, tmp_path / "checker", size=2)
    try:
        req = _request(tmp_path, "a")
        first, waited = pool.request(req, req.ctx.key)
        second, _ = pool.request(_request(tmp_path, "b"), req.ctx.key)  # another candidate, same workload and round
    finally:
        pool.close()
    assert first.ok and second.ok, (first, second)
    assert first.ref_s > 0 and waited >= 0
    # without the affinity the second compare would go to the other (idle) process and recompute
    assert second.ref_s < first.ref_s / 5, (first.ref_s, second.ref_s)


def test_checker_close_ends_every_process(tmp_path):
    pool = CheckerPool("cpu", None, tmp_path / "checker", size=3)
    pool.close(timeout_s=20)
    assert all(p.proc.poll() is not None for p in pool.procs)


def test_a_request_the_checker_cannot_serve_is_an_error_reply_not_a_crash(tmp_path):
    pool = CheckerPool("cpu", None, tmp_path / "checker", size=1)
    try:
        ctx = P.Context(problem_path=str(tmp_path / "missing.py"), params={}, dtype="float32", device="cpu",
                        model_seed=1, input_transform="any", allow_tf32=False)
        reply, _ = pool.request(P.LibBatch(ctx=ctx, seeds=(1,), transforms=(0,)), ctx.key)
        assert isinstance(reply, P.ErrorReply) and reply.status == "HARNESS_ERROR"
        again, _ = pool.request(P.Ping(), "x")  # the process is still serving
        assert isinstance(again, P.OkReply)
    finally:
        pool.close()
