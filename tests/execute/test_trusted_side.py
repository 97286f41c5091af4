"""The trusted side protects itself: a checker whose scheduling or limits were changed is replaced before a timing
phase relies on it; a checker that dies is replaced, the candidate alive at the time is run again alone with a
fresh one, and only a second failure is charged to it, never to the next candidate.

Exploits these stop: a candidate that re-limited or re-scheduled the checker (SCHED_IDLE: the library timed up
to 6x slower, inflating every later candidate's E_lib; RLIMIT_CPU: the checker killed) had its own wrong kernel
turned into HARNESS_ERROR (no penalty) and the next honest candidates' results ruined. The OS boundary keeps
workers from naming the checker at all (tests/execute/test_boundary_exploits.py); these tests play the part of
anything else that does, and of a checker failure a candidate's outputs provoke.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from harness import env as envmod
from harness.execute.parent import checker_client
from harness.execute.parent.checker_client import CheckerPool
from harness.execute.parent.options import RunOptions
from harness.execute.wire import protocol as P
from harness.measure.timing import TimingConfig
from harness.pipeline import EvalRequest, evaluate
from harness.problems.registry import load_registry

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "submissions" / "triton-reference"


def test_a_checker_whose_scheduling_or_limits_changed_is_replaced_before_a_lease(tmp_path):
    pool = CheckerPool("cpu", None, tmp_path / "checker", size=1)
    try:
        pool.request(P.Ping(), "k")  # its first answer: what it should stay like
        first = pool.procs[0]
        os.setpriority(os.PRIO_PROCESS, first.proc.pid, 19)  # what a saboteur did to it
        with pool.lease("k") as leased:
            assert leased is not first and leased.proc.pid != first.proc.pid
            assert isinstance(leased.request(P.Ping()), P.OkReply)
        assert first.proc.poll() is not None  # the altered one is gone
        assert pool.replaced and "niceness" in pool.replaced[0]
        with pool.lease("k") as again:  # the fresh one is kept while nothing changes it
            assert again is leased
    finally:
        pool.close()


def test_a_checker_that_dies_is_replaced_for_the_next_request(tmp_path):
    pool = CheckerPool("cpu", None, tmp_path / "checker", size=1)
    try:
        pool.request(P.Ping(), "k")
        os.kill(pool.procs[0].proc.pid, signal.SIGKILL)
        with pytest.raises(checker_client.CheckerDied):
            pool.request(P.Ping(), "k")
        reply, _ = pool.request(P.Ping(), "k")
        assert isinstance(reply, P.OkReply) and len(pool.replaced) == 1
    finally:
        pool.close()


def _folder(tmp_path: Path, names: list[str]) -> Path:
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"generator": "trusted-side", "version": "1"}')
    for name in names:
        (folder / f"{name}.py").write_text((REFERENCE / f"{name}.py").read_text())
    return folder


def _run(tmp_path: Path, folder: Path) -> dict:
    opts = RunOptions(device="cpu", timing=TimingConfig.for_device("cpu"), jobs=1, time_kernels=False,
                      compile_timeout_s=120, round_timeout_s=60)
    req = EvalRequest(submissions=[folder], registry=load_registry(), out_dir=tmp_path / "out", options=opts,
                      env=envmod.snapshot("cpu"), workload_tags=("smoke",), progress=False)
    return {Path(r.candidate).stem: r for r in evaluate(req)}


@pytest.mark.parametrize("failures, expected", [(1, "PASSED"), (99, "RUNTIME_ERROR")])
def test_a_checker_failure_while_a_candidate_lives_is_investigated_then_charged(tmp_path, monkeypatch, failures,
                                                                                  expected):
    """The checker dies while it reads gelu's outputs (as if they had made it fail): gelu is run again alone with
    a fresh checker. If that run succeeds, gelu is PASSED (once: not its doing); if the checker fails again
    while reading gelu's outputs, gelu is charged (RUNTIME_ERROR, a failure); silu, evaluated after it, is
    PASSED either way."""
    left = {"n": failures}
    real = checker_client.CheckerProcess.request

    def request(self, req):
        if isinstance(req, P.Compare) and req.ctx.problem_path.endswith("gelu.py") and left["n"] > 0:
            left["n"] -= 1
            os.kill(self.proc.pid, signal.SIGKILL)  # the checker dies while it serves this candidate
        return real(self, req)

    monkeypatch.setattr(checker_client.CheckerProcess, "request", request)
    got = _run(tmp_path, _folder(tmp_path, ["gelu", "silu"]))
    gelu, silu = got["gelu"], got["silu"]
    assert gelu.status.value == expected, (gelu.status, gelu.error)
    assert gelu.attempts == 2 and any("trusted checker failed" in w for w in gelu.warnings)
    if expected == "RUNTIME_ERROR":
        assert gelu.error.type == "TrustedSideFailure" and "charged to the candidate" in gelu.error.message
    assert silu.status.value == "PASSED" and silu.attempts == 1, (silu.status, silu.error)
