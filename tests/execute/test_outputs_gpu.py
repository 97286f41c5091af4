"""Committed outputs on a GPU: CUDA IPC reads by the checker of a worker's memory, with the worker confined and
stopped (needs a GPU; skipped elsewhere).

What this checks on the machine where users score kernels: that CUDA works inside the worker's namespaces, that
the checker can map a confined worker's allocations (the worker in its own user, PID and IPC namespaces), that it
can read them while the worker's whole tree is stopped, that the idle probe sees a GPU still held by a stopped
worker's queued kernel, and that bytes a still-running kernel changes between the two reads are seen.

Also runnable without pytest on the device machine: ``python tests/execute/test_outputs_gpu.py`` prints one line
per check.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
try:
    import pytest

    pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]
except ImportError:  # run as a script on a machine without pytest
    pytest = None

EXPORTER = """
import json, os, sys, torch
from harness.execute.worker.outputs import OutputReader
if sys.argv[1] == "confined":
    from harness.execute.boundary.enter import enter
    open("p.py", "w").close()
    got = enter({"isolation": "available"}, [os.path.abspath("p.py")])
    info = got.describe()
else:
    info = "not confined"
torch.manual_seed(0)
outs = [torch.randn(1000, 333, device="cuda", dtype=torch.bfloat16), torch.arange(7, device="cuda")[2:],
        torch.empty(0, device="cuda"), torch.randn(64, 64, device="cuda").t()]
descs = OutputReader(torch).export(outs)
if sys.argv[2] == "spin":  # a kernel queued last, still running after the report: it rewrites output 0 later
    torch.cuda._sleep(int(2e9))
    outs[0].add_(1)
print(json.dumps({"descs": descs, "sums": [float(o.double().sum()) for o in outs], "info": info}), flush=True)
sys.stdin.readline()  # keep the memory alive until the reader is done
"""
SHAPES = [([1000, 333], "bfloat16"), ([5], "int64"), ([0], "float32"), ([64, 64], "float32")]


def _exporter(tmp: Path, confined: bool = False, spin: bool = False) -> tuple[subprocess.Popen, dict]:
    proc = subprocess.Popen([sys.executable, "-c", EXPORTER, "confined" if confined else "plain",
                             "spin" if spin else "idle"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp,
                            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, text=True)
    return proc, json.loads(proc.stdout.readline())


def _close(proc: subprocess.Popen) -> None:
    try:
        proc.stdin.write("\n")
        proc.stdin.close()
        proc.wait(timeout=60)
    except Exception:  # noqa: BLE001
        proc.kill()


def _read(msg: dict) -> list:
    from harness.execute.checker.outputs import read
    from harness.execute.wire import protocol as P

    return read(P.Committed(ipc=tuple(msg["descs"])), SHAPES)


def _want() -> list:
    torch.manual_seed(0)
    return [torch.randn(1000, 333, device="cuda", dtype=torch.bfloat16), torch.arange(7, device="cuda")[2:],
            torch.empty(0, device="cuda"), torch.randn(64, 64, device="cuda").t()]


def test_outputs_arrive_intact_with_their_strides(tmp_path):
    proc, msg = _exporter(tmp_path)
    try:
        outs = _read(msg)
    finally:
        _close(proc)
    assert msg["descs"][3]["stride"] == [1, 64] and msg["descs"][1]["offset"] % 8 == 0
    assert all(torch.equal(a, b) for a, b in zip(outs, _want()))


def test_a_confined_and_stopped_worker_is_read_by_ipc(tmp_path):
    """The worker in its own user, PID and IPC namespaces, its tree stopped (as the parent does for every read)."""
    from harness.execute.parent import confinement, freeze

    proc, msg = _exporter(tmp_path, confined=True)
    try:
        assert "ns:user,pid" in msg["info"], msg["info"]
        worker = confinement.confined_pid(proc.pid)
        stopped = freeze.freeze(worker)
        try:
            outs = _read(msg)
        finally:
            freeze.thaw(stopped)
    finally:
        _close(proc)
    assert all(torch.equal(a, b) for a, b in zip(outs, _want()))


def test_a_kernel_still_running_after_the_stop_is_seen(tmp_path):
    """A worker that reports before its last kernel finished: the idle probe finds the GPU held, and the bytes the
    kernel writes after the first read differ at the second."""
    from harness.execute.checker import gpu_idle, outputs
    from harness.execute.parent import freeze
    from harness.execute.wire import protocol as P

    probe = gpu_idle.cuda_probe()
    probe.calibrate()
    proc, msg = _exporter(tmp_path, spin=True)
    try:
        stopped = freeze.freeze(proc.pid)
        try:
            idle, us = probe.wait_idle(wait_s=0.05)
            committed = P.Committed(ipc=tuple(msg["descs"]))
            first = outputs.read(committed, SHAPES)
            time.sleep(3.0)  # the queued sleep ends, the add runs
            same = outputs.still_equal(committed, first)
        finally:
            freeze.thaw(stopped)
    finally:
        _close(proc)
    assert not idle and us > gpu_idle.BUSY_FLOOR_US, (idle, us, probe.baseline_us)
    assert not same


def test_a_range_past_the_allocation_is_refused(tmp_path):
    from harness.execute.wire.outputs import CommitMalformed

    proc, msg = _exporter(tmp_path)
    try:
        bad = dict(msg["descs"][0], offset=1 << 30)
        with pytest.raises(CommitMalformed, match="outside the exported allocation"):
            _read({"descs": [bad] + msg["descs"][1:]})
    finally:
        _close(proc)


if __name__ == "__main__":
    import tempfile

    checks = [test_outputs_arrive_intact_with_their_strides, test_a_confined_and_stopped_worker_is_read_by_ipc,
              test_a_kernel_still_running_after_the_stop_is_seen]
    failed = 0
    for check in checks:
        try:
            check(Path(tempfile.mkdtemp()))
            print(check.__name__, "ok")
        except Exception as exc:  # noqa: BLE001
            failed += 1
            print(check.__name__, "FAILED", type(exc).__name__, str(exc)[:300])
    sys.exit(1 if failed else 0)
